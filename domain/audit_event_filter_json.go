package domain

import (
	"encoding/json"
	"fmt"
	"time"
)

// auditEventFilterJSON is the JSON shape of an AuditEventFilter: the
// members of the GraphQL input AuditEventFilter, given ones only, with
// sequences as decimal strings. A filtered export stores its filter in this
// shape and its export.requested event carries it.
type auditEventFilterJSON struct {
	Action            string                 `json:"action,omitempty"`
	SubjectID         string                 `json:"subjectId,omitempty"`
	ResourceType      string                 `json:"resourceType,omitempty"`
	ResourceID        string                 `json:"resourceId,omitempty"`
	Outcome           []Outcome              `json:"outcome,omitempty"`
	OccurredFrom      *time.Time             `json:"occurredFrom,omitempty"`
	OccurredTo        *time.Time             `json:"occurredTo,omitempty"`
	SequenceFrom      *uint64                `json:"sequenceFrom,omitempty,string"`
	SequenceTo        *uint64                `json:"sequenceTo,omitempty,string"`
	RecordedBySubject string                 `json:"recordedBySubject,omitempty"`
	Correlation       *correlationFilterJSON `json:"correlation,omitempty"`
}

type correlationFilterJSON struct {
	TraceID     string `json:"traceId,omitempty"`
	RequestID   string `json:"requestId,omitempty"`
	CausationID string `json:"causationId,omitempty"`
}

// IsZero reports whether the filter filters nothing.
func (f *AuditEventFilter) IsZero() bool {
	return f.Action == nil && f.SubjectID == "" && f.RecordedBySubject == "" && f.TraceID == "" &&
		f.RequestID == "" && f.CausationID == "" && f.ResourceType == "" && f.ResourceID == "" &&
		len(f.Outcomes) == 0 && f.OccurredFrom == nil && f.OccurredTo == nil && f.SequenceFrom == nil && f.SequenceTo == nil
}

// MarshalJSON writes the filter in the shape of the GraphQL input
// AuditEventFilter (only the conditions set; sequences as decimal strings).
// The same filter always gives the same bytes.
func (f AuditEventFilter) MarshalJSON() ([]byte, error) {
	j := auditEventFilterJSON{SubjectID: f.SubjectID, ResourceType: f.ResourceType, ResourceID: f.ResourceID,
		Outcome: f.Outcomes, OccurredFrom: f.OccurredFrom, OccurredTo: f.OccurredTo,
		SequenceFrom: f.SequenceFrom, SequenceTo: f.SequenceTo, RecordedBySubject: f.RecordedBySubject}
	if f.Action != nil {
		j.Action = f.Action.String()
	}
	if f.TraceID != "" || f.RequestID != "" || f.CausationID != "" {
		j.Correlation = &correlationFilterJSON{TraceID: f.TraceID, RequestID: f.RequestID, CausationID: f.CausationID}
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads what MarshalJSON writes. It parses the action
// pattern but does not validate the rest (what it reads was validated
// before it was stored).
func (f *AuditEventFilter) UnmarshalJSON(b []byte) error {
	var j auditEventFilterJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*f = AuditEventFilter{SubjectID: j.SubjectID, ResourceType: j.ResourceType, ResourceID: j.ResourceID,
		Outcomes: j.Outcome, OccurredFrom: j.OccurredFrom, OccurredTo: j.OccurredTo,
		SequenceFrom: j.SequenceFrom, SequenceTo: j.SequenceTo, RecordedBySubject: j.RecordedBySubject}
	if j.Action != "" {
		p, err := ParseActionPattern("filter.action", j.Action)
		if err != nil {
			return fmt.Errorf("audit event filter: %w", err)
		}
		f.Action = &p
	}
	if c := j.Correlation; c != nil {
		f.TraceID, f.RequestID, f.CausationID = c.TraceID, c.RequestID, c.CausationID
	}
	return nil
}
