package fastpath

import (
	"encoding/json"

	"github.com/99designs/gqlgen/graphql"
	gojson "github.com/goccy/go-json"
	jsonv2 "github.com/goccy/go-json/v2"

	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/graph/model"
)

// strictDecode decodes raw into v strictly: member names match field
// names exactly (encoding/json and go-json's v1 API also take them in
// another case, as "Events" for "events", where GraphQL does not), and
// unknown and duplicate members, invalid UTF-8 and anything after the
// value fail.
func strictDecode(raw []byte, v any) bool {
	return jsonv2.Unmarshal(raw, v, strictOptions) == nil
}

var strictOptions = jsonv2.RejectUnknownMembers(true)

// The strict input shapes: every field a pointer, so that a null or missing
// required field is seen (and left to the executor to report).
type fastBatchInput struct {
	Events         *[]fastEventInput `json:"events"`
	IdempotencyKey *string           `json:"idempotencyKey"`
}

type fastEventInput struct {
	ProjectID       *string            `json:"projectId"`
	ID              *string            `json:"id"`
	Action          *string            `json:"action"`
	OccurredAt      *string            `json:"occurredAt"`
	Subject         *fastSubject       `json:"subject"`
	Resource        *fastResource      `json:"resource"`
	Outcome         *string            `json:"outcome"`
	Governance      *fastGovernance    `json:"governance"`
	Correlation     *fastCorrelation   `json:"correlation"`
	EvidenceDigests *[]*fastDigest     `json:"evidenceDigests"`
	Details         *gojson.RawMessage `json:"details"`
}

type fastSubject struct {
	Type        *string `json:"type"`
	ID          *string `json:"id"`
	DisplayName *string `json:"displayName"`
}

type fastResource struct {
	Type *string `json:"type"`
	ID   *string `json:"id"`
}

type fastGovernance struct {
	Reason      *string `json:"reason"`
	Ticket      *string `json:"ticket"`
	Risk        *string `json:"risk"`
	ConfirmedBy *string `json:"confirmedBy"`
}

type fastCorrelation struct {
	TraceID     *string `json:"traceId"`
	RequestID   *string `json:"requestId"`
	CausationID *string `json:"causationId"`
}

type fastDigest struct {
	Algorithm *string `json:"algorithm"`
	Value     *string `json:"value"`
	Label     *string `json:"label"`
}

// model converts the input as the generated unmarshalling would; ok is false
// where that would fail or coerce.
func (in *fastEventInput) model() (m model.RecordAuditEventInput, ok bool) {
	if in.ProjectID == nil || in.Action == nil || in.OccurredAt == nil || in.Subject == nil ||
		in.Resource == nil || in.Outcome == nil {
		return m, false
	}
	t, err := graphql.UnmarshalTime(*in.OccurredAt)
	if err != nil {
		return m, false
	}
	outcome, valid := enumValue(*in.Outcome, domain.Outcome.Valid)
	if !valid {
		return m, false
	}
	m = model.RecordAuditEventInput{ProjectID: *in.ProjectID, ID: in.ID, Action: *in.Action, OccurredAt: t, Outcome: outcome}
	s := in.Subject
	if s.Type == nil || s.ID == nil {
		return m, false
	}
	st, valid := enumValue(*s.Type, domain.SubjectType.Valid)
	if !valid {
		return m, false
	}
	m.Subject = &model.AuditSubjectInput{Type: st, ID: *s.ID, DisplayName: s.DisplayName}
	if in.Resource.Type == nil || in.Resource.ID == nil {
		return m, false
	}
	m.Resource = &model.AuditResourceInput{Type: *in.Resource.Type, ID: *in.Resource.ID}
	if g := in.Governance; g != nil {
		m.Governance = &model.AuditGovernanceInput{Reason: g.Reason, Ticket: g.Ticket, ConfirmedBy: g.ConfirmedBy}
		if g.Risk != nil {
			r, valid := enumValue(*g.Risk, domain.Risk.Valid)
			if !valid {
				return m, false
			}
			m.Governance.Risk = &r
		}
	}
	if c := in.Correlation; c != nil {
		m.Correlation = &model.AuditCorrelationInput{TraceID: c.TraceID, RequestID: c.RequestID, CausationID: c.CausationID}
	}
	if in.EvidenceDigests != nil {
		m.EvidenceDigests = make([]model.EvidenceDigestInput, 0, len(*in.EvidenceDigests))
		for _, d := range *in.EvidenceDigests {
			if d == nil || d.Algorithm == nil || d.Value == nil {
				return m, false
			}
			m.EvidenceDigests = append(m.EvidenceDigests, model.EvidenceDigestInput{Algorithm: *d.Algorithm, Value: *d.Value, Label: d.Label})
		}
	}
	if in.Details != nil {
		raw := []byte(*in.Details)
		if string(raw) != "null" {
			if len(raw) == 0 || raw[0] != '{' {
				return m, false // the JSON scalar takes objects only
			}
			m.Details = json.RawMessage(raw)
		}
	}
	return m, true
}
