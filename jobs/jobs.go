// Package jobs holds River job arguments and workers: the background work
// that acts on committed facts. NewClient wires every worker and periodic job
// into one River client over the service's pool.
package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
	"github.com/riverqueue/rivercontrib/otelriver"
	"go.opentelemetry.io/otel/trace"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/jobargs"
)

// Store is what the workers need of persistence; *store.Store implements it.
type Store interface {
	PruneIdempotencyKeys(ctx context.Context, limit int) (int64, error)
}

// ClientConfig configures NewClient.
type ClientConfig struct {
	Logger *slog.Logger
	// App runs the use cases behind the webhook workers.
	App *app.App
	// MaxWorkers bounds concurrent jobs of the default queue; default 10.
	MaxWorkers int
	// WebhookWorkers bounds concurrent webhook requests of this process;
	// default 100.
	WebhookWorkers int
	// WebhookSendTimeout is the sender's total timeout per request, from
	// which the delivery job's timeout follows; default 15 s.
	WebhookSendTimeout time.Duration
	// ExportWorkers bounds concurrent export runs of this process; default 2.
	ExportWorkers int
	// ExpiryInterval is how often READY exports past their expiry are
	// expired; default one minute.
	ExpiryInterval time.Duration
	// FetchCooldown is the least time between two fetches of a queue;
	// default 20 ms, for low delivery lag.
	FetchCooldown time.Duration
	// FetchPollInterval is the most time between two fetches of a queue
	// when no insert signal comes; default defaultFetchPollInterval, which
	// bounds the wait of a job whose signal was lost.
	FetchPollInterval time.Duration
	// PruneInterval is how often expired idempotency keys are pruned;
	// default one hour.
	PruneInterval time.Duration
	// RetentionInterval is how often audit events past their retention
	// window are purged; default one hour.
	RetentionInterval time.Duration
	// PartitionInterval is how often the partitions of the months ahead
	// are created and those past retention dropped; default one hour.
	PartitionInterval time.Duration
	// CheckpointInterval is how often a checkpoint is signed for every
	// project with new events; default one hour.
	CheckpointInterval time.Duration
	// TracerProvider, when set, gives every worked job a span (River's
	// OpenTelemetry middleware); nil adds no middleware.
	TracerProvider trace.TracerProvider
	// RescueStuckJobsAfter is how long a job may stay running before River
	// takes it for one of a process that died and runs it again; default
	// two minutes. A job whose own timeout is longer (an export run, a
	// delivery job of many requests) is rescued only once that timeout has
	// passed too, so that a live process's job is never run twice at once.
	RescueStuckJobsAfter time.Duration
	// ExportJobTimeout bounds one export run; default one hour. A run of a
	// process that died is rescued no sooner than this after it started.
	ExportJobTimeout time.Duration
	// SkipReindex turns off River's periodic reindexing of its tables:
	// REINDEX needs the tables' owner, which the runtime role that serves
	// is not (the owner may reindex them itself).
	SkipReindex bool
}

// defaultFetchPollInterval is ClientConfig.FetchPollInterval's default:
// River's own. Every way a job becomes available signals its queue (River's
// inserts, its scheduler, and store.Tx.RescheduleJobs for the webhook
// dispatcher's hand-overs), so the poll only catches a lost signal; each
// poll of each queue is a fetch statement and a wake-up of an idle process
// (at 250 ms, 12 of the 13 statements a second of the bench's idle
// process; 4 at 1 s: docs/benchmarks.md, "Trickle rows: the idle floor").
const defaultFetchPollInterval = time.Second

