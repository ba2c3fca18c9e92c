package mcpserver

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/eventjson"
)

// AppBackend runs a request in process: the use cases of package app with
// the identity verified for that request. Authorization, scoping, rate
// limits and error codes are those of the use cases, as for GraphQL.
type AppBackend struct {
	App      *app.App
	Identity app.Identity
}

var _ Backend = AppBackend{}

// TenantID implements Backend.
func (b AppBackend) TenantID() string { return b.Identity.TenantID }

// Expires implements Backend.
func (b AppBackend) Expires() time.Time { return b.Identity.ExpiresAt }

// SearchAuditEvents implements Backend.
func (b AppBackend) SearchAuditEvents(ctx context.Context, in SearchAuditEventsInput) (EventPage, error) {
	order := domain.OldestFirst
	if in.Order == orderNewestFirst {
		order = domain.NewestFirst
	}
	page, err := b.App.SearchAuditEvents(ctx, b.Identity, app.SearchAuditEventsInput{
		ProjectID: in.ProjectID, Filter: appFilter(in.Filter), First: in.First, After: in.After, Order: order,
	})
	if err != nil {
		return EventPage{}, appError(err)
	}
	out := EventPage{HasNextPage: page.HasNextPage, Events: make([]Event, 0, len(page.Edges))}
	for i := range page.Edges {
		e, err := appEvent(&page.Edges[i].Event)
		if err != nil {
			return EventPage{}, err
		}
		out.Events = append(out.Events, e)
	}
	if page.EndCursor != "" {
		out.EndCursor = &page.EndCursor
	}
	return out, nil
}

// GetAuditEvent implements Backend.
func (b AppBackend) GetAuditEvent(ctx context.Context, projectID, eventID string) (Event, error) {
	e, err := b.App.GetAuditEvent(ctx, b.Identity, projectID, eventID)
	if err != nil {
		return Event{}, appError(err)
	}
	return appEvent(&e)
}

// VerifyAuditChain implements Backend: the app's verification stream,
// step after step until its verdict.
func (b AppBackend) VerifyAuditChain(ctx context.Context, in VerifyAuditChainInput, progress func(VerifyProgress)) (ChainVerification, error) {
	s, err := b.App.StreamAuditChainVerification(ctx, b.Identity, app.VerifyAuditChainInput{ProjectID: in.ProjectID,
		FromSequence: in.FromSequence.uint64Ptr(), ToSequence: in.ToSequence.uint64Ptr(), ResumeToken: in.ResumeToken})
	if err != nil {
		return ChainVerification{}, appError(err)
	}
	defer s.Close()
	for {
		v, err := s.Next(ctx)
		if err != nil {
			return ChainVerification{}, appError(err)
		}
		if v.Complete {
			return appVerification(v), nil
		}
		if progress != nil {
			progress(VerifyProgress{CheckedCount: v.CheckedCount, SequenceReached: v.SequenceReached,
				HeadSequence: v.HeadSequence, EventsPerSecond: v.EventsPerSecond})
		}
	}
}

// appVerification is the tool's shape of the app's verdict.
func appVerification(v *app.ChainVerification) ChainVerification {
	return ChainVerification{
		Valid:                          v.Valid,
		Complete:                       v.Complete,
		ResumeToken:                    v.ResumeToken,
		CheckedCount:                   decimal(v.CheckedCount),
		SequenceReached:                decimal(v.SequenceReached),
		EventsPerSecond:                v.EventsPerSecond,
		FirstInvalidSequence:           optionalDecimal(v.FirstInvalidSequence),
		HeadSequence:                   decimal(v.HeadSequence),
		HeadHash:                       v.HeadHash.String(),
		PurgedThroughSequence:          decimal(v.PurgedThrough),
		CheckpointsChecked:             decimal(v.CheckpointsChecked),
		FirstInvalidCheckpointSequence: optionalDecimal(v.FirstInvalidCheckpointSequence),
	}
}

// WebhookDeliveries implements Backend.
func (b AppBackend) WebhookDeliveries(ctx context.Context, in ListWebhookDeliveriesInput) (WebhookDeliveryPage, error) {
	page, err := b.App.WebhookDeliveries(ctx, b.Identity, app.WebhookDeliveriesInput{
		ProjectID: in.ProjectID, SubscriptionID: in.SubscriptionID, EventID: in.EventID,
		State: domain.WebhookDeliveryState(in.State), First: in.First, After: in.After,
	})
	if err != nil {
		return WebhookDeliveryPage{}, appError(err)
	}
	out := WebhookDeliveryPage{HasNextPage: page.HasNextPage, Deliveries: make([]WebhookDelivery, len(page.Items))}
	for i := range page.Items {
		out.Deliveries[i] = appDelivery(&page.Items[i])
	}
	if n := len(page.Items); n > 0 {
		c := app.IDCursor(page.Items[n-1].ID)
		out.EndCursor = &c
	}
	return out, nil
}

