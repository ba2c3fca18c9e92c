package app

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/aetheriot/aether-audit/domain"
)

// DefaultAuditRetention is how long audit events are kept when neither the
// service nor the tenant says otherwise.
const DefaultAuditRetention = 400 * 24 * time.Hour

// DefaultMinAuditRetention is the shortest retention window a tenant's
// admin may set unless the service says otherwise: evidence kept for less
// than a month helps no audit, and a stolen admin token must not be able to
// erase history at the next purge.
const DefaultMinAuditRetention = 30 * 24 * time.Hour

// DefaultPurgeBatch is the most events one purge transaction removes.
const DefaultPurgeBatch = 10_000

// retentionSubject is the system identity that audits purges.
const retentionSubject = "system:retention"

// RetentionReads reads retention settings and purged prefixes: on the
// Store each read runs alone, on a Tx in its transaction.
type RetentionReads interface {
	AuditRetentionOverride(ctx context.Context, tenantID string) (days int, found bool, err error)
	TenantProjects(ctx context.Context, tenantID string) ([]string, error)
	AuditPurgedPrefix(ctx context.Context, tenantID, projectID string) (domain.PurgedPrefix, error)
	AuditPurgeCandidates(ctx context.Context, defaultRetention time.Duration, now time.Time, limit int) ([]domain.PurgeCandidate, error)
}

// RetentionStore is what retention needs of the Store.
type RetentionStore interface {
	RetentionReads
	// DeadLetterPurgedWebhookDeliveries dead-letters the project's waiting
	// deliveries of purged events, in one statement.
	DeadLetterPurgedWebhookDeliveries(ctx context.Context, tenantID, projectID string, now time.Time) (int64, error)
}

// RetentionTx is what retention does in a transaction.
type RetentionTx interface {
	RetentionReads
	SetAuditRetentionOverride(ctx context.Context, tenantID string, days *int, by string, now time.Time) error
	// PurgeAuditPrefix purges the project's oldest events; its head must be
	// locked (LockAuditHead) in the same transaction.
	PurgeAuditPrefix(ctx context.Context, tenantID, projectID string, cutoff time.Time, maxEvents int, now time.Time) (domain.AuditPurge, error)
}

// AuditRetention is a tenant's retention window.
type AuditRetention struct {
	// Retention is the window in force: events recorded longer ago are
	// purged.
	Retention time.Duration
	// Override is the tenant's own window in days, nil when the service's
	// default applies.
	Override *int
	// Default is the service's window.
	Default time.Duration
}

// AuditRetention returns the identity's tenant's retention. Needs admin
// for every project of the tenant, as setting it does.
func (a *App) AuditRetention(ctx context.Context, id Identity) (AuditRetention, error) {
	if err := authorizeTenantWide(id); err != nil {
		return AuditRetention{}, err
	}
	return a.auditRetention(ctx, a.store, id.TenantID)
}

// authorizeTenantWide checks that id may administer its whole tenant: the
// admin permission and a token for all projects.
func authorizeTenantWide(id Identity) error {
	if err := authorize(id, PermissionAdmin, tenantScope); err != nil {
		return err
	}
	if !id.CanAccessProject(AllProjects) {
		return newError(CodeForbidden, "retention covers every project of the tenant: it needs a token for all projects")
	}
	return nil
}

// auditRetention reads the tenant's retention through r: the Store, or a Tx.
func (a *App) auditRetention(ctx context.Context, r RetentionReads, tenantID string) (AuditRetention, error) {
	days, found, err := r.AuditRetentionOverride(ctx, tenantID)
	if err != nil {
		return AuditRetention{}, err
	}
	out := AuditRetention{Retention: a.retention, Default: a.retention}
	if found {
		out.Override = &days
		out.Retention = time.Duration(days) * 24 * time.Hour
	}
	return out, nil
}

