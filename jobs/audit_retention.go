package jobs

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/jobargs"
)

// purgeBatchesPerRun bounds the purge transactions of one run; a backlog
// is worked off over the following runs.
const purgeBatchesPerRun = 100

// PurgeAuditEventsWorker runs app.PurgeExpiredAuditEvents.
type PurgeAuditEventsWorker struct {
	river.WorkerDefaults[jobargs.PurgeAuditEventsArgs]
	App *app.App
}

// Work implements river.Worker.
func (w *PurgeAuditEventsWorker) Work(ctx context.Context, _ *river.Job[jobargs.PurgeAuditEventsArgs]) error {
	_, err := w.App.PurgeExpiredAuditEvents(ctx, purgeBatchesPerRun)
	return err
}

// Timeout bounds one run; a run cut short has committed its finished
// batches, and the next run goes on from there.
func (w *PurgeAuditEventsWorker) Timeout(*river.Job[jobargs.PurgeAuditEventsArgs]) time.Duration {
	return 10 * time.Minute
}