// WebhookDelivery implements Backend.
func (b AppBackend) WebhookDelivery(ctx context.Context, deliveryID string) (WebhookDelivery, error) {
	d, err := b.App.WebhookDelivery(ctx, b.Identity, deliveryID)
	if err != nil {
		return WebhookDelivery{}, appError(err)
	}
	return appDelivery(&d), nil
}

// DataExports implements Backend.
func (b AppBackend) DataExports(ctx context.Context, in ListDataExportsInput) (DataExportPage, error) {
	page, err := b.App.DataExports(ctx, b.Identity, app.DataExportsInput{
		ProjectID: in.ProjectID,
		Filter:    domain.DataExportFilter{State: domain.DataExportState(in.State), Kind: domain.DataExportKind(in.Kind)},
		First:     in.First, After: in.After,
	})
	if err != nil {
		return DataExportPage{}, appError(err)
	}
	out := DataExportPage{HasNextPage: page.HasNextPage, Exports: make([]DataExport, len(page.Items))}
	for i := range page.Items {
		out.Exports[i] = appExport(&page.Items[i])
	}
	if n := len(page.Items); n > 0 {
		c := app.IDCursor(page.Items[n-1].ID)
		out.EndCursor = &c
	}
	return out, nil
}

// RedriveWebhookDelivery implements Backend.
func (b AppBackend) RedriveWebhookDelivery(ctx context.Context, in RedriveWebhookDeliveryInput) (WebhookDelivery, error) {
	d, err := b.App.RedriveWebhookDelivery(ctx, b.Identity, in.DeliveryID, in.Confirm)
	if err != nil {
		return WebhookDelivery{}, appError(err)
	}
	return appDelivery(&d), nil
}

// RequestDataExport implements Backend.
func (b AppBackend) RequestDataExport(ctx context.Context, in RequestDataExportInput) (DataExport, error) {
	req := app.RequestDataExportInput{
		ProjectID:    in.ProjectID,
		Kind:         domain.DataExportKind(in.Kind),
		FromSequence: in.FromSequence.uint64Ptr(),
		ToSequence:   in.ToSequence.uint64Ptr(),
		Format:       domain.DataExportFormat(in.Format),
		Compression:  domain.DataExportCompression(in.Compression),
		Confirm:      in.Confirm, IdempotencyKey: in.IdempotencyKey,
	}
	if in.From != nil {
		req.From = *in.From
	}
	if in.To != nil {
		req.To = *in.To
	}
	if in.Filter != nil {
		f := appFilter(in.Filter)
		req.Filter = &f
	}
	e, err := b.App.RequestDataExport(ctx, b.Identity, req)
	if err != nil {
		return DataExport{}, appError(err)
	}
	return appExport(&e), nil
}

// SubscribeAuditEvents implements Backend.
func (b AppBackend) SubscribeAuditEvents(ctx context.Context, projectID string, after *uint64) (EventStream, error) {
	s, err := b.App.SubscribeAuditEvents(ctx, b.Identity, app.SubscribeAuditEventsInput{ProjectID: projectID, AfterSequence: after})
	if err != nil {
		return nil, appError(err)
	}
	return appStream{s}, nil
}

// appStream is an app.AuditEventStream as an EventStream.
type appStream struct{ s app.AuditEventStream }

// Next implements EventStream.
func (s appStream) Next(ctx context.Context) (Event, error) {
	e, err := s.s.Next(ctx)
	if err != nil {
		return Event{}, err
	}
	return appEvent(e)
}

// Close implements EventStream.
func (s appStream) Close() { s.s.Close() }

// appError turns a use case's error into an *Error with its code; the
// cause of an INTERNAL one stays out of it (the caller logs it).
func appError(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	e := app.ErrorOf(err)
	if e.Code == app.CodeInternal {
		return &internalError{cause: err}
	}
	out := &Error{Code: string(e.Code), Message: e.Error(), Field: e.Field}
	if e.RetryAfter > 0 {
		out.RetryAfterSeconds = app.RetryAfterSeconds(e.RetryAfter)
	}
	return out
}

