package store

import (
	"context"
	"fmt"

	"github.com/riverqueue/river"

	"github.com/aetheriot/aether-audit/domain"
)

// EnqueueJobs inserts outbox jobs as River jobs in the caller's transaction
// (River's InsertManyTx): they become visible to workers at commit, and
// vanish with a rollback.
func (s *Store) EnqueueJobs(ctx context.Context, jobs ...domain.OutboxJob) error {
	if len(jobs) == 0 {
		return nil
	}
	tx, err := s.tx(ctx)
	if err != nil {
		return err
	}
	params := make([]river.InsertManyParams, len(jobs))
	for i, j := range jobs {
		params[i] = river.InsertManyParams{Args: j.Args, InsertOpts: &river.InsertOpts{
			Queue:       j.Queue,
			ScheduledAt: j.ScheduledAt,
			MaxAttempts: j.MaxAttempts,
		}}
	}
	if len(params) == 1 {
		_, err = s.jobs.InsertTx(ctx, tx, params[0].Args, params[0].InsertOpts)
	} else {
		_, err = s.jobs.InsertManyFastTx(ctx, tx, params)
	}
	if err != nil {
		return fmt.Errorf("enqueueing %d jobs: %w", len(jobs), err)
	}
	return nil
}
