package store

import (
	"context"
	"fmt"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/aetheriot/aether-audit/domain"
)

// EnqueueJobs inserts outbox jobs as River jobs in the transaction (River's
// InsertTx, or InsertManyFastTx for several): they become visible to
// workers at commit, and vanish with a rollback.
func (t *Tx) EnqueueJobs(ctx context.Context, jobs ...domain.OutboxJob) error {
	if len(jobs) == 0 {
		return nil
	}
	params := make([]river.InsertManyParams, len(jobs))
	for i, j := range jobs {
		params[i] = river.InsertManyParams{Args: j.Args, InsertOpts: &river.InsertOpts{
			Queue:       j.Queue,
			ScheduledAt: j.ScheduledAt,
			MaxAttempts: j.MaxAttempts,
		}}
	}
	tx, err := t.tx.pgxTx(ctx)
	if err != nil {
		return fmt.Errorf("enqueueing %d jobs: %w", len(jobs), err)
	}
	if len(params) == 1 {
		_, err = t.jobs.InsertTx(ctx, tx, params[0].Args, params[0].InsertOpts)
	} else {
		_, err = t.jobs.InsertManyFastTx(ctx, tx, params)
	}
	if err != nil {
		return fmt.Errorf("enqueueing %d jobs: %w", len(jobs), err)
	}
	return nil
}

// CompleteJob marks job, which the calling River worker is running,
// completed in the transaction (river.JobCompleteTx): the job is completed
// exactly when what the transaction records commits. ctx must be (derived
// from) the worker's context, which carries River's client.
func (t *Tx) CompleteJob(ctx context.Context, job *rivertype.JobRow) error {
	tx, err := t.tx.pgxTx(ctx)
	if err != nil {
		return fmt.Errorf("completing job %d: %w", job.ID, err)
	}
	if _, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, &river.Job[completedJobArgs]{JobRow: job}); err != nil {
		return fmt.Errorf("completing job %d: %w", job.ID, err)
	}
	return nil
}

// completedJobArgs stands for the arguments of a job completed by its row:
// JobCompleteTx decodes the completed job's arguments into them, and
// nothing reads them.
type completedJobArgs struct{}

// Kind implements river.JobArgs.
func (completedJobArgs) Kind() string { return "" }

// UnmarshalJSON implements json.Unmarshaler: the arguments are not needed.
func (*completedJobArgs) UnmarshalJSON([]byte) error { return nil }
