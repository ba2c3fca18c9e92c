package app

import (
	"context"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aetheriot/aether-audit/domain"
)

// Page sizes of SearchAuditEvents.
const (
	DefaultPageSize = 50
	MaxPageSize     = 500
)

// AuditEventFilterInput is a search filter as interfaces receive it, before
// validation. Empty fields do not filter.
type AuditEventFilterInput struct {
	// Action is an exact action or a prefix written "prefix.*".
	Action       string
	SubjectID    string
	ResourceType string
	ResourceID   string
	Outcomes     []domain.Outcome
	// OccurredFrom is inclusive, OccurredTo exclusive.
	OccurredFrom *time.Time
	OccurredTo   *time.Time
	// SequenceFrom and SequenceTo are inclusive.
	SequenceFrom *uint64
	SequenceTo   *uint64
	// RecordedBySubject is the exact recordedBy.subject.
	RecordedBySubject string
	// TraceID, RequestID and CausationID are exact correlation ids.
	TraceID     string
	RequestID   string
	CausationID string
}

// SearchAuditEventsInput is one page request of SearchAuditEvents.
type SearchAuditEventsInput struct {
	ProjectID string
	Filter    AuditEventFilterInput
	// First is the page size: DefaultPageSize when nil, at most MaxPageSize.
	First *int
	// After is the opaque cursor of the last event of the previous page.
	After string
	// AfterSequence starts the page after this sequence (in Order) when no
	// cursor is given: how REST and SSE resume.
	AfterSequence *uint64
	Order         domain.SortOrder
}

// AuditEventEdge is one event of a page with its cursor.
type AuditEventEdge struct {
	Cursor string
	Event  domain.AuditEvent
}

// AuditEventPage is one page of a search.
type AuditEventPage struct {
	Edges       []AuditEventEdge
	HasNextPage bool
	// EndCursor is the cursor of the last edge, "" for an empty page.
	EndCursor string
}

// SearchAuditEvents is the one authorized audit query behind GraphQL
// auditEvents, REST /api/v1/audit/events and the SSE stream. It needs
// audit:read and the project in the identity, validates the filter and
// returns one keyset page in the requested order.
func (a *App) SearchAuditEvents(ctx context.Context, id Identity, in SearchAuditEventsInput) (AuditEventPage, error) {
	filter, page, err := searchPage(id, in)
	if err != nil {
		return AuditEventPage{}, err
	}
	limit := page.Limit - 1
	events, err := a.store.SearchAuditEvents(ctx, id.TenantID, in.ProjectID, filter, page)
	if err != nil {
		return AuditEventPage{}, err
	}
	out := AuditEventPage{}
	if len(events) > limit {
		out.HasNextPage = true
		events = events[:limit]
	}
	out.Edges = make([]AuditEventEdge, len(events))
	for i, e := range events {
		out.Edges[i] = AuditEventEdge{Cursor: EncodeCursor(in.Order, e.Sequence), Event: e}
	}
	if len(events) > 0 {
		out.EndCursor = out.Edges[len(events)-1].Cursor
	}
	return out, nil
}

// searchPage authorizes and validates one page request of
// SearchAuditEvents and VisitAuditEvents: the filter, and the page, whose
// limit is one more than the page size (the extra event tells whether a
// next page exists).
func searchPage(id Identity, in SearchAuditEventsInput) (domain.AuditEventFilter, domain.AuditEventPage, error) {
	if err := authorize(id, PermissionAuditRead, in.ProjectID); err != nil {
		return domain.AuditEventFilter{}, domain.AuditEventPage{}, err
	}
	filter, err := ParseAuditEventFilter(in.Filter)
	if err != nil {
		return domain.AuditEventFilter{}, domain.AuditEventPage{}, err
	}
	limit := DefaultPageSize
	if in.First != nil {
		if *in.First < 1 || *in.First > MaxPageSize {
			return filter, domain.AuditEventPage{}, badInput("first", fmt.Sprintf("must be between 1 and %d", MaxPageSize))
		}
		limit = *in.First
	}
	page := domain.AuditEventPage{Order: in.Order, Limit: limit + 1, After: in.AfterSequence}
	if in.After != "" {
		order, seq, err := DecodeCursor(in.After)
		if err != nil {
			return filter, page, badInput("after", "is not a valid cursor")
		}
		if order != in.Order {
			return filter, page, badInput("after", "cursor belongs to the other sort order")
		}
		page.After = &seq
	}
	return filter, page, nil
}