// SetAuditRetention sets the tenant's retention window to days, or back to
// the service's default when days is nil. It needs admin for every project
// of the tenant (the setting covers them all) and confirm, since a shorter
// window deletes evidence at the next purge. The change is audited in every
// project of the tenant, in the same transaction.
func (a *App) SetAuditRetention(ctx context.Context, id Identity, days *int, confirm bool) (_ AuditRetention, err error) {
	ctx, span := a.startCommand(ctx, "SetAuditRetention")
	defer func() { a.endCommand(span, err) }()
	if err := authorizeTenantWide(id); err != nil {
		return AuditRetention{}, err
	}
	if err := a.authorizeCommand(id, PermissionAdmin, tenantScope); err != nil {
		return AuditRetention{}, err
	}
	minDays := max(domain.MinAuditRetentionDays, int(a.minRetention/(24*time.Hour)))
	if days != nil && (*days < minDays || *days > domain.MaxAuditRetentionDays) {
		return AuditRetention{}, badInput("retentionDays", fmt.Sprintf("must be between %d and %d (the service's minimum is %d days)", minDays, domain.MaxAuditRetentionDays, minDays))
	}
	if !confirm {
		return AuditRetention{}, &Error{Code: CodeConfirmationRequired, Field: "confirm",
			Message: "events older than the retention window are deleted for good: repeat with confirm: true"}
	}
	var out AuditRetention
	err = a.retryTx(ctx, func(ctx context.Context, tx Tx) error {
		before, err := a.auditRetention(ctx, tx, id.TenantID)
		if err != nil {
			return err
		}
		now := a.storedNow()
		if err := tx.SetAuditRetentionOverride(ctx, id.TenantID, days, id.Subject, now); err != nil {
			return err
		}
		if out, err = a.auditRetention(ctx, tx, id.TenantID); err != nil {
			return err
		}
		details, _ := json.Marshal(map[string]any{
			"retentionDays": days, "previousRetentionDays": before.Override,
			"retentionSeconds": int64(out.Retention / time.Second), "previousRetentionSeconds": int64(before.Retention / time.Second),
		})
		projects, err := tx.TenantProjects(ctx, id.TenantID)
		if err != nil {
			return err
		}
		if len(projects) == 0 {
			return newError(CodeInvalidState, "the tenant has no audit history to record the change in (or to purge): record events first")
		}
		for _, p := range projects {
			if _, err := a.recordCommandEvent(ctx, tx, id, p, "audit.retention.updated",
				domain.Resource{Type: "audit_retention", ID: id.TenantID}, domain.RiskHigh, string(details), now); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return AuditRetention{}, err
	}
	return out, nil
}

// PurgeExpiredAuditEvents removes, project by project, the events older
// than their tenant's retention window, in transactions of at most the
// purge batch, each of which also records an audit.events.purged event
// (with the sequence range removed) in the project it purged and
// dead-letters the webhook deliveries of purged events still waiting to be
// sent. Partitions of audit_events past every tenant's retention go whole
// first (purgeAuditPartitions). It stops after maxBatches transactions (the periodic job goes on at
// its next run) and returns the purges.
func (a *App) PurgeExpiredAuditEvents(ctx context.Context, maxBatches int) ([]domain.AuditPurge, error) {
	purges, err := a.purgeAuditPartitions(ctx, a.storedNow())
	if err != nil {
		return purges, err
	}
	for len(purges) < maxBatches {
		now := a.storedNow()
		candidates, err := a.store.AuditPurgeCandidates(ctx, a.retention, now, maxBatches-len(purges))
		if err != nil || len(candidates) == 0 {
			return purges, err
		}
		progressed := false
		for _, c := range candidates {
			p, err := a.purgeAuditBatch(ctx, c, now)
			if err != nil {
				return purges, fmt.Errorf("purging %s/%s: %w", c.TenantID, c.ProjectID, err)
			}
			if p.Count > 0 {
				purges, progressed = append(purges, p), true
			}
		}
		if !progressed { // another process purged them first
			return purges, nil
		}
	}
	return purges, nil
}

// purgeAuditBatch runs one purge transaction of a project.
func (a *App) purgeAuditBatch(ctx context.Context, c domain.PurgeCandidate, now time.Time) (out domain.AuditPurge, err error) {
	ctx, span := a.startCommand(ctx, "PurgeAuditEvents")
	defer func() { a.endCommand(span, err) }()
	err = a.retryTx(ctx, func(ctx context.Context, tx Tx) error {
		if _, _, err := tx.LockAuditHead(ctx, c.TenantID, c.ProjectID); err != nil {
			return err
		}
		p, err := tx.PurgeAuditPrefix(ctx, c.TenantID, c.ProjectID, now.Add(-c.Retention), a.purgeBatch, now)
		if err != nil || p.Count == 0 {
			out = p
			return err
		}
		if err := a.recordAuditPurge(ctx, tx, p, c.Retention, "", now); err != nil {
			return err
		}
		out = p
		return nil
	})
	return out, err
}

// recordAuditPurge records, in tx, the audit.events.purged event of purge p
// in its project, by the retention subject: the purged range, its count and
// anchor, the cutoff and window, the deliveries dead-lettered, and the
// partition dropped with it when the purge was of a whole month.
func (a *App) recordAuditPurge(ctx context.Context, tx Tx, p domain.AuditPurge, retention time.Duration, partition string, now time.Time) error {
	fields := map[string]any{
		"fromSequence": strconv.FormatUint(p.From, 10), "throughSequence": strconv.FormatUint(p.Through, 10),
		"count": p.Count, "throughChainHash": p.ThroughHash.String(), "recordedBefore": p.Cutoff.UTC().Format(time.RFC3339Nano),
		"retentionSeconds": int64(retention / time.Second), "deadLetteredDeliveries": p.DeadLettered,
	}
	if partition != "" {
		fields["partition"] = partition
	}
	details, _ := json.Marshal(fields)
	system := Identity{TenantID: p.TenantID, Subject: retentionSubject}
	_, err := a.recordCommandEvent(ctx, tx, system, p.ProjectID, "audit.events.purged",
		domain.Resource{Type: "audit_project", ID: p.ProjectID}, domain.RiskHigh, string(details), now)
	return err
}
