package store

import (
	"context"
	"fmt"
	"time"

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
	params := insertParams(jobs)
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

// EnqueueJobIDs inserts outbox jobs as EnqueueJobs does and returns their
// River job ids, in the order of jobs.
func (t *Tx) EnqueueJobIDs(ctx context.Context, jobs ...domain.OutboxJob) ([]int64, error) {
	if len(jobs) == 0 {
		return nil, nil
	}
	params := insertParams(jobs)
	tx, err := t.tx.pgxTx(ctx)
	if err != nil {
		return nil, fmt.Errorf("enqueueing %d jobs: %w", len(jobs), err)
	}
	results, err := t.jobs.InsertManyTx(ctx, tx, params)
	if err != nil {
		return nil, fmt.Errorf("enqueueing %d jobs: %w", len(jobs), err)
	}
	ids := make([]int64, len(results))
	for i, r := range results {
		ids[i] = r.Job.ID
	}
	return ids, nil
}

// insertParams are River's insert parameters of jobs.
func insertParams(jobs []domain.OutboxJob) []river.InsertManyParams {
	params := make([]river.InsertManyParams, len(jobs))
	for i, j := range jobs {
		params[i] = river.InsertManyParams{Args: j.Args, InsertOpts: &river.InsertOpts{
			Queue:       j.Queue,
			ScheduledAt: j.ScheduledAt,
			MaxAttempts: j.MaxAttempts,
		}}
	}
	return params
}

// DropScheduledJobs deletes the River jobs ids that are still scheduled
// (rescue jobs whose work was done without them), with the transaction's
// commit: the statement is queued and travels with the next statement or
// the COMMIT, so it costs no round trip of its own. A job that has come due
// meanwhile is left to run (the work it repeats finds nothing to do).
func (t *Tx) DropScheduledJobs(ids []int64) {
	if len(ids) == 0 {
		return
	}
	t.tx.queue("dropping scheduled jobs", `DELETE FROM river_job WHERE id = ANY($1::bigint[]) AND state = 'scheduled'`, ids)
}

// RescheduleJobs makes the River jobs ids that are still scheduled due at
// at: available at once when at is not in the future, else scheduled then.
// Jobs made available signal their queues as River's own inserts do (its
// insert notification, delivered at commit), so that a producer fetches
// them at once rather than at its next poll (jobs.ClientConfig's
// FetchPollInterval, a backstop for lost signals). Scheduled jobs need no
// signal: River's scheduler sends one when they come due.
func (t *Tx) RescheduleJobs(ctx context.Context, ids []int64, at time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	if _, err := t.tx.Exec(ctx, rescheduleJobsSQL, ids, at); err != nil {
		return fmt.Errorf("rescheduling %d jobs: %w", len(ids), err)
	}
	return nil
}

// rescheduleJobsSQL moves jobs and sends River's insert notification for
// each queue of a job it made available: channel
// "<current schema>.river_insert", payload {"queue": ...}, as River's
// client (PGNotifyMany) sends it and its producers listen for it.
const rescheduleJobsSQL = `WITH moved AS (
	UPDATE river_job
	SET scheduled_at = $2, state = CASE WHEN $2 <= now() THEN 'available' ELSE 'scheduled' END::river_job_state
	WHERE id = ANY($1::bigint[]) AND state = 'scheduled'
	RETURNING queue, state
)
SELECT count(pg_notify(coalesce(current_schema(), '') || '.river_insert', json_build_object('queue', queue)::text))
FROM (SELECT DISTINCT queue FROM moved WHERE state = 'available') due`

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
