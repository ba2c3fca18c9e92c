package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/store/storetest"
)

// TestCancelledStatementStopsOnTheServer: cancelling the context of a
// statement stops it on the server, not only in the client. With the
// pool the service builds (store.ConfigurePool, pgx's default context
// watcher), pgx v5 answers a cancelled context by failing the read and
// closing the connection (pgconn's asyncClose), which first sends
// PostgreSQL a cancel request for the backend (PgConn.CancelRequest), then
// Terminate. A closed socket alone would not stop it: the backend does not
// read its socket while it runs a statement, so an abandoned pg_sleep(60)
// would go on for a minute. The test awaits the statement on the server,
// cancels, and awaits (within a bound, by polling pg_stat_activity) that
// the backend no longer runs it.
func TestCancelledStatementStopsOnTheServer(t *testing.T) {
	t.Parallel()
	pool := storetest.NewPool(t)
	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	pid := conn.Conn().PgConn().PID()
	running := func() bool {
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE pid = $1 AND state = 'active' AND query LIKE '%pg_sleep(60)%'`, pid).Scan(&n))
		return n > 0
	}

	stmtCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := conn.Exec(stmtCtx, "SELECT pg_sleep(60)")
		done <- err
	}()
	require.Eventually(t, running, 10*time.Second, 10*time.Millisecond, "the statement runs on the server")
	cancel()
	select {
	case err := <-done:
		require.True(t, errors.Is(err, context.Canceled), "the statement returns the cancellation: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the cancelled statement did not return")
	}
	conn.Release()
	require.Eventually(t, func() bool { return !running() }, 5*time.Second, 10*time.Millisecond,
		"the backend stops the cancelled statement")
}
