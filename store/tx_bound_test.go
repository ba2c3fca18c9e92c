package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/store"
	"github.com/aetheriot/aether-audit/store/storetest"
)

// TestBoundedTransactionCancelsAWaitPastItsBound: a bounded transaction
// (Tx.BoundAppendWaits) whose statement still runs past the bound, in a
// wait its lock_timeout does not end (here pg_sleep), is canceled shortly
// after the bound, with an error IsPastBound reports, and its connection is
// discarded: the pool's one connection serves the next transaction from
// another backend, which no late cancel signal can reach. A transaction
// done within its bound keeps its connection.
func TestBoundedTransactionCancelsAWaitPastItsBound(t *testing.T) {
	cfg, err := pgxpool.ParseConfig(storetest.NewDatabase(t))
	require.NoError(t, err)
	cfg.MaxConns = 1
	store.ConfigurePool(cfg)
	ctx := context.Background()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	s := store.New(pool)
	backend := func(bound time.Duration) (pid int32) {
		require.NoError(t, s.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
			tx.BoundAppendWaits(bound, bound)
			return store.TxQueryRow(ctx, tx, "SELECT pg_backend_pid()").Scan(&pid)
		}))
		return pid
	}
	first := backend(time.Minute)
	require.Equal(t, first, backend(time.Minute), "a transaction within its bound keeps its connection")

	const bound = 300 * time.Millisecond
	start := time.Now()
	err = s.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
		tx.BoundAppendWaits(bound, time.Minute)
		var one int
		return store.TxQueryRow(ctx, tx, "SELECT 1 FROM pg_sleep(60)").Scan(&one)
	})
	require.Error(t, err)
	require.True(t, s.IsPastBound(err), "%v", err)
	require.Less(t, time.Since(start), 30*time.Second, "canceled, not slept out")
	require.NotEqual(t, first, backend(time.Minute), "the canceled transaction's connection is discarded")
}
