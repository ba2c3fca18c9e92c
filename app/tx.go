package app

import (
	"context"
	"time"

	"github.com/riverqueue/river/rivertype"

	"github.com/aetheriot/aether-audit/domain"
)

// Tx is one transaction of Store.InTx, passed as a value to the code that
// works in it. It has the methods that only make sense inside a
// transaction: locks held until the commit, the writes of a command, the
// idempotency claim, and the River jobs inserted or completed with them. It
// also reads, in the transaction, what Store reads.
type Tx interface {
	AuditReads

	// LockAuditHead locks the project's chain head for the transaction and
	// reports whether the project has an active webhook subscription.
	LockAuditHead(ctx context.Context, tenantID, projectID string) (head domain.ChainHead, webhooks bool, err error)
	// ExpectAuditHead locks the project's chain head for the transaction
	// when the caller knows it already: the transaction then fails, with an
	// error IsRetryable accepts, unless the head is still head and the
	// project's webhook subscriptions still as webhooks says. It may defer
	// the check to the statement or commit that follows.
	ExpectAuditHead(ctx context.Context, tenantID, projectID string, head domain.ChainHead, webhooks bool) error
	// BoundAppendWaits bounds, in the database, every wait of the
	// transaction to end at lock (a lock wait, and any other statement
	// still running shortly after), and its idle time while holding locks
	// to idle: a wait past its bound fails the transaction, with nothing
	// written, with an error Store.IsPastBound reports. It may defer the
	// setting to the next statement; call it once, first.
	BoundAppendWaits(lock, idle time.Duration)
	// AppendAuditEvents inserts sealed events and moves the project's head,
	// locked by LockAuditHead or ExpectAuditHead, from prev to head.
	AppendAuditEvents(ctx context.Context, tenantID, projectID string, events []domain.AuditEvent, prev, head domain.ChainHead) error

	// ClaimIdempotencyKey claims a key for the transaction, or returns the
	// fingerprint and result of the request that used it first.
	ClaimIdempotencyKey(ctx context.Context, tenantID, operation, key string, fingerprint domain.Hash, ttl time.Duration) (prior domain.Hash, result []byte, found bool, err error)
	// CompleteIdempotencyKey stores the result of the command that claimed
	// the key in this transaction.
	CompleteIdempotencyKey(ctx context.Context, tenantID, operation, key string, result []byte) error

	// EnqueueJobs inserts outbox work in the transaction: the jobs exist
	// exactly when the transaction commits.
	EnqueueJobs(ctx context.Context, jobs ...domain.OutboxJob) error
	// EnqueueJobIDs inserts outbox work as EnqueueJobs does and returns the
	// jobs' ids, in order.
	EnqueueJobIDs(ctx context.Context, jobs ...domain.OutboxJob) ([]int64, error)
	// DropScheduledJobs deletes, with the commit, the jobs ids that are
	// still scheduled: rescue jobs whose work was done without them.
	DropScheduledJobs(ids []int64)
	// RescheduleJobs makes the jobs ids that are still scheduled due at at.
	RescheduleJobs(ctx context.Context, ids []int64, at time.Time) error
	// AfterCommit registers f to run once the transaction committed (never
	// after a rollback). f must not block.
	AfterCommit(f func())
	// CompleteJob completes the River job a worker is running (ctx is the
	// worker's) in the transaction, so that it is completed exactly when
	// what the transaction records commits.
	CompleteJob(ctx context.Context, job *rivertype.JobRow) error

	WebhookTx
	DataExportTx
	RetentionTx
	AuditPartitionTx
	CheckpointTx
	AuditStreamTx
	PartitionTx
}

// maxTxAttempts bounds the retries of a transaction that lost a race (a
// concurrent insert of the same event id or idempotency key).
const maxTxAttempts = 4

// retryTx runs fn in a transaction, again when it lost a race that a fresh
// attempt resolves.
func (a *App) retryTx(ctx context.Context, fn func(ctx context.Context, tx Tx) error) error {
	var err error
	for attempt := 1; attempt <= maxTxAttempts; attempt++ {
		err = a.store.InTx(ctx, fn)
		if err == nil || !a.store.IsRetryable(err) || ctx.Err() != nil {
			return err
		}
	}
	return err
}

// txAsTx is a Store[T] seen as a Store[Tx]: its InTx passes the store's own
// transaction type on as a Tx. It is how New accepts a store whose package
// cannot name Tx.
type txAsTx[T Tx] struct{ Store[T] }

// InTx implements Store[Tx].
func (s txAsTx[T]) InTx(ctx context.Context, fn func(ctx context.Context, tx Tx) error) error {
	return s.Store.InTx(ctx, func(ctx context.Context, tx T) error { return fn(ctx, tx) })
}
