package jobs

import (
	"context"
	"time"

	"github.com/aetheriot/aether-audit/jobargs"
	"github.com/riverqueue/river"
)

// pruneBatch is how many expired keys one statement deletes.
const pruneBatch = 5000

// PruneIdempotencyKeysWorker deletes expired idempotency records in batches
// until none remain.
type PruneIdempotencyKeysWorker struct {
	river.WorkerDefaults[jobargs.PruneIdempotencyKeysArgs]
	Store Store
}

// Timeout implements river.Worker.
func (w *PruneIdempotencyKeysWorker) Timeout(*river.Job[jobargs.PruneIdempotencyKeysArgs]) time.Duration {
	return defaultJobTimeout
}

// Work implements river.Worker.
func (w *PruneIdempotencyKeysWorker) Work(ctx context.Context, job *river.Job[jobargs.PruneIdempotencyKeysArgs]) error {
	for {
		n, err := w.Store.PruneIdempotencyKeys(ctx, pruneBatch)
		if err != nil {
			return err
		}
		if n < pruneBatch {
			return nil
		}
	}
}
