package app

import (
	"context"

	"github.com/aetheriot/aether-audit/domain"
)

// CreateAuditCheckpoint signs a checkpoint of the project's chain at its
// current head now, or returns the one that exists at that sequence. Needs
// audit:write or admin, and the project. A project without events (or
// whose events were all purged) is not found.
//
// It records no audit event: a checkpoint is itself append-only, signed
// evidence, and an event would move the head past the checkpoint at once
// (which would also keep the periodic signer from ever being idle).
func (a *App) CreateAuditCheckpoint(ctx context.Context, id Identity, projectID string) (_ domain.AuditCheckpoint, err error) {
	ctx, span := a.startCommand(ctx, "CreateAuditCheckpoint")
	defer func() { a.endCommand(span, err) }()
	perm := PermissionAuditWrite
	if !id.HasPermission(perm) && id.HasPermission(PermissionAdmin) {
		perm = PermissionAdmin
	}
	if err := a.authorizeCommand(id, perm, projectID); err != nil {
		return domain.AuditCheckpoint{}, err
	}
	if a.checkpoints == nil {
		return domain.AuditCheckpoint{}, errNoCheckpointKey
	}
	head, err := a.store.AuditHead(ctx, id.TenantID, projectID)
	if err != nil {
		return domain.AuditCheckpoint{}, err
	}
	purged, err := a.store.AuditPurgedPrefix(ctx, id.TenantID, projectID)
	if err != nil {
		return domain.AuditCheckpoint{}, err
	}
	if head.Sequence == 0 || head.Sequence <= purged.Through {
		return domain.AuditCheckpoint{}, ErrProjectNotFound
	}
	return a.signCheckpoint(ctx, id.TenantID, projectID, head.Sequence, 0)
}
