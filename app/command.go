package app

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/aetheriot/aether-audit/domain"
)

// recordCommandEvent appends the audit event of a command of id, in the
// transaction tx: the command's own evidence, sealed into the
// project's chain like any recorded event (and fanned out to webhooks like
// them).
func (a *App) recordCommandEvent(ctx context.Context, tx Tx, id Identity, projectID, action string, resource domain.Resource, risk domain.Risk, details string, now time.Time) (domain.AuditEvent, error) {
	return a.recordCommandEventWith(ctx, tx, id, projectID, action, resource, domain.Governance{Risk: risk}, details, now)
}

// commandSubject is the audit subject of a command's identity: the system
// for the service's own identities ("system:..."), else the token's subject.
func commandSubject(id Identity) domain.Subject {
	if strings.HasPrefix(id.Subject, domain.SystemSubjectPrefix) {
		return domain.Subject{Type: domain.SubjectSystem, ID: id.Subject}
	}
	if id.Subject == "" {
		return domain.Subject{Type: domain.SubjectUser, ID: "unknown"}
	}
	return domain.Subject{Type: domain.SubjectUser, ID: id.Subject}
}

// recordCommandEventWith is recordCommandEvent with full governance.
//
// The action must be one of domain.ServiceActions, the reserved table that
// clients may not write and docs/api.md lists.
func (a *App) recordCommandEventWith(ctx context.Context, tx Tx, id Identity, projectID, action string, resource domain.Resource, gov domain.Governance, details string, now time.Time) (domain.AuditEvent, error) {
	if !domain.IsServiceAction(action) {
		return domain.AuditEvent{}, fmt.Errorf("recording %s: not in domain.ServiceActions, the reserved table", action)
	}
	draft := domain.AuditEventDraft{
		ID:         uuid.Must(uuid.NewV7()),
		ProjectID:  projectID,
		Action:     action,
		OccurredAt: now,
		Subject:    commandSubject(id),
		Resource:   resource,
		Outcome:    domain.OutcomeSuccess,
		Governance: &gov,
		Details:    []byte(details),
		RecordedBy: id.Recorder(),
	}
	if t := TraceIDFromContext(ctx); t != "" {
		draft.Correlation = &domain.Correlation{TraceID: t}
	}
	if err := draft.Normalize("", now); err != nil {
		return domain.AuditEvent{}, fmt.Errorf("building %s audit event: %w", action, err)
	}
	head, webhooks, err := tx.LockAuditHead(ctx, id.TenantID, projectID)
	if err != nil {
		return domain.AuditEvent{}, err
	}
	req := &appendRequest{drafts: []domain.AuditEventDraft{draft}, fingerprints: []domain.Hash{draft.Fingerprint()}}
	req.reset()
	if _, err := a.sealAndInsert(ctx, tx, id.TenantID, projectID, lockedHead{head, webhooks}, newSealBatch(nil), []*appendRequest{req}, now); err != nil {
		return domain.AuditEvent{}, err
	}
	return req.events[0], nil
}
