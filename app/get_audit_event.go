package app

import (
	"context"
	"errors"

	"github.com/google/uuid"

	"github.com/aetheriot/aether-audit/domain"
)

// GetAuditEvent returns one event of a project by id, for an identity with
// audit:read and the project. A missing event and one of another tenant or
// project answer the same NOT_FOUND.
func (a *App) GetAuditEvent(ctx context.Context, id Identity, projectID, eventID string) (domain.AuditEvent, error) {
	if err := authorize(id, PermissionAuditRead, projectID); err != nil {
		return domain.AuditEvent{}, err
	}
	uid, err := uuid.Parse(eventID)
	if err != nil {
		return domain.AuditEvent{}, ErrEventNotFound
	}
	e, err := a.store.GetAuditEvent(ctx, id.TenantID, projectID, uid)
	if errors.Is(err, domain.ErrNotFound) {
		return domain.AuditEvent{}, ErrEventNotFound
	}
	return e, err
}
