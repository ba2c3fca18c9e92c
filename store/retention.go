package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/aetheriot/aether-audit/domain"
)

// AuditRetentionOverride returns the tenant's own retention in days, if an
// admin set one.
func (q *queries) AuditRetentionOverride(ctx context.Context, tenantID string) (days int, found bool, err error) {
	err = q.db.QueryRow(ctx, `SELECT retention_days FROM audit_retention_overrides WHERE tenant_id = $1`, tenantID).Scan(&days)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("reading audit retention: %w", err)
	}
	return days, true, nil
}

// SetAuditRetentionOverride sets the tenant's retention in days, or removes
// its override when days is nil.
func (t *Tx) SetAuditRetentionOverride(ctx context.Context, tenantID string, days *int, by string, now time.Time) error {
	var err error
	if days == nil {
		_, err = t.tx.Exec(ctx, `DELETE FROM audit_retention_overrides WHERE tenant_id = $1`, tenantID)
	} else {
		_, err = t.tx.Exec(ctx, `INSERT INTO audit_retention_overrides (tenant_id, retention_days, updated_at, updated_by)
			VALUES ($1, $2, $3, $4) ON CONFLICT (tenant_id) DO UPDATE
			SET retention_days = EXCLUDED.retention_days, updated_at = EXCLUDED.updated_at, updated_by = EXCLUDED.updated_by`,
			tenantID, *days, now, by)
	}
	if err != nil {
		return fmt.Errorf("setting audit retention: %w", err)
	}
	return nil
}

// TenantProjects returns the tenant's projects that have an audit chain,
// in order.
func (q *queries) TenantProjects(ctx context.Context, tenantID string) ([]string, error) {
	rows, _ := q.db.Query(ctx, `SELECT project_id FROM audit_project_heads WHERE tenant_id = $1 ORDER BY project_id`, tenantID)
	projects, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("listing projects: %w", err)
	}
	return projects, nil
}

// AuditPurgedPrefix returns where the project's purged prefix ends.
func (q *queries) AuditPurgedPrefix(ctx context.Context, tenantID, projectID string) (domain.PurgedPrefix, error) {
	var (
		through int64
		hash    []byte
	)
	err := q.db.QueryRow(ctx, `SELECT purged_through, purged_hash FROM audit_project_heads
		WHERE tenant_id = $1 AND project_id = $2`, tenantID, projectID).Scan(&through, &hash)
	if errors.Is(err, pgx.ErrNoRows) {
		return domain.PurgedPrefix{}, nil
	}
	if err != nil {
		return domain.PurgedPrefix{}, fmt.Errorf("reading purged prefix: %w", err)
	}
	p := domain.PurgedPrefix{Through: uint64(through)}
	copy(p.Hash[:], hash)
	return p, nil
}

// AuditPurgeCandidates returns up to limit projects whose oldest remaining
// event was recorded before now minus their tenant's retention (the
// tenant's override, else defaultRetention). One index probe per project.
func (q *queries) AuditPurgeCandidates(ctx context.Context, defaultRetention time.Duration, now time.Time, limit int) ([]domain.PurgeCandidate, error) {
	rows, _ := q.db.Query(ctx, `SELECT h.tenant_id, h.project_id, COALESCE(o.retention_days * 86400.0, $1)
		FROM audit_project_heads h LEFT JOIN audit_retention_overrides o ON o.tenant_id = h.tenant_id
		WHERE h.last_sequence > h.purged_through AND EXISTS (
			SELECT 1 FROM audit_events e
			WHERE e.tenant_id = h.tenant_id AND e.project_id = h.project_id AND e.sequence = h.purged_through + 1
			  AND e.recorded_at < $2::timestamptz - make_interval(secs => COALESCE(o.retention_days * 86400.0, $1)))
		ORDER BY h.tenant_id, h.project_id LIMIT $3`, defaultRetention.Seconds(), now, limit)
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (domain.PurgeCandidate, error) {
		var (
			c    domain.PurgeCandidate
			secs float64
		)
		err := row.Scan(&c.TenantID, &c.ProjectID, &secs)
		c.Retention = time.Duration(secs * float64(time.Second))
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("finding projects to purge: %w", err)
	}
	return out, nil
}

