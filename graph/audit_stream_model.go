package graph

import (
	"time"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/graph/model"
)

// auditStreamModel is the GraphQL AuditStream of a stream's view at now.
func auditStreamModel(v app.AuditStreamView, now time.Time) *model.AuditStream {
	s := v.Stream
	out := &model.AuditStream{
		ID: s.ID.String(), ProjectIds: s.ProjectIDs, AllProjects: s.AllProjects, Filter: auditFilterModel(s.Filter),
		SinkType: model.AuditStreamSinkType(s.SinkType), SinkURL: s.SinkURL, FromSequence: s.FromSequence,
		State: model.AuditStreamState(v.State), CreatedAt: s.CreatedAt, CreatedBy: s.CreatedBy, UpdatedAt: s.UpdatedAt,
		Projects: make([]model.AuditStreamProject, len(v.Projects)),
	}
	for i, h := range v.Projects {
		p := model.AuditStreamProject{
			ProjectID: h.ProjectID, Cursor: h.Acked, Head: h.Head, LagEvents: h.LagEvents(), LagSeconds: h.LagSeconds(now),
			LastDeliveryAt: h.LastDeliveryAt, LastErrorAt: h.LastErrorAt, State: model.AuditStreamState(h.State(s.Paused)),
		}
		if h.LastError != "" {
			p.LastError = &h.LastError
		}
		p.Circuit = h.Circuit(now, v.Breaker)
		if p.Circuit == domain.WebhookCircuitOpen {
			p.CircuitOpenUntil = h.RetryAt
		}
		out.Projects[i] = p
	}
	return out
}

// sinkInput decodes a stream's sink input.
func sinkInput(in *model.AuditStreamSinkInput) app.AuditStreamSinkInput {
	if in == nil {
		return app.AuditStreamSinkInput{}
	}
	return app.AuditStreamSinkInput{Type: domain.AuditStreamSinkType(in.Type), URL: in.URL, Token: in.Token, APIKey: in.APIKey}
}
