package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/eventjson"
)

// ssePageSize is how many events the SSE snapshot reads per page.
const ssePageSize = app.MaxPageSize

// appendAuditEventList appends the REST list response,
// {"events": [...], "nextCursor": "…" or null}, each event in its public
// JSON shape (eventjson), then a newline.
func appendAuditEventList(b []byte, page app.AuditEventPage) ([]byte, error) {
	b = append(b, `{"events":[`...)
	for i := range page.Edges {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = eventjson.Append(b, &page.Edges[i].Event); err != nil {
			return nil, fmt.Errorf("encoding audit event: %w", err)
		}
	}
	b = append(b, `],"nextCursor":`...)
	if !page.HasNextPage {
		return append(b, "null}\n"...), nil
	}
	cursor, err := json.Marshal(page.EndCursor)
	if err != nil {
		return nil, fmt.Errorf("encoding cursor: %w", err)
	}
	b = append(b, cursor...)
	return append(b, "}\n"...), nil
}

// The query parameters of the REST and SSE audit endpoints.
var (
	listParams = map[string]bool{
		"projectId": true, "afterSequence": true, "cursor": true, "limit": true, "order": true,
		"action": true, "subjectId": true, "resourceType": true, "resourceId": true, "outcome": true,
		"occurredFrom": true, "occurredTo": true, "sequenceFrom": true, "sequenceTo": true,
		"recordedBySubject": true, "correlation.traceId": true, "correlation.requestId": true, "correlation.causationId": true,
	}
	streamParams = map[string]bool{
		"projectId": true, "afterSequence": true, "follow": true,
		"action": true, "subjectId": true, "resourceType": true, "resourceId": true, "outcome": true,
		"occurredFrom": true, "occurredTo": true, "sequenceFrom": true, "sequenceTo": true,
		"recordedBySubject": true, "correlation.traceId": true, "correlation.requestId": true, "correlation.causationId": true,
	}
)

// listAuditEvents serves GET /api/v1/audit/events: one page of the same
// search as GraphQL auditEvents, as {"events": [...], "nextCursor": ...}.
func (s *Server) listAuditEvents(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	in, err := parseSearch(q, listParams)
	if err != nil {
		writeProblem(w, r, err)
		return
	}
	if v := q.Get("limit"); v != "" {
		n, perr := strconv.Atoi(v)
		if perr != nil || n < 1 || n > app.MaxPageSize {
			writeProblem(w, r, badParam("limit", "must be an integer between 1 and "+strconv.Itoa(app.MaxPageSize)))
			return
		}
		in.First = &n
	}
	in.After = q.Get("cursor")
	page, serr := s.cfg.App.SearchAuditEvents(r.Context(), app.IdentityFromContext(r.Context()), in)
	if serr != nil {
		s.writeAppError(w, r, serr)
		return
	}
	body, encErr := appendAuditEventList(make([]byte, 0, 1024*len(page.Edges)+64), page)
	if encErr != nil {
		s.writeAppError(w, r, encErr)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(body)
}

// streamAuditEvents serves GET /api/v1/audit/events/stream: a finite
// Server-Sent Events snapshot of the committed events after Last-Event-ID
// (or afterSequence), oldest first, each as
// "id: <sequence>", "event: audit", "data: <event JSON>". The stream ends
// once everything committed has been sent.
func (s *Server) streamAuditEvents(w http.ResponseWriter, r *http.Request) {
	w = streamDeadlines(w, s.cfg.WriteTimeout)
	q := r.URL.Query()
	in, perr := parseSearch(q, streamParams)
	if perr != nil {
		writeProblem(w, r, perr)
		return
	}
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		seq, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		if err != nil {
			writeProblem(w, r, badParam("Last-Event-ID", "must be the decimal sequence of the last event received"))
			return
		}
		in.AfterSequence = &seq
	}
	in.Order = domain.OldestFirst
	switch q.Get("follow") {
	case "", "false":
	case "true":
		s.followAuditEvents(w, r, in)
		return
	default:
		writeProblem(w, r, badParam("follow", "must be true or false"))
		return
	}
	size := ssePageSize
	in.First = &size
	id := app.IdentityFromContext(r.Context())
	// The first page is read before answering, so that refusals (no
	// permission, unknown project, bad filter) are plain HTTP errors.
	page, err := s.cfg.App.SearchAuditEvents(r.Context(), id, in)
	if err != nil {
		s.writeAppError(w, r, err)
		return
	}
	// A snapshot of a long history is a long stream too: it counts as a
	// live connection of its identity while it runs.
	release, err := s.countStream(r.Context())
	if err != nil {
		s.writeAppError(w, r, err)
		return
	}
	defer release()
	flusher, _ := w.(http.Flusher)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	var buf, event []byte
	for {
		for i := range page.Edges {
			e := &page.Edges[i].Event
			data, err := eventjson.Append(event[:0], e)
			if err != nil {
				s.cfg.Logger.ErrorContext(r.Context(), "encoding audit event", "err", err)
				return
			}
			event, buf = data, appendSSEEvent(buf[:0], e.Sequence, data)
			if _, err := w.Write(buf); err != nil {
				return // the client went away
			}
		}
		if flusher != nil {
			flusher.Flush()
		}
		if !page.HasNextPage || r.Context().Err() != nil {
			return
		}
		if !id.ExpiresAt.IsZero() && !time.Now().Before(id.ExpiresAt) {
			// The stream ends with its token; resume with Last-Event-ID.
			_, _ = w.Write([]byte(sseTokenExpired))
			return
		}
		in.After = page.EndCursor
		in.AfterSequence = nil
		page, err = s.cfg.App.SearchAuditEvents(r.Context(), id, in)
		if err != nil {
			if r.Context().Err() == nil {
				s.cfg.Logger.ErrorContext(r.Context(), "streaming audit events", "err", err)
				_, _ = w.Write([]byte("event: error\ndata: {\"code\":\"INTERNAL\"}\n\n"))
			}
			return
		}
	}
}

