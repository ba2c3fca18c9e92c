package graph

import (
	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/graph/model"
)

// auditFilterModel is the DataExportAuditFilter of a stored filter (of an
// AUDIT export or an audit stream); nil for none.
func auditFilterModel(f *domain.AuditEventFilter) *model.DataExportAuditFilter {
	if f == nil {
		return nil
	}
	out := &model.DataExportAuditFilter{SubjectID: nonEmpty(f.SubjectID), ResourceType: nonEmpty(f.ResourceType),
		ResourceID: nonEmpty(f.ResourceID), Outcome: f.Outcomes, OccurredFrom: f.OccurredFrom, OccurredTo: f.OccurredTo,
		SequenceFrom: f.SequenceFrom, SequenceTo: f.SequenceTo, RecordedBySubject: nonEmpty(f.RecordedBySubject)}
	if f.Action != nil {
		out.Action = nonEmpty(f.Action.String())
	}
	if f.TraceID != "" || f.RequestID != "" || f.CausationID != "" {
		out.Correlation = &model.DataExportCorrelationFilter{TraceID: nonEmpty(f.TraceID),
			RequestID: nonEmpty(f.RequestID), CausationID: nonEmpty(f.CausationID)}
	}
	return out
}
