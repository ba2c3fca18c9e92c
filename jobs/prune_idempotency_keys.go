package jobs

import (
	"context"
	"time"

	"github.com/riverqueue/river"
)

// pruneBatch is how many expired keys one statement deletes.
const pruneBatch = 5000

// PruneIdempotencyKeysArgs is the periodic job that deletes idempotency
// records past their expiry.
type PruneIdempotencyKeysArgs struct{}

// Kind implements river.JobArgs.
func (PruneIdempotencyKeysArgs) Kind() string { return "prune_idempotency_keys" }

// PruneIdempotencyKeysWorker deletes expired idempotency records in batches
// until none remain.
type PruneIdempotencyKeysWorker struct {
	river.WorkerDefaults[PruneIdempotencyKeysArgs]
	Store Store
}

// Timeout implements river.Worker.
func (w *PruneIdempotencyKeysWorker) Timeout(*river.Job[PruneIdempotencyKeysArgs]) time.Duration {
	return defaultJobTimeout
}

// Work implements river.Worker.
func (w *PruneIdempotencyKeysWorker) Work(ctx context.Context, job *river.Job[PruneIdempotencyKeysArgs]) error {
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