// internalError is a failure the caller cannot act on: it is reported as
// INTERNAL, and its cause logged.
type internalError struct{ cause error }

// Error implements error.
func (e *internalError) Error() string { return e.cause.Error() }

// Unwrap returns the cause.
func (e *internalError) Unwrap() error { return e.cause }

// appFilter is the use cases' form of a filter.
func appFilter(f *AuditEventFilter) app.AuditEventFilterInput {
	if f == nil {
		return app.AuditEventFilterInput{}
	}
	in := app.AuditEventFilterInput{
		Action: f.Action, SubjectID: f.SubjectID, ResourceType: f.ResourceType, ResourceID: f.ResourceID,
		OccurredFrom: f.OccurredFrom, OccurredTo: f.OccurredTo,
		SequenceFrom: f.SequenceFrom.uint64Ptr(), SequenceTo: f.SequenceTo.uint64Ptr(),
		RecordedBySubject: f.RecordedBySubject,
	}
	for _, o := range f.Outcome {
		in.Outcomes = append(in.Outcomes, domain.Outcome(o))
	}
	if c := f.Correlation; c != nil {
		in.TraceID, in.RequestID, in.CausationID = c.TraceID, c.RequestID, c.CausationID
	}
	return in
}

// appEvent is an event in the public JSON shape.
func appEvent(e *domain.AuditEvent) (Event, error) {
	b, err := eventjson.Append(nil, e)
	if err != nil {
		return Event{}, &internalError{cause: err}
	}
	return Event{Sequence: e.Sequence, JSON: b}, nil
}

// appDelivery is a delivery in GraphQL's shape.
func appDelivery(d *domain.WebhookDelivery) WebhookDelivery {
	out := WebhookDelivery{
		ID: d.ID.String(), ProjectID: d.ProjectID, SubscriptionID: d.SubscriptionID.String(),
		DestinationID: d.DestinationID.String(), EventID: d.EventID.String(),
		EventSequence: d.EventSequence, EventType: d.EventType, IdempotencyKey: d.IdempotencyKey,
		State: string(d.State), AttemptCount: d.AttemptCount, MaxAttempts: d.MaxAttempts,
		NextAttemptAt: d.NextAttemptAt, CreatedAt: d.CreatedAt, UpdatedAt: d.UpdatedAt,
		DeliveredAt: d.DeliveredAt, DeadLetteredAt: d.DeadLetteredAt, LastError: d.LastError,
		Attempts: make([]WebhookDeliveryAttempt, len(d.Attempts)),
	}
	for i, a := range d.Attempts {
		at := WebhookDeliveryAttempt{
			Number: a.Number, Outcome: string(a.Outcome), StartedAt: a.StartedAt, FinishedAt: a.FinishedAt,
			StatusCode: a.StatusCode, ErrorClass: a.ErrorClass, Error: a.Error, ResponseBody: a.ResponseBody,
		}
		if a.FinishedAt != nil {
			ms := float64(a.Latency.Microseconds()) / 1000
			at.LatencyMs = &ms
		}
		out.Attempts[i] = at
	}
	return out
}

// appExport is an export in GraphQL's shape.
func appExport(e *domain.DataExport) DataExport {
	out := DataExport{
		ID: e.ID.String(), ProjectID: e.ProjectID, Kind: string(e.Kind), Format: string(e.Format),
		Compression: string(e.Compression), State: string(e.State), RequestedAt: e.RequestedAt,
		StartedAt: e.StartedAt, ProgressRows: e.ProgressRows, ProgressBytes: e.ProgressBytes,
		ReadyAt: e.ReadyAt, ExpiresAt: e.ExpiresAt, FailedAt: e.FailedAt, ExpiredAt: e.ExpiredAt,
		ObjectRef: nonEmpty(e.ObjectRef), ContentDigest: nonEmpty(e.ContentDigest), FailureReason: nonEmpty(e.FailureReason),
	}
	if !e.From.IsZero() {
		out.From = &e.From
	}
	if !e.To.IsZero() {
		out.To = &e.To
	}
	if e.ObjectRef != "" {
		byteLength, rowCount := e.ByteLength, e.RowCount
		out.ByteLength, out.RowCount = &byteLength, &rowCount
	}
	return out
}

// decimal writes a uint64 as the API does.
func decimal(n uint64) string { return strconv.FormatUint(n, 10) }

// optionalDecimal is decimal of an optional value.
func optionalDecimal(n *uint64) *string {
	if n == nil {
		return nil
	}
	s := decimal(*n)
	return &s
}

// nonEmpty is nil for "".
func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
