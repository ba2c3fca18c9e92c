// Package app holds Aether Audit's use cases: one command or query per file.
// Each checks the identity's permission and project scope, validates input
// into domain values and, for commands, runs one transaction holding the
// idempotency record, the aggregate change, its audit event and its outbox
// work. Interfaces (GraphQL, REST, SSE) call only this package.
package app

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/trace"

	"github.com/aetheriot/aether-audit/checkpoint"
	"github.com/aetheriot/aether-audit/domain"
)

// Store is what the use cases need of persistence. Its own methods are
// reads, and writes that stand alone in one statement; everything else runs
// in a transaction of InTx, through the Tx it passes to fn. T is the store's
// transaction type: *store.Store implements Store[*store.Tx] (package store
// does not import app, so its InTx cannot name Tx), and New takes it as it
// is.
type Store[T Tx] interface {
	// InTx runs fn in one transaction, tx: committed when fn returns nil,
	// rolled back otherwise.
	InTx(ctx context.Context, fn func(ctx context.Context, tx T) error) error
	// IsRetryable reports whether a transaction's error is a lost race that
	// a fresh attempt resolves.
	IsRetryable(err error) bool
	// IsPastBound reports whether a transaction's error is a wait ended
	// by its bound (Tx.BoundAppendWaits): it rolled back unwritten.
	IsPastBound(err error) bool

	AuditReads
	WebhookStore
	DataExportStore
	RetentionStore
	AuditPartitionStore
	CheckpointReads
	WebhookSubscriptionLocker
	AuditStreamStore
	PartitionStore
}

// AuditReads reads audit events and chain heads: on the Store each read
// runs alone, on a Tx in its transaction.
type AuditReads interface {
	AuditHead(ctx context.Context, tenantID, projectID string) (domain.ChainHead, error)
	FindAuditEventsByID(ctx context.Context, tenantID string, ids []uuid.UUID) (map[uuid.UUID]domain.AuditEvent, error)
	GetAuditEvent(ctx context.Context, tenantID, projectID string, id uuid.UUID) (domain.AuditEvent, error)
	GetAuditEventBySequence(ctx context.Context, tenantID, projectID string, seq uint64) (domain.AuditEvent, error)
	SearchAuditEvents(ctx context.Context, tenantID, projectID string, f domain.AuditEventFilter, page domain.AuditEventPage) ([]domain.AuditEvent, error)
	// VisitAuditEvents runs the query of SearchAuditEvents and calls fn for
	// each event as its row arrives; the event is valid only during the
	// call.
	VisitAuditEvents(ctx context.Context, tenantID, projectID string, f domain.AuditEventFilter, page domain.AuditEventPage, fn func(*domain.AuditEvent) error) error
	ScanAuditEvents(ctx context.Context, tenantID, projectID string, from, to uint64, fn func(*domain.AuditEvent) error) error
}

// App runs the use cases.
type App struct {
	store  Store[Tx]
	logger *slog.Logger
	now    func() time.Time
	// idempotencyTTL is how long idempotency keys are remembered.
	idempotencyTTL time.Duration
	// coalescer shares transactions among concurrent appends to a project.
	coalescer appendCoalescer
	// appendTimeout bounds an append's wait (Config.AppendTimeout).
	appendTimeout time.Duration
	// live streams committed events; nil disables subscriptions.
	live LiveFeed
	// webhooks configures the webhook registry and delivery.
	webhooks webhookRuntime
	// fanouts gathers fan-out jobs of a project started close together
	// (CoalesceWebhookFanout).
	fanouts fanoutCoalescer
	// dispatch is the running webhook dispatcher (RunWebhookDispatch), nil
	// when none runs.
	dispatch atomic.Pointer[webhookDispatcher]
	// exports configures data exports.
	exports ExportConfig
	// exportWatch signals changes of exports; nil disables their
	// subscriptions.
	exportWatch DataExportWatcher
	// limits bounds commands and subscription starts.
	limits *rateLimiter
	// verifyLimits bounds one chain verification.
	verifyLimits VerifyLimits
	// verifications counts the running verification streams.
	verifications verificationSlots
	// retention is the default audit retention window, minRetention the
	// shortest a tenant may set; purgeBatch the most events one purge
	// transaction removes.
	retention, minRetention time.Duration
	purgeBatch              int
	// observer receives measurements (metrics).
	observer Observer
	// tracer starts the spans of commands; nil when tracing is off.
	tracer trace.Tracer
	// checkpoints signs and verifies checkpoints; nil turns them off.
	checkpoints *checkpoint.KeyRing
	// streams configures audit streams.
	streams StreamConfig
	// partitions configures the partitioned history tables.
	partitions PartitionConfig
}

