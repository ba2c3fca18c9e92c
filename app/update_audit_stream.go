package app

import (
	"context"

	"github.com/aetheriot/aether-audit/domain"
)

// UpdateAuditStreamInput changes a stream's filter or sink URL and
// credential; nil fields keep what the stream has.
type UpdateAuditStreamInput struct {
	StreamID    string
	Filter      *AuditEventFilterInput
	ClearFilter bool
	URL         *string
	Token       *string
	APIKey      *string
}

// UpdateAuditStream changes a stream's filter, sink URL or credential (the
// sink type stays). The cursors keep their place: the change applies from
// the next batch. Needs streams:write; audited as audit.stream.updated.
func (a *App) UpdateAuditStream(ctx context.Context, id Identity, in UpdateAuditStreamInput) (_ AuditStreamView, err error) {
	ctx, span := a.startCommand(ctx, "UpdateAuditStream")
	defer func() { a.endCommand(span, err) }()
	if err := a.authorizeCommand(id, PermissionStreamsWrite, tenantScope); err != nil {
		return AuditStreamView{}, err
	}
	if in.ClearFilter && in.Filter != nil {
		return AuditStreamView{}, badInput("clearFilter", "give filter or clearFilter: true, not both")
	}
	filter, err := streamFilter(in.Filter)
	if err != nil {
		return AuditStreamView{}, err
	}
	var s domain.AuditStream
	err = a.retryTx(ctx, func(ctx context.Context, tx Tx) error {
		if s, err = visibleStream(ctx, tx, id, in.StreamID, true); err != nil {
			return err
		}
		changed := []string{}
		if in.URL != nil {
			u, err := a.checkSinkURL(ctx, s.SinkType, *in.URL)
			if err != nil {
				return err
			}
			s.SinkURL = u
			changed = append(changed, "url")
		}
		secret, err := sinkCredential(s.SinkType, in.Token, in.APIKey, false)
		if err != nil {
			return err
		}
		if secret != "" {
			if s.SealedSecret, err = a.sealStreamSecret(s.ID, secret); err != nil {
				return err
			}
			changed = append(changed, "credential")
		}
		if filter != nil || in.ClearFilter {
			s.Filter = filter
			changed = append(changed, "filter")
		}
		s.UpdatedAt = a.storedNow()
		if err := tx.UpdateAuditStream(ctx, s); err != nil {
			return err
		}
		return a.recordStreamCommand(ctx, tx, id, s, "audit.stream.updated", domain.RiskHigh, map[string]any{
			"changed": changed, "host": sinkHost(s.SinkType, s.SinkURL),
		}, s.UpdatedAt)
	})
	if err != nil {
		return AuditStreamView{}, err
	}
	return a.view(ctx, s)
}
