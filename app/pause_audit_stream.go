package app

import (
	"context"

	"github.com/aetheriot/aether-audit/domain"
)

// PauseAuditStream pauses a stream: nothing more is delivered and every
// cursor holds. Pausing a paused stream changes nothing and records
// nothing. Needs streams:write; audited as audit.stream.paused.
func (a *App) PauseAuditStream(ctx context.Context, id Identity, streamID string) (AuditStreamView, error) {
	return a.setStreamPaused(ctx, id, streamID, true)
}

// ResumeAuditStream resumes a paused stream after its cursors, and makes
// its failed projects due at once. Resuming a running stream changes
// nothing and records nothing. Needs streams:write; audited as
// audit.stream.resumed.
func (a *App) ResumeAuditStream(ctx context.Context, id Identity, streamID string) (AuditStreamView, error) {
	return a.setStreamPaused(ctx, id, streamID, false)
}

// setStreamPaused is PauseAuditStream (paused) or ResumeAuditStream.
func (a *App) setStreamPaused(ctx context.Context, id Identity, streamID string, paused bool) (_ AuditStreamView, err error) {
	name, action := "ResumeAuditStream", "audit.stream.resumed"
	if paused {
		name, action = "PauseAuditStream", "audit.stream.paused"
	}
	ctx, span := a.startCommand(ctx, name)
	defer func() { a.endCommand(span, err) }()
	if err := a.authorizeCommand(id, PermissionStreamsWrite, tenantScope); err != nil {
		return AuditStreamView{}, err
	}
	var s domain.AuditStream
	err = a.retryTx(ctx, func(ctx context.Context, tx Tx) error {
		if s, err = visibleStream(ctx, tx, id, streamID, true); err != nil {
			return err
		}
		if s.Paused == paused {
			return nil
		}
		s.Paused, s.UpdatedAt = paused, a.storedNow()
		if err := tx.UpdateAuditStream(ctx, s); err != nil {
			return err
		}
		return a.recordStreamCommand(ctx, tx, id, s, action, domain.RiskMedium, map[string]any{}, s.UpdatedAt)
	})
	if err != nil {
		return AuditStreamView{}, err
	}
	return a.view(ctx, s)
}