// PurgeAuditPrefix deletes, in the transaction, the project's
// oldest events recorded before cutoff, at most maxEvents of them, and
// dead-letters the webhook deliveries of purged events that were still to
// be sent. The project's head must be locked (LockAuditHead). It moves the
// head's purged prefix first, which is what lets the append-only trigger
// allow these deletes and only these. The zero AuditPurge (Count 0) means
// nothing was old enough.
func (t *Tx) PurgeAuditPrefix(ctx context.Context, tenantID, projectID string, cutoff time.Time, maxEvents int, now time.Time) (domain.AuditPurge, error) {
	p := domain.AuditPurge{TenantID: tenantID, ProjectID: projectID, Cutoff: cutoff}
	var (
		from, through int64
		hash          []byte
	)
	// The prefix ends before the first event at or after the cutoff (or at
	// the head): every purged event is older than the window even if clocks
	// stepped back.
	err := t.tx.QueryRow(ctx, `WITH h AS (
			SELECT purged_through, last_sequence FROM audit_project_heads WHERE tenant_id = $1 AND project_id = $2),
		bound AS (
			SELECT LEAST(
				COALESCE((SELECT e.sequence - 1 FROM audit_events e, h
					WHERE e.tenant_id = $1 AND e.project_id = $2 AND e.sequence > h.purged_through
					  AND e.sequence <= h.purged_through + $4 AND e.recorded_at >= $3
					ORDER BY e.sequence LIMIT 1), h.last_sequence),
				h.purged_through + $4) AS through, h.purged_through FROM h)
		SELECT b.purged_through + 1, b.through, COALESCE(e.chain_hash, '\x'::bytea)
		FROM bound b LEFT JOIN audit_events e ON e.tenant_id = $1 AND e.project_id = $2 AND e.sequence = b.through`,
		tenantID, projectID, cutoff, maxEvents).Scan(&from, &through, &hash)
	if errors.Is(err, pgx.ErrNoRows) || err == nil && through < from {
		return p, nil
	}
	if err != nil {
		return p, fmt.Errorf("finding the purge bound: %w", err)
	}
	batch := &pgx.Batch{}
	batch.Queue(`UPDATE audit_project_heads SET purged_through = $3, purged_hash = $4
		WHERE tenant_id = $1 AND project_id = $2`, tenantID, projectID, through, hash)
	batch.Queue(`SELECT set_config('aether.audit_purge', 'on', true)`)
	batch.Queue(`DELETE FROM audit_events WHERE tenant_id = $1 AND project_id = $2 AND sequence BETWEEN $3 AND $4`,
		tenantID, projectID, from, through)
	batch.Queue(`SELECT set_config('aether.audit_purge', 'off', true)`)
	br := t.tx.SendBatch(ctx, batch)
	if _, err := br.Exec(); err != nil {
		_ = br.Close()
		return p, fmt.Errorf("moving the purged prefix: %w", err)
	}
	if _, err := br.Exec(); err != nil {
		_ = br.Close()
		return p, fmt.Errorf("purging audit events: %w", err)
	}
	tag, err := br.Exec()
	if err != nil {
		_ = br.Close()
		return p, fmt.Errorf("purging audit events: %w", err)
	}
	if err := br.Close(); err != nil {
		return p, fmt.Errorf("purging audit events: %w", err)
	}
	p.From, p.Through, p.Count = uint64(from), uint64(through), tag.RowsAffected()
	copy(p.ThroughHash[:], hash)
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
	tag, err := q.db.Exec(ctx, `UPDATE webhook_deliveries d SET state = 'DEAD_LETTERED', dead_lettered_at = $3,
			updated_at = $3, next_attempt_at = NULL, last_error = $4
		FROM audit_project_heads h
		WHERE h.tenant_id = $1 AND h.project_id = $2 AND d.tenant_id = $1 AND d.project_id = $2
		  AND d.state IN ('PENDING', 'RETRYING') AND d.event_sequence <= h.purged_through`,
		tenantID, projectID, now, PurgedDeliveryError)
	if err != nil {
		return 0, fmt.Errorf("dead-lettering deliveries of purged events: %w", err)
	}
	return tag.RowsAffected(), nil
}
