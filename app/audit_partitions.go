package app

import (
	"context"
	"fmt"
	"time"

	"github.com/aetheriot/aether-audit/domain"
)

// AuditPartitionMonthsAhead is how many months past the current one
// CreateAuditPartitions keeps partitions of audit_events for, so that an
// append never waits for one to be created and the DEFAULT partition stays
// empty even if the job does not run for weeks.
const AuditPartitionMonthsAhead = 3

// auditPartitionLockTimeout bounds how long dropping a partition waits for
// its locks, during which appends to audit_events wait behind it.
const auditPartitionLockTimeout = time.Second

// AuditPartitionStore creates and drops the partitions of audit_events.
type AuditPartitionStore interface {
	// CreateAuditPartitions creates the monthly partitions that do not
	// exist yet through the month of through, and returns how many.
	CreateAuditPartitions(ctx context.Context, through time.Time) (int, error)
	// ExpiredAuditPartitions lists the bounded partitions whose every
	// event was recorded before cutoff, oldest first.
	ExpiredAuditPartitions(ctx context.Context, cutoff time.Time) ([]domain.AuditPartition, error)
	// MaxAuditRetentionDays is the longest retention of any tenant's
	// override, 0 without one.
	MaxAuditRetentionDays(ctx context.Context) (int, error)
	// DropAuditPartition drops the partition if every event in it is
	// purged, waiting at most lockTimeout for its locks.
	DropAuditPartition(ctx context.Context, name string, lockTimeout time.Duration) (bool, error)
}

// AuditPartitionTx is what the purge by partition does in a transaction.
type AuditPartitionTx interface {
	// PurgeAuditPartition moves the purged prefix of each project over its
	// events of the partition, all recorded before cutoff, and returns
	// the purges.
	PurgeAuditPartition(ctx context.Context, p domain.AuditPartition, cutoff, now time.Time) ([]domain.AuditPurge, error)
}

// CreateAuditPartitions creates the monthly partitions of audit_events
// through AuditPartitionMonthsAhead months after the current one (by the
// app's clock), and those of the past months whose events sit in the
// DEFAULT partition (back to the longest retention of any tenant, moving
// those events into them), and returns how many it created. It is
// idempotent and runs as a periodic job (jobs.CreateAuditPartitionsWorker);
// the serving role creates them through SECURITY DEFINER functions
// (migrations 00022 and 00033), not with rights of its own.
func (a *App) CreateAuditPartitions(ctx context.Context) (int, error) {
	now := a.now().UTC()
	days, err := a.store.MaxAuditRetentionDays(ctx)
	if err != nil {
		return 0, err
	}
	past, err := a.createPastPartitions(ctx, "audit_events", now.Add(-max(a.retention, time.Duration(days)*24*time.Hour)), now)
	if err != nil {
		return len(past), err
	}
	n, err := a.store.CreateAuditPartitions(ctx, now.AddDate(0, AuditPartitionMonthsAhead, 0))
	return len(past) + n, err
}

// purgeAuditPartitions is the retention purge by partition, the first step
// of PurgeExpiredAuditEvents: each partition of audit_events whose every
// event is past every tenant's retention (the longest of the service's
// default and every tenant's override) goes whole. One transaction moves
// the purged prefix of each project over its events there and records the
// project's audit.events.purged event, as the prefix delete does; then the
// partition is dropped (DETACH and DROP: no row deleted, no dead tuple
// left). A project whose older events remain elsewhere keeps its events of
// the partition, and the partition stays, until the prefix delete has
// caught up. A partition that could not be dropped (a lock not granted in
// auditPartitionLockTimeout) is dropped by a later run.
func (a *App) purgeAuditPartitions(ctx context.Context, now time.Time) ([]domain.AuditPurge, error) {
	days, err := a.store.MaxAuditRetentionDays(ctx)
	if err != nil {
		return nil, err
	}
	longest := max(a.retention, time.Duration(days)*24*time.Hour)
	cutoff := now.Add(-longest)
	parts, err := a.store.ExpiredAuditPartitions(ctx, cutoff)
	if err != nil {
		return nil, err
	}
	var purges []domain.AuditPurge
	for _, p := range parts {
		done, err := a.purgeAuditPartition(ctx, p, cutoff, longest, now)
		if err != nil {
			return purges, fmt.Errorf("purging partition %s: %w", p.Name, err)
		}
		purges = append(purges, done...)
		if _, err := a.store.DropAuditPartition(ctx, p.Name, auditPartitionLockTimeout); err != nil {
			return purges, err
		}
	}
	return purges, nil
}

// purgeAuditPartition runs the transaction of one partition's purge.
func (a *App) purgeAuditPartition(ctx context.Context, p domain.AuditPartition, cutoff time.Time, retention time.Duration, now time.Time) (out []domain.AuditPurge, err error) {
	ctx, span := a.startCommand(ctx, "PurgeAuditPartition")
	defer func() { a.endCommand(span, err) }()
	err = a.retryTx(ctx, func(ctx context.Context, tx Tx) error {
		purges, err := tx.PurgeAuditPartition(ctx, p, cutoff, now)
		if err != nil {
			return err
		}
		for _, pu := range purges {
			if err := a.recordAuditPurge(ctx, tx, pu, retention, p.Name, now); err != nil {
				return err
			}
		}
		out = purges
		return nil
	})
	return out, err
}