// Config configures an App. Zero fields take defaults.
type Config struct {
	Logger *slog.Logger
	// Now returns the current time; default time.Now.
	Now func() time.Time
	// IdempotencyTTL is how long an idempotency key is remembered; default
	// 24 hours.
	IdempotencyTTL time.Duration
	// Live is the live feed behind subscriptions; nil disables them.
	Live LiveFeed
	// Webhooks configures webhook destinations and deliveries.
	Webhooks WebhookConfig
	// Exports configures data exports.
	Exports ExportConfig
	// ExportWatch signals changes of exports for their subscriptions; nil
	// disables them.
	ExportWatch DataExportWatcher
	// RateLimits bounds commands and subscription starts per identity and
	// tenant; zero limits are off.
	RateLimits RateLimitConfig
	// AuditRetention is how long audit events are kept unless their tenant
	// sets its own window; default DefaultAuditRetention.
	AuditRetention time.Duration
	// MinAuditRetention is the shortest window setAuditRetention may set
	// for a tenant, a service-wide floor; default DefaultMinAuditRetention.
	MinAuditRetention time.Duration
	// PurgeBatch is the most events one purge transaction removes; default
	// DefaultPurgeBatch.
	PurgeBatch int
	// Observer receives measurements of webhook attempts and export runs;
	// nil ignores them.
	Observer Observer
	// Tracer, when set, starts a span for each command (a use case that
	// writes); nil turns command spans off at no cost.
	Tracer trace.Tracer
	// Checkpoints is the key ring that signs audit checkpoints and verifies
	// stored ones; nil turns checkpoints off (createAuditCheckpoint fails,
	// the periodic signer does nothing, exports record none).
	Checkpoints *checkpoint.KeyRing
	// Streams configures audit streams and their worker.
	Streams StreamConfig
	// Verify bounds the work of one verifyAuditChain call, and the
	// verification streams.
	Verify VerifyLimits
	// Partitions configures the partitioned history tables: retention
	// and months created ahead.
	Partitions PartitionConfig
	// AppendTimeout bounds how long an append of audit events waits, from
	// its arrival, for its transaction (for the project's head, locked by
	// another transaction, or for the shared transaction before it) before
	// it fails with UNAVAILABLE; default DefaultAppendTimeout.
	AppendTimeout time.Duration
}

// New returns an App over store.
func New[T Tx](store Store[T], cfg Config) *App {
	a := &App{store: txAsTx[T]{store}, logger: cfg.Logger, now: cfg.Now, idempotencyTTL: cfg.IdempotencyTTL, live: cfg.Live}
	if a.logger == nil {
		a.logger = slog.Default()
	}
	if a.now == nil {
		a.now = time.Now
	}
	if a.idempotencyTTL <= 0 {
		a.idempotencyTTL = 24 * time.Hour
	}
	a.webhooks = newWebhookRuntime(cfg.Webhooks)
	a.exports = cfg.Exports.withDefaults()
	a.streams = cfg.Streams.withDefaults()
	a.verifyLimits = cfg.Verify.withDefaults()
	a.partitions = cfg.Partitions.withDefaults()
	if a.appendTimeout = cfg.AppendTimeout; a.appendTimeout <= 0 {
		a.appendTimeout = DefaultAppendTimeout
	}
	a.exportWatch = cfg.ExportWatch
	a.limits = newRateLimiter(cfg.RateLimits)
	a.retention, a.purgeBatch = cfg.AuditRetention, cfg.PurgeBatch
	if a.retention <= 0 {
		a.retention = DefaultAuditRetention
	}
	if a.minRetention = cfg.MinAuditRetention; a.minRetention <= 0 {
		a.minRetention = DefaultMinAuditRetention
	}
	if a.purgeBatch <= 0 {
		a.purgeBatch = DefaultPurgeBatch
	}
	a.observer, a.tracer, a.checkpoints = cfg.Observer, cfg.Tracer, cfg.Checkpoints
	if a.observer == nil {
		a.observer = noObserver{}
	}
	return a
}

// storedNow is the current time at the precision PostgreSQL keeps
// (microseconds, UTC), so that a command's answer and later reads of what it
// stored show the same instant.
func (a *App) storedNow() time.Time { return a.now().UTC().Truncate(time.Microsecond) }
