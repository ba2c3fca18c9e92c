// Package jobs holds River job arguments and workers: the background work
// that acts on committed facts. NewClient wires every worker and periodic job
// into one River client over the service's pool.
package jobs

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
)

// Store is what the workers need of persistence; *store.Store implements it.
type Store interface {
	PruneIdempotencyKeys(ctx context.Context, limit int) (int64, error)
}

// ClientConfig configures NewClient.
type ClientConfig struct {
	Logger *slog.Logger
	// MaxWorkers bounds concurrent jobs of the default queue; default 10.
	MaxWorkers int
	// PruneInterval is how often expired idempotency keys are pruned;
	// default one hour.
	PruneInterval time.Duration
}

// NewClient returns a River client with every worker and periodic job of
// the service registered. River elects one leader among all processes on the
// database to schedule periodic jobs.
func NewClient(pool *pgxpool.Pool, store Store, cfg ClientConfig) (*river.Client[pgx.Tx], error) {
	if cfg.MaxWorkers <= 0 {
		cfg.MaxWorkers = 10
	}
	if cfg.PruneInterval <= 0 {
		cfg.PruneInterval = time.Hour
	}
	workers := river.NewWorkers()
	if err := river.AddWorkerSafely(workers, &PruneIdempotencyKeysWorker{Store: store}); err != nil {
		return nil, fmt.Errorf("registering workers: %w", err)
	}
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Logger:  cfg.Logger,
		Queues:  map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: cfg.MaxWorkers}},
		Workers: workers,
		PeriodicJobs: []*river.PeriodicJob{
			river.NewPeriodicJob(river.PeriodicInterval(cfg.PruneInterval),
				func() (river.JobArgs, *river.InsertOpts) { return PruneIdempotencyKeysArgs{}, nil },
				&river.PeriodicJobOpts{ID: "prune_idempotency_keys", RunOnStart: true}),
		},
	})
	if err != nil {
		return nil, fmt.Errorf("creating river client: %w", err)
	}
	return client, nil
}
