package jobs

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/jobargs"
)

// DataExportWorker runs an export; see app.App.RunDataExport. The export
// turns READY (or FAILED) in the same transaction as the job's completion.
type DataExportWorker struct {
	river.WorkerDefaults[jobargs.DataExportJobArgs]
	App *app.App
	// JobTimeout bounds one run; default one hour.
	JobTimeout time.Duration
}

// Timeout implements river.Worker.
func (w *DataExportWorker) Timeout(*river.Job[jobargs.DataExportJobArgs]) time.Duration {
	if w.JobTimeout > 0 {
		return w.JobTimeout
	}
	return time.Hour
}

// Work implements river.Worker.
func (w *DataExportWorker) Work(ctx context.Context, job *river.Job[jobargs.DataExportJobArgs]) error {
	return w.App.RunDataExport(ctx, app.DataExportRun{
		Args: job.Args, Attempt: job.Attempt,
		Complete: func(ctx context.Context, tx app.Tx) error { return tx.CompleteJob(ctx, job.JobRow) },
	})
}

// DeleteExportObjectWorker deletes an expired export's object.
type DeleteExportObjectWorker struct {
	river.WorkerDefaults[jobargs.DeleteExportObjectArgs]
	App *app.App
}

// Timeout implements river.Worker.
func (w *DeleteExportObjectWorker) Timeout(*river.Job[jobargs.DeleteExportObjectArgs]) time.Duration {
	return defaultJobTimeout
}

// Work implements river.Worker.
func (w *DeleteExportObjectWorker) Work(ctx context.Context, job *river.Job[jobargs.DeleteExportObjectArgs]) error {
	return w.App.DeleteExportObject(ctx, job.Args.ObjectRef)
}

// ExpireDataExportsWorker expires due exports in batches until none remain,
// then deletes the rows of exports expired longer than their retention.
type ExpireDataExportsWorker struct {
	river.WorkerDefaults[jobargs.ExpireDataExportsArgs]
	App *app.App
}

// Timeout implements river.Worker.
func (w *ExpireDataExportsWorker) Timeout(*river.Job[jobargs.ExpireDataExportsArgs]) time.Duration {
	return defaultJobTimeout
}

// Work implements river.Worker.
func (w *ExpireDataExportsWorker) Work(ctx context.Context, job *river.Job[jobargs.ExpireDataExportsArgs]) error {
	const batch = 100
	for {
		n, err := w.App.ExpireDueDataExports(ctx, batch)
		if err != nil {
			return err
		}
		if n < batch {
			break
		}
	}
	for {
		n, err := w.App.DeleteExpiredDataExportRows(ctx, 10*batch)
		if err != nil || n < 10*batch {
			return err
		}
	}
}
