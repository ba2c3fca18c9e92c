// Package store keeps Aether Audit's state in PostgreSQL through pgx/v5: the
// transaction helper, the audit event store with its per-project head row,
// idempotency records and migrations. Nothing outside this package writes SQL.
//
// A transaction opened by InTx travels in the context: every method called
// with that context runs inside it, so that use cases in package app compose
// one transaction out of several calls without seeing pgx.
package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/aetheriot/aether-audit/domain"
)

// ErrNotFound is returned when a looked-up row does not exist (in the
// caller's tenant and project). It is domain.ErrNotFound.
var ErrNotFound = domain.ErrNotFound

// ErrNoTx is returned by methods that must run inside InTx when called
// without a transaction in the context.
var ErrNoTx = errors.New("store: method requires a transaction (call it inside InTx)")

// Store is the PostgreSQL-backed store.
type Store struct {
	pool *pgxpool.Pool
	// jobs is an insert-only River client: the outbox of commands.
	jobs *river.Client[pgx.Tx]
}

// New returns a Store over pool.
func New(pool *pgxpool.Pool) *Store {
	// The cooldown also paces the wake-up signal this client sends workers
	// for inserted jobs: keep it as short as the workers' own.
	jobs, err := river.NewClient(riverpgxv5.New(pool), &river.Config{FetchCooldown: 20 * time.Millisecond})
	if err != nil {
		// An insert-only client with an empty config cannot fail to build.
		panic(fmt.Sprintf("store: creating River insert client: %v", err))
	}
	return &Store{pool: pool, jobs: jobs}
}

// Pool returns the underlying pool, for River and health checks.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

type txKey struct{}

// querier is what pgx.Tx and *pgxpool.Pool share.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	CopyFrom(ctx context.Context, tableName pgx.Identifier, columnNames []string, rowSrc pgx.CopyFromSource) (int64, error)
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// TxFromContext returns the transaction InTx put in ctx, if any: for River
// calls that must join it (completing a job in the transaction of its result).
func TxFromContext(ctx context.Context) (pgx.Tx, bool) {
	tx, ok := ctx.Value(txKey{}).(pgx.Tx)
	return tx, ok
}

func (s *Store) q(ctx context.Context) querier {
	if tx, ok := TxFromContext(ctx); ok {
		return tx
	}
	return s.pool
}

func (s *Store) tx(ctx context.Context) (pgx.Tx, error) {
	if tx, ok := TxFromContext(ctx); ok {
		return tx, nil
	}
	return nil, ErrNoTx
}

// InTx runs fn in one read-committed transaction carried by the context fn
// receives. It commits when fn returns nil and rolls back otherwise. Nested
// calls join the outer transaction.
func (s *Store) InTx(ctx context.Context, fn func(ctx context.Context) error) error {
	if _, ok := TxFromContext(ctx); ok {
		return fn(ctx)
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("beginning transaction: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // no-op after commit
	if err := fn(context.WithValue(ctx, txKey{}, tx)); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("committing transaction: %w", err)
	}
	return nil
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

// CommitWithoutFlush makes the transaction in ctx commit without waiting for
// its WAL to reach the disk (SET LOCAL synchronous_commit = off). A crash of
// PostgreSQL may then lose the transaction, never corrupt anything: use it
// only for writes whose loss the caller detects and repairs (an attempt's
// outcome, whose loss leaves the attempt DELIVERING, later recorded as
// unknown and resent).
func (s *Store) CommitWithoutFlush(ctx context.Context) error {
	tx, err := s.tx(ctx)
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, "SET LOCAL synchronous_commit = off"); err != nil {
		return fmt.Errorf("relaxing commit durability: %w", err)
	}
	return nil
}

// getOne reads the one row query q returns with scan: ErrNotFound when there
// is none, other errors wrapped as "reading <what>".
func getOne[T any](ctx context.Context, s *Store, what string, scan pgx.RowToFunc[T], q string, args ...any) (T, error) {
	rows, _ := s.q(ctx).Query(ctx, q, args...)
	v, err := pgx.CollectExactlyOneRow(rows, scan)
	if errors.Is(err, pgx.ErrNoRows) {
		return v, ErrNotFound
	}
	if err != nil {
		return v, fmt.Errorf("reading %s: %w", what, err)
	}
	return v, nil
}

// forUpdate appends FOR UPDATE to q when lock is set.
func forUpdate(q string, lock bool) string {
	if lock {
		return q + " FOR UPDATE"
	}
	return q
}
