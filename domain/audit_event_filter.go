package domain

import "time"

// AuditEventFilter narrows a search of one project's audit events. Zero
// fields do not filter. All given conditions must hold.
type AuditEventFilter struct {
	// Action matches the event's action exactly or by "prefix.*".
	Action *ActionPattern
	// SubjectID is the exact subject id.
	SubjectID string
	// RecordedBySubject is the exact subject of the token that recorded
	// the event (version 1 events have none and never match).
	RecordedBySubject string
	// TraceID, RequestID and CausationID match the event's correlation
	// ids exactly.
	TraceID     string
	RequestID   string
	CausationID string
	// ResourceType and ResourceID are exact; either may be given alone.
	ResourceType string
	ResourceID   string
	// Outcomes keeps events with any of these outcomes.
	Outcomes []Outcome
	// OccurredFrom (inclusive) and OccurredTo (exclusive) bound occurredAt.
	OccurredFrom *time.Time
	OccurredTo   *time.Time
	// SequenceFrom and SequenceTo bound the sequence, both inclusive.
	SequenceFrom *uint64
	SequenceTo   *uint64
}

// Matches reports whether e passes the filter. It is the in-memory twin of
// the store's SQL, used where events are already at hand.
func (f *AuditEventFilter) Matches(e *AuditEvent) bool {
	if f.Action != nil && !f.Action.Matches(e.Action) {
		return false
	}
	if f.SubjectID != "" && e.Subject.ID != f.SubjectID {
		return false
	}
	if f.RecordedBySubject != "" && (e.RecordedBy == nil || e.RecordedBy.Subject != f.RecordedBySubject) {
		return false
	}
	if f.TraceID != "" || f.RequestID != "" || f.CausationID != "" {
		var c Correlation
		if e.Correlation != nil {
			c = *e.Correlation
		}
		if (f.TraceID != "" && c.TraceID != f.TraceID) || (f.RequestID != "" && c.RequestID != f.RequestID) ||
			(f.CausationID != "" && c.CausationID != f.CausationID) {
			return false
		}
	}
	if f.ResourceType != "" && e.Resource.Type != f.ResourceType {
		return false
	}
	if f.ResourceID != "" && e.Resource.ID != f.ResourceID {
		return false
	}
	if len(f.Outcomes) > 0 {
		ok := false
		for _, o := range f.Outcomes {
			ok = ok || o == e.Outcome
		}
		if !ok {
			return false
		}
	}
	if f.OccurredFrom != nil && e.OccurredAt.Before(*f.OccurredFrom) {
		return false
	}
	if f.OccurredTo != nil && !e.OccurredAt.Before(*f.OccurredTo) {
		return false
	}
	if f.SequenceFrom != nil && e.Sequence < *f.SequenceFrom {
		return false
	}
	if f.SequenceTo != nil && e.Sequence > *f.SequenceTo {
		return false
	}
	return true
}

// SortOrder orders events by sequence.
type SortOrder int

// The sort orders.
const (
	OldestFirst SortOrder = iota
	NewestFirst
)

// AuditEventPage selects one keyset page of a search.
type AuditEventPage struct {
	// Order is the direction of the sequence order.
	Order SortOrder
	// After, when set, keeps events strictly after this sequence in Order:
	// greater for OldestFirst, smaller for NewestFirst.
	After *uint64
	// Limit is the most events returned; it must be positive.
	Limit int
}
