package jobs

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/jobargs"
)

// MaintainPartitionsWorker runs app.MaintainPartitions.
type MaintainPartitionsWorker struct {
	river.WorkerDefaults[jobargs.MaintainPartitionsArgs]
	App *app.App
}

// Work implements river.Worker.
func (w *MaintainPartitionsWorker) Work(ctx context.Context, _ *river.Job[jobargs.MaintainPartitionsArgs]) error {
	_, err := w.App.MaintainPartitions(ctx)
	return err
}

// Timeout bounds one run: a drop counts the rows of each project in the
// partition before it goes (for its audit event), a read of the whole
// month.
func (w *MaintainPartitionsWorker) Timeout(*river.Job[jobargs.MaintainPartitionsArgs]) time.Duration {
	return 10 * time.Minute
}
