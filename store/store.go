// Package store keeps Aether Audit's state in PostgreSQL through pgx/v5: the
// transaction helper, the audit event store with its per-project head row,
// idempotency records and migrations. Nothing outside this package writes SQL.
//
// A transaction is a value: InTx passes fn a *Tx, and the statements that
// belong to a command's transaction (locks, the command's writes, its
// outbox jobs) are methods of Tx only. Reads, and writes that stand alone
// in their own statement, are methods of both Store (on the pool) and Tx
// (in the transaction).
//
// Static statements are written in queries/*.sql and compiled by sqlc into
// package dbsqlc (see docs/architecture.md, "How to add a query"); the
// filtered pages build theirs with filtered.
package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/store/dbsqlc"
)

// ErrNotFound is returned when a looked-up row does not exist (in the
// caller's tenant and project). It is domain.ErrNotFound.
var ErrNotFound = domain.ErrNotFound

// Store is the PostgreSQL-backed store. Its methods run on the pool, each
// statement in its own implicit transaction; InTx opens an explicit one.
type Store struct {
	queries
	pool *pgxpool.Pool
	// jobs is an insert-only River client: the outbox of commands.
	jobs *river.Client[pgx.Tx]
}

// New returns a Store over pool.
func New(pool *pgxpool.Pool) *Store {
	// The cooldown also paces the wake-up signal this client sends workers
	// for inserted jobs: a transaction that inserts a job within it of the
	// last signal sends none, and when the workers' fetch woken by that
	// signal ran before this transaction committed, its job waited for the
	// workers' next poll (up to a second: the webhook lag's outliers). At
	// the minimum, every outbox transaction wakes the workers at its
	// commit; their own FetchCooldown still bounds how often they fetch.
	jobs, err := river.NewClient(riverpgxv5.New(pool), &river.Config{FetchCooldown: river.FetchCooldownMin})
	if err != nil {
		// An insert-only client with an empty config cannot fail to build.
		panic(fmt.Sprintf("store: creating River insert client: %v", err))
	}
	return &Store{queries: newQueries(pool), pool: pool, jobs: jobs}
}

// Pool returns the underlying pool, for River and health checks.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// querier is what pgx.Tx and *pgxpool.Pool share.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	CopyFrom(ctx context.Context, tableName pgx.Identifier, columnNames []string, rowSrc pgx.CopyFromSource) (int64, error)
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// queries holds the methods Store and Tx share: reads, and writes that
// stand alone in one statement (or one batch, which PostgreSQL runs as one
// implicit transaction). On a Store they run on the pool, on a Tx in its
// transaction.
type queries struct {
	db querier
	// sqlc runs the static statements of queries/*.sql on db.
	sqlc *dbsqlc.Queries
}

func newQueries(db querier) queries { return queries{db: db, sqlc: dbsqlc.New(db)} }

// Tx is one transaction opened by Store.InTx. Besides the methods it shares
// with Store, which run in the transaction, it has those that only make
// sense inside one: locks that last until the commit, the writes of a
// command, and River jobs inserted or completed with them. A Tx is valid
// only during the call of InTx's fn.
type Tx struct {
	queries
	tx   *txConn
	jobs *river.Client[pgx.Tx]
	// afterCommit are the functions AfterCommit registered.
	afterCommit []func()
}

// InTx runs fn in one read-committed transaction, which fn receives as tx.
// It commits when fn returns nil and rolls back otherwise.
//
// The transaction saves round trips (see txConn): BEGIN goes with its first
// statement, and the writes of AppendAuditEvents go with the COMMIT, so an
// append costs two round trips: BEGIN with the head lock, then the writes
// with the COMMIT. A write queued this way that fails surfaces as the
// commit's error, and nothing of the transaction is committed.
func (s *Store) InTx(ctx context.Context, fn func(ctx context.Context, tx *Tx) error) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("beginning transaction: %w", err)
	}
	// The pool discards a connection released inside a transaction (after
	// a panic of fn or a failed rollback).
	defer conn.Release()
	tc := &txConn{conn: conn.Conn()}
	defer func() {
		if tc.settle() {
			// Released closed, the pool discards it.
			conn.Conn().Close(context.WithoutCancel(ctx)) //nolint:errcheck // discarded either way
		}
	}()
	tx := &Tx{queries: newQueries(tc), tx: tc, jobs: s.jobs}
	if err := fn(ctx, tx); err != nil {
		tc.rollback(context.WithoutCancel(ctx))
		return err
	}
	if err := tc.commit(ctx); err != nil {
		tc.rollback(context.WithoutCancel(ctx))
		return fmt.Errorf("committing transaction: %w", err)
	}
	for _, f := range tx.afterCommit {
		f()
	}
	return nil
}

// AfterCommit registers f to run once the transaction has committed, in
// the order of registration; f never runs if the transaction rolls back or
// its commit fails. f must not block.
func (t *Tx) AfterCommit(f func()) {
	t.afterCommit = append(t.afterCommit, f)
}

// IsRetryable reports whether err is a conflict that a fresh attempt of the
// same transaction resolves: unique_violation from a concurrent insert,
// serialization_failure or deadlock_detected.
func (s *Store) IsRetryable(err error) bool {
	if errors.Is(err, errRetry) {
		return true
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	switch pgErr.Code {
	case "23505", "40001", "40P01":
		return true
	}
	return false
}

// IsPastBound reports whether err is a wait that PostgreSQL ended at the
// transaction's bound (Tx.BoundAppendWaits): a lock wait at its
// lock_timeout (lock_not_available), or any wait at the cancel request
// sent shortly after the bound (query_canceled). Either way the
// transaction rolled back without writing.
func (s *Store) IsPastBound(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "55P03" || pgErr.Code == "57014")
}

// CommitWithoutFlush makes the transaction commit without waiting for its
// WAL to reach the disk (SET LOCAL synchronous_commit = off). A crash of
// PostgreSQL may then lose the transaction, never corrupt anything: use it
// only for writes whose loss the caller detects and repairs (an attempt's
// outcome, whose loss leaves the attempt DELIVERING, later recorded as
// unknown and resent). The setting is queued: it reaches the server with
// the transaction's next statement, or its COMMIT, in the same round trip.
func (t *Tx) CommitWithoutFlush(context.Context) error {
	t.tx.queue("relaxing commit durability", "SET LOCAL synchronous_commit = off")
	return nil
}
