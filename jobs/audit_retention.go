package jobs

import (
	"context"

	"github.com/riverqueue/river"

	"github.com/aetheriot/aether-audit/app"
)

// purgeBatchesPerRun bounds the purge transactions of one run; a backlog
// is worked off over the following runs.
const purgeBatchesPerRun = 100

// PurgeAuditEventsArgs is the periodic job that removes audit events older
// than their tenant's retention window.
type PurgeAuditEventsArgs struct{}

// Kind implements river.JobArgs.
func (PurgeAuditEventsArgs) Kind() string { return "purge_audit_events" }

// PurgeAuditEventsWorker runs app.PurgeExpiredAuditEvents.
type PurgeAuditEventsWorker struct {
	river.WorkerDefaults[PurgeAuditEventsArgs]
	App *app.App
}

// Work implements river.Worker.
func (w *PurgeAuditEventsWorker) Work(ctx context.Context, _ *river.Job[PurgeAuditEventsArgs]) error {
	_, err := w.App.PurgeExpiredAuditEvents(ctx, purgeBatchesPerRun)
	return err
}
