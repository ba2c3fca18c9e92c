package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/store/dbsqlc"
)

// AuditRetentionOverride returns the tenant's own retention in days, if an
// admin set one.
func (q *queries) AuditRetentionOverride(ctx context.Context, tenantID string) (days int, found bool, err error) {
	d, err := q.sqlc.GetAuditRetentionOverride(ctx, tenantID)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("reading audit retention: %w", err)
	}
	return int(d), true, nil
}

// SetAuditRetentionOverride sets the tenant's retention in days, or removes
// its override when days is nil.
func (t *Tx) SetAuditRetentionOverride(ctx context.Context, tenantID string, days *int, by string, now time.Time) error {
	var err error
	if days == nil {
		err = t.sqlc.DeleteAuditRetentionOverride(ctx, tenantID)
	} else {
		// Days are bounded by domain.MaxAuditRetentionDays.
		err = t.sqlc.UpsertAuditRetentionOverride(ctx, dbsqlc.UpsertAuditRetentionOverrideParams{
			TenantID: tenantID, RetentionDays: int32(*days), UpdatedAt: now, UpdatedBy: by})
	}
	if err != nil {
		return fmt.Errorf("setting audit retention: %w", err)
	}
	return nil
}

// TenantProjects returns the tenant's projects that have an audit chain,
// in order.
func (q *queries) TenantProjects(ctx context.Context, tenantID string) ([]string, error) {
	projects, err := q.sqlc.TenantProjects(ctx, tenantID)
	if err != nil {
		return nil, fmt.Errorf("listing projects: %w", err)
	}
	return projects, nil
}

// AuditPurgedPrefix returns where the project's purged prefix ends.
func (q *queries) AuditPurgedPrefix(ctx context.Context, tenantID, projectID string) (domain.PurgedPrefix, error) {
	row, err := q.sqlc.GetAuditPurgedPrefix(ctx, dbsqlc.GetAuditPurgedPrefixParams{TenantID: tenantID, ProjectID: projectID})
	if errors.Is(err, pgx.ErrNoRows) {
		return domain.PurgedPrefix{}, nil
	}
	if err != nil {
		return domain.PurgedPrefix{}, fmt.Errorf("reading purged prefix: %w", err)
	}
	p := domain.PurgedPrefix{Through: uint64(row.PurgedThrough)}
	copy(p.Hash[:], row.PurgedHash)
	return p, nil
}

// AuditPurgeCandidates returns up to limit projects whose oldest remaining
// event was recorded before now minus their tenant's retention (the
// tenant's override, else defaultRetention). One index probe per project.
func (q *queries) AuditPurgeCandidates(ctx context.Context, defaultRetention time.Duration, now time.Time, limit int) ([]domain.PurgeCandidate, error) {
	rows, err := q.sqlc.AuditPurgeCandidates(ctx, dbsqlc.AuditPurgeCandidatesParams{
		DefaultSeconds: defaultRetention.Seconds(), Now: now, RowLimit: int64(limit)})
	if err != nil {
		return nil, fmt.Errorf("finding projects to purge: %w", err)
	}
	out := make([]domain.PurgeCandidate, len(rows))
	for i, r := range rows {
		out[i] = domain.PurgeCandidate{TenantID: r.TenantID, ProjectID: r.ProjectID,
			Retention: time.Duration(r.RetentionSeconds * float64(time.Second))}
	}
	return out, nil
}

// PurgeAuditPrefix deletes, in the transaction, the project's
// oldest events recorded before cutoff, at most maxEvents of them, and
// dead-letters the webhook deliveries of purged events that were still to
// be sent. The project's head must be locked (LockAuditHead). The deletes
// go through aether_purge_audit_events (migration 00012), a SECURITY
// DEFINER function of the owner role: the runtime role may not delete
// events itself. It moves the head's purged prefix first, which is what
// lets the append-only trigger allow these deletes and only these, and
// keeps the chain hash of the last purged event as the anchor. The zero
// AuditPurge (Count 0) means nothing was old enough.
func (t *Tx) PurgeAuditPrefix(ctx context.Context, tenantID, projectID string, cutoff time.Time, maxEvents int, now time.Time) (domain.AuditPurge, error) {
	p := domain.AuditPurge{TenantID: tenantID, ProjectID: projectID, Cutoff: cutoff}
	row, err := t.sqlc.PurgeAuditPrefix(ctx, dbsqlc.PurgeAuditPrefixParams{
		TenantID: tenantID, ProjectID: projectID, Cutoff: cutoff, MaxEvents: int64(maxEvents)})
	if errors.Is(err, pgx.ErrNoRows) {
		return p, nil
	}
	if err != nil {
		return p, fmt.Errorf("purging audit events: %w", err)
	}
	p.From, p.Through, p.Count = uint64(row.PurgeFrom), uint64(row.PurgeThrough), row.Purged
	copy(p.ThroughHash[:], row.ThroughHash)
	if p.DeadLettered, err = t.DeadLetterPurgedWebhookDeliveries(ctx, tenantID, projectID, now); err != nil {
		return p, err
	}
	return p, nil
}

// PurgedDeliveryError is the last error of a delivery dead-lettered because
// retention purged its event.
const PurgedDeliveryError = "event_purged: the audit event was purged by retention before the delivery succeeded"

// DeadLetterPurgedWebhookDeliveries dead-letters the project's deliveries
// waiting to be sent (PENDING or RETRYING) whose event lies in the purged
// prefix: there is nothing left to send.
func (q *queries) DeadLetterPurgedWebhookDeliveries(ctx context.Context, tenantID, projectID string, now time.Time) (int64, error) {
	n, err := q.sqlc.DeadLetterPurgedWebhookDeliveries(ctx, dbsqlc.DeadLetterPurgedWebhookDeliveriesParams{
		TenantID: tenantID, ProjectID: projectID, Now: now, LastError: PurgedDeliveryError})
	if err != nil {
		return 0, fmt.Errorf("dead-lettering deliveries of purged events: %w", err)
	}
	return n, nil
}