// sseTokenExpired is the frame that ends an SSE stream whose token expired.
const sseTokenExpired = "event: error\ndata: {\"code\":\"UNAUTHENTICATED\",\"message\":\"token expired\"}\n\n"

// parseSearch reads the shared query parameters of the audit endpoints,
// refusing unknown ones.
func parseSearch(q url.Values, allowed map[string]bool) (app.SearchAuditEventsInput, *app.Error) {
	var in app.SearchAuditEventsInput
	for k, v := range q {
		if !allowed[k] {
			return in, badParam(k, "is not a known parameter")
		}
		if len(v) > 1 && k != "outcome" {
			return in, badParam(k, "must be given once")
		}
	}
	in.ProjectID = q.Get("projectId")
	if in.ProjectID == "" {
		return in, badParam("projectId", "is required")
	}
	var err *app.Error
	if in.AfterSequence, err = uintParam(q, "afterSequence"); err != nil {
		return in, err
	}
	switch q.Get("order") {
	case "", "oldest", "OLDEST_FIRST":
	case "newest", "NEWEST_FIRST":
		in.Order = domain.NewestFirst
	default:
		return in, badParam("order", "must be oldest or newest")
	}
	f := &in.Filter
	f.Action = q.Get("action")
	f.SubjectID = q.Get("subjectId")
	f.ResourceType = q.Get("resourceType")
	f.ResourceID = q.Get("resourceId")
	f.RecordedBySubject = q.Get("recordedBySubject")
	f.TraceID = q.Get("correlation.traceId")
	f.RequestID = q.Get("correlation.requestId")
	f.CausationID = q.Get("correlation.causationId")
	for _, v := range q["outcome"] {
		for _, o := range strings.Split(v, ",") {
			f.Outcomes = append(f.Outcomes, domain.Outcome(strings.ToUpper(strings.TrimSpace(o))))
		}
	}
	if f.OccurredFrom, err = timeParam(q, "occurredFrom"); err != nil {
		return in, err
	}
	if f.OccurredTo, err = timeParam(q, "occurredTo"); err != nil {
		return in, err
	}
	if f.SequenceFrom, err = uintParam(q, "sequenceFrom"); err != nil {
		return in, err
	}
	if f.SequenceTo, err = uintParam(q, "sequenceTo"); err != nil {
		return in, err
	}
	return in, nil
}

func uintParam(q url.Values, name string) (*uint64, *app.Error) {
	v := q.Get(name)
	if v == "" {
		return nil, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return nil, badParam(name, "must be an unsigned decimal integer")
	}
	return &n, nil
}

func timeParam(q url.Values, name string) (*time.Time, *app.Error) {
	v := q.Get(name)
	if v == "" {
		return nil, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return nil, badParam(name, "must be an RFC 3339 date-time")
	}
	return &t, nil
}

