package store

import (
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/store/dbsqlc"
)

// The rows of a delivery job's batch read (WebhookBatchSendContext): up to
// a hundred deliveries and their events, most of whose text values (tenant,
// project, action, subject, outcome, state, recorder, ...) repeat from row
// to row. The scanners below scan a batch's rows into one reused row
// struct through one reused argument list, keep one string per distinct
// text value, and copy the fixed-size byte values straight from the row:
// about ten allocations fewer per delivery than a Scan per row into fresh
// strings (docs/benchmarks.md, "Fan-out ratio: Go side").

// errNullText is what an interned column gets for a NULL: these columns
// are NOT NULL, and a Scan into a string fails on NULL alike.
var errNullText = errors.New("NULL in a NOT NULL text column")

// maxInterned bounds the length of the values kept for reuse; longer ones
// are allocated as a Scan would (they rarely repeat).
const maxInterned = 256

// textInterner hands out one string per distinct text value of a batch.
type textInterner map[string]string

// internedText scans a text value into *dst, from the interner's strings.
type internedText struct {
	dst  *string
	seen textInterner
}

// ScanBytes implements pgtype.BytesScanner; b is the row's memory, valid
// only during the call.
func (t *internedText) ScanBytes(b []byte) error {
	if b == nil {
		return errNullText
	}
	if s, ok := t.seen[string(b)]; ok { // no allocation for the lookup
		*t.dst = s
		return nil
	}
	s := string(b)
	if len(s) <= maxInterned {
		t.seen[s] = s
	}
	*t.dst = s
	return nil
}

// fixedBytes scans a bytea value into *dst without keeping the row's
// bytes (a nil dst for NULL).
type fixedBytes struct{ dst *[]byte }

// ScanBytes implements pgtype.BytesScanner.
func (f *fixedBytes) ScanBytes(b []byte) error {
	if b == nil {
		*f.dst = nil
		return nil
	}
	*f.dst = append((*f.dst)[:0], b...)
	return nil
}

// interned returns scanners of dsts' values through seen.
func interned(seen textInterner, dsts ...*string) []*internedText {
	out := make([]*internedText, len(dsts))
	for i, d := range dsts {
		out[i] = &internedText{dst: d, seen: seen}
	}
	return out
}

// eventParts hands out the parts of a batch's events that they point to
// (governance, correlation, recorder) from arrays of a batch's size, one
// allocation per kind and batch instead of one per event. A nil
// *eventParts allocates each part alone.
type eventParts struct {
	n   int
	gov []domain.Governance
	cor []domain.Correlation
	rec []domain.Recorder
}

// newEventParts returns parts for batches of about n events.
func newEventParts(n int) *eventParts { return &eventParts{n: max(n, 1)} }

func (p *eventParts) governance() (*[]domain.Governance, int) {
	if p == nil {
		return nil, 0
	}
	return &p.gov, p.n
}

func (p *eventParts) correlations() (*[]domain.Correlation, int) {
	if p == nil {
		return nil, 0
	}
	return &p.cor, p.n
}

func (p *eventParts) recorders() (*[]domain.Recorder, int) {
	if p == nil {
		return nil, 0
	}
	return &p.rec, p.n
}

// take returns a zero T from *from, refilled with an array of n when used
// up (the values handed out before stay where they are); with a nil from,
// a T of its own.
func take[T any](from *[]T, n int) *T {
	if from == nil {
		return new(T)
	}
	if len(*from) == cap(*from) {
		*from = make([]T, 0, n)
	}
	*from = (*from)[:len(*from)+1]
	return &(*from)[len(*from)-1]
}

// eventBatchScanner scans the rows of dbsqlc.FindAuditEventsByID.
type eventBatchScanner struct {
	r     dbsqlc.AuditEvent
	args  []any
	parts *eventParts
}

// newEventBatchScanner returns a scanner of about n rows.
func newEventBatchScanner(seen textInterner, n int) *eventBatchScanner {
	s := &eventBatchScanner{parts: newEventParts(n)}
	r := &s.r
	t := interned(seen, &r.TenantID, &r.ProjectID, &r.Action, &r.SubjectType, &r.SubjectID, &r.SubjectDisplayName,
		&r.ResourceType, &r.Outcome, &r.GovernanceReason, &r.GovernanceTicket, &r.GovernanceConfirmedBy,
		&r.RecordedByIssuer, &r.RecordedBySubject, &r.RecordedByTokenID, &r.RecordedByClientID)
	// Reused across rows: the copies go into the event's arrays.
	r.InputFingerprint, r.ChainHash = make([]byte, 0, 32), make([]byte, 0, 32)
	s.args = []any{t[0], t[1], &r.Sequence, (*[16]byte)(&r.ID), t[2], &r.OccurredAt, &r.RecordedAt,
		t[3], t[4], t[5], t[6], &r.ResourceID, t[7],
		&r.GovernanceRisk, t[8], t[9], t[10],
		&r.TraceID, &r.RequestID, &r.CausationID, &fixedBytes{&r.EvidenceDigests}, &r.Details,
		&fixedBytes{&r.InputFingerprint}, &fixedBytes{&r.ChainHash},
		&r.ChainVersion, t[11], t[12], t[13], t[14]}
	return s
}

// scan is scanAuditEvent for a row of the batch.
func (s *eventBatchScanner) scan(row pgx.CollectableRow) (domain.AuditEvent, error) {
	s.r.GovernanceRisk = nil
	if err := row.Scan(s.args...); err != nil {
		return domain.AuditEvent{}, err
	}
	return auditEventFromRowIn(&s.r, s.parts)
}

// deliveryBatchScanner scans the rows of dbsqlc.BatchSendWebhookDeliveries.
type deliveryBatchScanner struct {
	r    dbsqlc.WebhookDelivery
	args []any
}

func newDeliveryBatchScanner(seen textInterner) *deliveryBatchScanner {
	s := &deliveryBatchScanner{}
	r := &s.r
	t := interned(seen, &r.TenantID, &r.ProjectID, &r.EventType, &r.State, &r.LastError)
	s.args = []any{t[0], t[1], (*[16]byte)(&r.ID), (*[16]byte)(&r.SubscriptionID),
		(*[16]byte)(&r.DestinationID), (*[16]byte)(&r.EventID), &r.EventSequence,
		t[2], &r.IdempotencyKey, t[3], &r.AttemptCount, &r.MaxAttempts, &r.NextAttemptAt,
		&r.CreatedAt, &r.UpdatedAt, &r.DeliveredAt, &r.DeadLetteredAt, t[4], &r.ReplayOf, &r.Ordered,
		&r.AttemptStartedAt, &r.AttemptStatusCode, &r.AttemptLatencyUs, &r.AttemptResponseBody}
	return s
}

// scan is scanDelivery for a row of the batch.
func (s *deliveryBatchScanner) scan(row pgx.CollectableRow) (domain.WebhookDelivery, error) {
	s.r = dbsqlc.WebhookDelivery{}
	if err := row.Scan(s.args...); err != nil {
		return domain.WebhookDelivery{}, err
	}
	return deliveryFromRow(&s.r), nil
}