// ParseAuditEventFilter validates a filter input into a domain filter.
func ParseAuditEventFilter(in AuditEventFilterInput) (domain.AuditEventFilter, error) {
	f := domain.AuditEventFilter{
		SubjectID:    in.SubjectID,
		ResourceType: in.ResourceType,
		ResourceID:   in.ResourceID,
		OccurredFrom: in.OccurredFrom,
		OccurredTo:   in.OccurredTo,
		SequenceFrom: in.SequenceFrom,
		SequenceTo:   in.SequenceTo,

		RecordedBySubject: in.RecordedBySubject,
		TraceID:           in.TraceID,
		RequestID:         in.RequestID,
		CausationID:       in.CausationID,
	}
	if in.Action != "" {
		p, err := domain.ParseActionPattern("filter.action", in.Action)
		if err != nil {
			return f, err
		}
		f.Action = &p
	}
	for _, s := range []struct{ field, v string }{
		{"filter.subjectId", in.SubjectID}, {"filter.resourceType", in.ResourceType}, {"filter.resourceId", in.ResourceID},
		{"filter.recordedBySubject", in.RecordedBySubject}, {"filter.correlation.traceId", in.TraceID},
		{"filter.correlation.requestId", in.RequestID}, {"filter.correlation.causationId", in.CausationID},
	} {
		// Text no event can carry (invalid UTF-8, NUL) is refused rather
		// than handed to PostgreSQL, which rejects it.
		if err := domain.ValidateText(s.field, s.v, domain.MaxIDLength, false, false); err != nil {
			return f, err
		}
	}
	for _, o := range in.Outcomes {
		if !o.Valid() {
			return f, badInput("filter.outcome", "must be SUCCESS, FAILURE, DENIED or ERROR")
		}
	}
	f.Outcomes = in.Outcomes
	if f.OccurredFrom != nil && f.OccurredTo != nil && !f.OccurredFrom.Before(*f.OccurredTo) {
		return f, badInput("filter.occurredTo", "must be after occurredFrom")
	}
	if f.SequenceFrom != nil && f.SequenceTo != nil && *f.SequenceFrom > *f.SequenceTo {
		return f, badInput("filter.sequenceTo", "must not be below sequenceFrom")
	}
	return f, nil
}

const cursorPrefix = "ae1:"

// EncodeCursor returns the opaque cursor of the event at seq in a search
// ordered by order.
func EncodeCursor(order domain.SortOrder, seq uint64) string {
	var b [40]byte
	return string(AppendCursor(b[:0], order, seq))
}

// AppendCursor appends EncodeCursor(order, seq) to dst and returns the
// extended slice, without allocating when dst has room.
func AppendCursor(dst []byte, order domain.SortOrder, seq uint64) []byte {
	var raw [32]byte
	b := append(raw[:0], cursorPrefix...)
	if order == domain.NewestFirst {
		b = append(b, "d:"...)
	} else {
		b = append(b, "a:"...)
	}
	b = strconv.AppendUint(b, seq, 10)
	return base64.RawURLEncoding.AppendEncode(dst, b)
}

// DecodeCursor parses a cursor made by EncodeCursor.
func DecodeCursor(cursor string) (domain.SortOrder, uint64, error) {
	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil || len(cursor) > 64 {
		return 0, 0, fmt.Errorf("malformed cursor")
	}
	rest, ok := strings.CutPrefix(string(raw), cursorPrefix)
	if !ok || len(rest) < 3 || rest[1] != ':' {
		return 0, 0, fmt.Errorf("malformed cursor")
	}
	var order domain.SortOrder
	switch rest[0] {
	case 'a':
		order = domain.OldestFirst
	case 'd':
		order = domain.NewestFirst
	default:
		return 0, 0, fmt.Errorf("malformed cursor")
	}
	seq, err := strconv.ParseUint(rest[2:], 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("malformed cursor")
	}
	return order, seq, nil
}
