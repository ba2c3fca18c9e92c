package app

import (
	"context"
	"time"
)

// AuditPartitionMonthsAhead is how many months past the current one
// CreateAuditPartitions keeps partitions of audit_events for, so that an
// append never waits for one to be created and the DEFAULT partition stays
// empty even if the job does not run for weeks.
const AuditPartitionMonthsAhead = 3

// AuditPartitionStore creates the partitions of audit_events.
type AuditPartitionStore interface {
	// CreateAuditPartitions creates the monthly partitions that do not
	// exist yet through the month of through, and returns how many.
	CreateAuditPartitions(ctx context.Context, through time.Time) (int, error)
}

// CreateAuditPartitions creates the monthly partitions of audit_events
// through AuditPartitionMonthsAhead months after the current one (by the
// app's clock), and returns how many it created. It is idempotent and runs
// as a periodic job (jobs.CreateAuditPartitionsWorker); the serving role
// creates them through a SECURITY DEFINER function (migration 00022), not
// with rights of its own.
func (a *App) CreateAuditPartitions(ctx context.Context) (int, error) {
	return a.store.CreateAuditPartitions(ctx, a.now().UTC().AddDate(0, AuditPartitionMonthsAhead, 0))
}