func badParam(name, msg string) *app.Error {
	return &app.Error{Code: app.CodeBadUserInput, Field: name, Message: msg}
}

// writeAppError answers a use-case error as problem+json, logging internal
// causes (never shown to the client).
func (s *Server) writeAppError(w http.ResponseWriter, r *http.Request, err error) {
	appErr := app.ErrorOf(err)
	if appErr.Code == app.CodeInternal {
		s.cfg.Logger.ErrorContext(r.Context(), "request failed", "path", r.URL.Path, "err", err)
	}
	if name := restParam(appErr.Field); name != appErr.Field {
		renamed := *appErr
		renamed.Field = name
		appErr = &renamed
	}
	writeProblem(w, r, appErr)
}

// restParam names, in the REST parameters' words, an input field that the
// shared query reports in GraphQL's: "after" is the cursor, "first" the
// limit, and filter fields are top-level parameters.
func restParam(field string) string {
	switch field {
	case "after":
		return "cursor"
	case "first":
		return "limit"
	}
	if name, ok := strings.CutPrefix(field, "filter."); ok {
		return name
	}
	return field
}

// appendSSEEvent appends one audit event in SSE framing: its sequence as
// the event id (what Last-Event-ID resumes from), type "audit", JSON data.
func appendSSEEvent(buf []byte, seq uint64, data []byte) []byte {
	buf = append(buf, "id: "...)
	buf = strconv.AppendUint(buf, seq, 10)
	buf = append(buf, "\nevent: audit\ndata: "...)
	buf = append(buf, data...)
	return append(buf, "\n\n"...)
}

// followAuditEvents serves the live mode of the SSE stream (follow=true):
// every committed matching event after the start (Last-Event-ID or
// afterSequence, else the first event), then each new one as it commits,
// with a heartbeat comment every HeartbeatInterval. The stream ends when
// the client goes, the token expires, or the server shuts down; the client
// reconnects with Last-Event-ID and misses nothing.
func (s *Server) followAuditEvents(w http.ResponseWriter, r *http.Request, in app.SearchAuditEventsInput) {
	ctx := r.Context()
	id := app.IdentityFromContext(ctx)
	after := uint64(0)
	if in.AfterSequence != nil {
		after = *in.AfterSequence
	}
	release, err := s.countStream(ctx)
	if err != nil {
		s.writeAppError(w, r, err)
		return
	}
	defer release()
	stream, err := s.cfg.App.SubscribeAuditEvents(ctx, id, app.SubscribeAuditEventsInput{
		ProjectID: in.ProjectID, AfterSequence: &after, Filter: in.Filter,
	})
	if err != nil {
		s.writeAppError(w, r, err)
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events := make(chan *domain.AuditEvent)
	go func() {
		defer close(events)
		defer stream.Close()
		for {
			e, err := stream.Next(ctx)
			if err != nil {
				return
			}
			select {
			case events <- e:
			case <-ctx.Done():
				return
			}
		}
	}()

	flusher, _ := w.(http.Flusher)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write([]byte("retry: 2000\n\n")); err != nil {
		return
	}
	flush := func() {
		if flusher != nil {
			flusher.Flush()
		}
	}
	flush()
	heartbeat := time.NewTicker(s.cfg.HeartbeatInterval)
	defer heartbeat.Stop()
	var expired <-chan time.Time
	if !id.ExpiresAt.IsZero() {
		expiry := time.NewTimer(time.Until(id.ExpiresAt))
		defer expiry.Stop()
		expired = expiry.C
	}
	var buf, event []byte
	for {
		select {
		case e, ok := <-events:
			if !ok {
				return
			}
			data, err := eventjson.Append(event[:0], e)
			if err != nil {
				s.cfg.Logger.ErrorContext(ctx, "encoding audit event", "err", err)
				return
			}
			event, buf = data, appendSSEEvent(buf[:0], e.Sequence, data)
			if _, err := w.Write(buf); err != nil {
				return
			}
			if len(events) == 0 {
				flush()
			}
		case <-heartbeat.C:
			if _, err := w.Write([]byte(": heartbeat\n\n")); err != nil {
				return
			}
			flush()
		case <-expired:
			_, _ = w.Write([]byte(sseTokenExpired))
			flush()
			return
		case <-s.shutdown:
			return
		case <-ctx.Done():
			return
		}
	}
}