// defaultJobTimeout bounds a run of the jobs without a timeout of their own
// (fan-out, pruning, expiry, object deletion).
const defaultJobTimeout = time.Minute

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
	if cfg.WebhookWorkers <= 0 {
		cfg.WebhookWorkers = 100
	}
	if cfg.WebhookSendTimeout <= 0 {
		cfg.WebhookSendTimeout = 15 * time.Second
	}
	if cfg.ExportWorkers <= 0 {
		cfg.ExportWorkers = 2
	}
	if cfg.ExpiryInterval <= 0 {
		cfg.ExpiryInterval = time.Minute
	}
	if cfg.RetentionInterval <= 0 {
		cfg.RetentionInterval = time.Hour
	}
	if cfg.PartitionInterval <= 0 {
		cfg.PartitionInterval = time.Hour
	}
	if cfg.CheckpointInterval <= 0 {
		cfg.CheckpointInterval = time.Hour
	}
	if cfg.FetchCooldown <= 0 {
		cfg.FetchCooldown = 20 * time.Millisecond
	}
	if cfg.FetchPollInterval <= 0 {
		cfg.FetchPollInterval = max(defaultFetchPollInterval, cfg.FetchCooldown)
	}
	if cfg.RescueStuckJobsAfter <= 0 {
		cfg.RescueStuckJobsAfter = 2 * time.Minute
	}
	workers := river.NewWorkers()
	err := errors.Join(
		river.AddWorkerSafely(workers, &PruneIdempotencyKeysWorker{Store: store}),
		river.AddWorkerSafely(workers, &WebhookFanoutWorker{App: cfg.App}),
		river.AddWorkerSafely(workers, &WebhookDeliveryWorker{App: cfg.App, SendTimeout: cfg.WebhookSendTimeout}),
		river.AddWorkerSafely(workers, &WebhookOrderedDeliveryWorker{App: cfg.App, SendTimeout: cfg.WebhookSendTimeout}),
		river.AddWorkerSafely(workers, &DataExportWorker{App: cfg.App, JobTimeout: cfg.ExportJobTimeout}),
		river.AddWorkerSafely(workers, &DeleteExportObjectWorker{App: cfg.App}),
		river.AddWorkerSafely(workers, &ExpireDataExportsWorker{App: cfg.App}),
		river.AddWorkerSafely(workers, &PurgeAuditEventsWorker{App: cfg.App}),
		river.AddWorkerSafely(workers, &CreateAuditPartitionsWorker{App: cfg.App}),
		river.AddWorkerSafely(workers, &MaintainPartitionsWorker{App: cfg.App}),
		river.AddWorkerSafely(workers, &SignAuditCheckpointsWorker{App: cfg.App}),
		river.AddWorkerSafely(workers, &WriteCheckpointObjectWorker{App: cfg.App}),
	)
	if err != nil {
		return nil, fmt.Errorf("registering workers: %w", err)
	}
	var middleware []rivertype.Middleware
	if cfg.TracerProvider != nil {
		middleware = append(middleware, otelriver.NewMiddleware(&otelriver.MiddlewareConfig{
			TracerProvider: cfg.TracerProvider, EnableWorkSpanJobKindSuffix: true, EnableTracePropagation: true,
		}))
	}
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Middleware:        middleware,
		Logger:            cfg.Logger,
		FetchCooldown:     cfg.FetchCooldown,
		FetchPollInterval: cfg.FetchPollInterval,
		Queues: map[string]river.QueueConfig{
			river.QueueDefault:    {MaxWorkers: cfg.MaxWorkers},
			jobargs.QueueWebhooks: {MaxWorkers: cfg.WebhookWorkers},
			jobargs.QueueExports:  {MaxWorkers: cfg.ExportWorkers},
		},
		// River wants the client's default job timeout no longer than the
		// rescue delay; every worker without a timeout of its own declares
		// defaultJobTimeout, so this only satisfies the check.
		JobTimeout: min(defaultJobTimeout, cfg.RescueStuckJobsAfter),
		// A job of a process that died is run again after this; workers
		// with a longer timeout are left alone until it passes.
		RescueStuckJobsAfter: cfg.RescueStuckJobsAfter,
		ReindexerSchedule:    reindexSchedule(cfg.SkipReindex),
		Workers:              workers,
		PeriodicJobs: []*river.PeriodicJob{
			river.NewPeriodicJob(river.PeriodicInterval(cfg.PruneInterval),
				func() (river.JobArgs, *river.InsertOpts) { return jobargs.PruneIdempotencyKeysArgs{}, nil },
				&river.PeriodicJobOpts{ID: "prune_idempotency_keys", RunOnStart: true}),
			river.NewPeriodicJob(river.PeriodicInterval(cfg.ExpiryInterval),
				func() (river.JobArgs, *river.InsertOpts) { return jobargs.ExpireDataExportsArgs{}, nil },
				&river.PeriodicJobOpts{ID: "expire_data_exports", RunOnStart: true}),
			river.NewPeriodicJob(river.PeriodicInterval(cfg.RetentionInterval),
				func() (river.JobArgs, *river.InsertOpts) { return jobargs.PurgeAuditEventsArgs{}, nil },
				&river.PeriodicJobOpts{ID: "purge_audit_events", RunOnStart: true}),
			river.NewPeriodicJob(river.PeriodicInterval(auditPartitionInterval),
				func() (river.JobArgs, *river.InsertOpts) { return jobargs.CreateAuditPartitionsArgs{}, nil },
				&river.PeriodicJobOpts{ID: "create_audit_partitions", RunOnStart: true}),
			river.NewPeriodicJob(river.PeriodicInterval(cfg.PartitionInterval),
				func() (river.JobArgs, *river.InsertOpts) { return jobargs.MaintainPartitionsArgs{}, nil },
				&river.PeriodicJobOpts{ID: "maintain_partitions", RunOnStart: true}),
			river.NewPeriodicJob(river.PeriodicInterval(cfg.CheckpointInterval),
				func() (river.JobArgs, *river.InsertOpts) { return jobargs.SignAuditCheckpointsArgs{}, nil },
				&river.PeriodicJobOpts{ID: "sign_audit_checkpoints", RunOnStart: true}),
		},
	})
	if err != nil {
		return nil, fmt.Errorf("creating river client: %w", err)
	}
	return client, nil
}

// reindexSchedule is River's reindex schedule: its default (nil), or never.
func reindexSchedule(skip bool) river.PeriodicSchedule {
	if skip {
		return river.NeverSchedule()
	}
	return nil
}
