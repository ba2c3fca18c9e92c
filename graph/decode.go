package graph

import (
	"math"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/graph/model"
)

// DraftFromInput turns a RecordAuditEventInput into a domain draft; the use
// case validates it. path prefixes error fields as the use case does: ""
// for a single event, FieldIndex("events", i) within a batch. The resolvers
// and the ingest fast path (graph/fastpath) share it.
func DraftFromInput(path string, in model.RecordAuditEventInput) (domain.AuditEventDraft, error) {
	d := domain.AuditEventDraft{
		ProjectID:  in.ProjectID,
		Action:     in.Action,
		OccurredAt: in.OccurredAt,
		Outcome:    in.Outcome,
		Details:    in.Details,
	}
	if in.ID != nil {
		id, err := uuid.Parse(*in.ID)
		if err != nil || id == uuid.Nil {
			field := "id"
			if path != "" {
				field = path + ".id"
			}
			return d, &domain.ValidationError{Field: field, Message: "must be a UUID"}
		}
		d.ID = id
	}
	if s := in.Subject; s != nil {
		d.Subject = domain.Subject{Type: s.Type, ID: s.ID, DisplayName: deref(s.DisplayName)}
	}
	if r := in.Resource; r != nil {
		d.Resource = domain.Resource{Type: r.Type, ID: r.ID}
	}
	if g := in.Governance; g != nil {
		d.Governance = &domain.Governance{Reason: deref(g.Reason), Ticket: deref(g.Ticket), ConfirmedBy: deref(g.ConfirmedBy)}
		if g.Risk != nil {
			d.Governance.Risk = *g.Risk
		}
	}
	if c := in.Correlation; c != nil {
		d.Correlation = &domain.Correlation{TraceID: deref(c.TraceID), RequestID: deref(c.RequestID), CausationID: deref(c.CausationID)}
	}
	for _, e := range in.EvidenceDigests {
		d.EvidenceDigests = append(d.EvidenceDigests, domain.EvidenceDigest{Algorithm: e.Algorithm, Value: e.Value, Label: deref(e.Label)})
	}
	return d, nil
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// FieldIndex names element i of the list input field path, as error fields
// do: "events[3]".
func FieldIndex(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// optionalFilterInput is filterInput of a filter that may be absent: nil
// when it is.
func optionalFilterInput(filter *model.AuditEventFilter) *app.AuditEventFilterInput {
	if filter == nil {
		return nil
	}
	in := filterInput(filter)
	return &in
}

// filterInput turns the GraphQL filter into the use cases' filter input.
func filterInput(filter *model.AuditEventFilter) app.AuditEventFilterInput {
	if filter == nil {
		return app.AuditEventFilterInput{}
	}
	in := app.AuditEventFilterInput{
		Action:            deref(filter.Action),
		SubjectID:         deref(filter.SubjectID),
		ResourceType:      deref(filter.ResourceType),
		ResourceID:        deref(filter.ResourceID),
		Outcomes:          filter.Outcome,
		OccurredFrom:      filter.OccurredFrom,
		OccurredTo:        filter.OccurredTo,
		SequenceFrom:      filter.SequenceFrom,
		SequenceTo:        filter.SequenceTo,
		RecordedBySubject: deref(filter.RecordedBySubject),
	}
	if c := filter.Correlation; c != nil {
		in.TraceID, in.RequestID, in.CausationID = deref(c.TraceID), deref(c.RequestID), deref(c.CausationID)
	}
	return in
}

// nonEmpty is s for a nullable String: nil when empty.
func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// secondsDuration turns a count of seconds from GraphQL (64-bit) into a
// Duration without wrapping around: out of range values become -1 s, which
// every use case refuses as BAD_USER_INPUT.
func secondsDuration(n int) time.Duration {
	if n < 0 || int64(n) > math.MaxInt64/int64(time.Second) {
		return -time.Second
	}
	return time.Duration(n) * time.Second
}

// verifyInput is the input of verifyAuditChain and auditChainVerification.
func verifyInput(projectID string, from, to *uint64, resumeToken *string) app.VerifyAuditChainInput {
	in := app.VerifyAuditChainInput{ProjectID: projectID, FromSequence: from, ToSequence: to}
	if resumeToken != nil {
		in.ResumeToken = *resumeToken
	}
	return in
}
