package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// RiverJobCount is the number of River jobs of one queue, state and kind.
type RiverJobCount struct {
	Queue, State, Kind string
	Count              int64
	// OldestScheduledAt is the earliest scheduled_at among them.
	OldestScheduledAt time.Time
}

// CountUnfinishedRiverJobs counts River's jobs that are not finished
// (available, scheduled, retryable, running, pending) by queue, state and
// kind, for the queue depth metrics. It reads River's own table, in the
// search path like River's client does, through the state index.
func (s *Store) CountUnfinishedRiverJobs(ctx context.Context) ([]RiverJobCount, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT queue, state::text, kind, count(*), min(scheduled_at)
		FROM river_job
		WHERE state IN ('available', 'scheduled', 'retryable', 'running', 'pending')
		GROUP BY queue, state, kind`)
	if err != nil {
		return nil, fmt.Errorf("counting river jobs: %w", err)
	}
	counts, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (RiverJobCount, error) {
		var c RiverJobCount
		err := row.Scan(&c.Queue, &c.State, &c.Kind, &c.Count, &c.OldestScheduledAt)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("counting river jobs: %w", err)
	}
	return counts, nil
}
