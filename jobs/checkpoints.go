package jobs

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/jobargs"
)

// checkpointProjectsPerRun bounds the projects one run of the periodic
// signer looks at; the rest wait for the next run.
const checkpointProjectsPerRun = 1000

// SignAuditCheckpointsWorker runs app.SignDueCheckpoints.
type SignAuditCheckpointsWorker struct {
	river.WorkerDefaults[jobargs.SignAuditCheckpointsArgs]
	App *app.App
}

// Work implements river.Worker.
func (w *SignAuditCheckpointsWorker) Work(ctx context.Context, _ *river.Job[jobargs.SignAuditCheckpointsArgs]) error {
	_, err := w.App.SignDueCheckpoints(ctx, checkpointProjectsPerRun)
	return err
}

// Timeout bounds one run; the checkpoints it signed stay, and the next run
// goes on from there.
func (w *SignAuditCheckpointsWorker) Timeout(*river.Job[jobargs.SignAuditCheckpointsArgs]) time.Duration {
	return 10 * time.Minute
}

// WriteCheckpointObjectWorker runs app.WriteCheckpointObject, the outbox
// job committed with a checkpoint.
type WriteCheckpointObjectWorker struct {
	river.WorkerDefaults[jobargs.WriteCheckpointObjectArgs]
	App *app.App
}

// Work implements river.Worker.
func (w *WriteCheckpointObjectWorker) Work(ctx context.Context, job *river.Job[jobargs.WriteCheckpointObjectArgs]) error {
	return w.App.WriteCheckpointObject(ctx, job.Args.TenantID, job.Args.ProjectID, job.Args.Sequence)
}

// Timeout implements river.Worker.
func (w *WriteCheckpointObjectWorker) Timeout(*river.Job[jobargs.WriteCheckpointObjectArgs]) time.Duration {
	return defaultJobTimeout
}
