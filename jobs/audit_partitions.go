package jobs

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/jobargs"
)

// auditPartitionInterval is how often the partitions of audit_events are
// created ahead (and on start): they are months ahead, so a day is plenty.
const auditPartitionInterval = 24 * time.Hour

// CreateAuditPartitionsWorker runs app.CreateAuditPartitions.
type CreateAuditPartitionsWorker struct {
	river.WorkerDefaults[jobargs.CreateAuditPartitionsArgs]
	App *app.App
}

// Work implements river.Worker.
func (w *CreateAuditPartitionsWorker) Work(ctx context.Context, _ *river.Job[jobargs.CreateAuditPartitionsArgs]) error {
	_, err := w.App.CreateAuditPartitions(ctx)
	return err
}
