package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/jobs"
	"github.com/aetheriot/aether-audit/store"
	"github.com/aetheriot/aether-audit/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

// TestPruneIdempotencyKeysRunsOnStart starts a real River client: its
// leader schedules the periodic prune on start, which deletes expired
// idempotency keys and keeps live ones.
func TestPruneIdempotencyKeysRunsOnStart(t *testing.T) {
	pool := storetest.NewPool(t)
	ctx := context.Background()
	_, err := pool.Exec(ctx, `INSERT INTO idempotency_keys (tenant_id, operation, key, fingerprint, result, expires_at) VALUES
		('t1', 'op', 'expired', '\x00', 'null', now() - interval '1 minute'),
		('t1', 'op', 'live',    '\x00', 'null', now() + interval '1 hour')`)
	require.NoError(t, err)

	client, err := jobs.NewClient(pool, store.New(pool), jobs.ClientConfig{})
	require.NoError(t, err)
	require.NoError(t, client.Start(ctx))
	t.Cleanup(func() { _ = client.Stop(context.Background()) })

	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM idempotency_keys WHERE key = 'expired'").Scan(&n))
		return n == 0
	}, 30*time.Second, 50*time.Millisecond)
	var live int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM idempotency_keys WHERE key = 'live'").Scan(&live))
	require.Equal(t, 1, live)
	require.Eventually(t, func() bool {
		var completed int
		require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM river_job WHERE kind = 'prune_idempotency_keys' AND state = 'completed'").Scan(&completed))
		return completed >= 1
	}, 30*time.Second, 50*time.Millisecond, "the job completes")
}
