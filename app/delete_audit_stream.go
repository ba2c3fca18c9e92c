package app

import (
	"context"

	"github.com/google/uuid"

	"github.com/aetheriot/aether-audit/domain"
)

// DeleteAuditStream deletes a stream and its cursors: delivery stops (a
// batch already in flight may still arrive; its cursor cannot move any
// more). Needs streams:write and confirm; audited as audit.stream.deleted.
func (a *App) DeleteAuditStream(ctx context.Context, id Identity, streamID string, confirm bool) (_ uuid.UUID, err error) {
	ctx, span := a.startCommand(ctx, "DeleteAuditStream")
	defer func() { a.endCommand(span, err) }()
	if err := a.authorizeCommand(id, PermissionStreamsWrite, tenantScope); err != nil {
		return uuid.Nil, err
	}
	if !confirm {
		return uuid.Nil, &Error{Code: CodeConfirmationRequired, Field: "confirm",
			Message: "deleting a stream stops its delivery for good: set confirm: true"}
	}
	var s domain.AuditStream
	err = a.retryTx(ctx, func(ctx context.Context, tx Tx) error {
		if s, err = visibleStream(ctx, tx, id, streamID, true); err != nil {
			return err
		}
		if err := tx.DeleteAuditStream(ctx, id.TenantID, s.ID); err != nil {
			return err
		}
		return a.recordStreamCommand(ctx, tx, id, s, "audit.stream.deleted", domain.RiskHigh, map[string]any{
			"sinkType": s.SinkType, "host": sinkHost(s.SinkType, s.SinkURL),
		}, a.storedNow())
	})
	if err != nil {
		return uuid.Nil, err
	}
	return s.ID, nil
}
