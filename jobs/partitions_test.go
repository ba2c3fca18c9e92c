package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/jobs"
	"github.com/aetheriot/aether-audit/store"
	"github.com/aetheriot/aether-audit/store/storetest"
)

// TestMaintainPartitionsRunsOnStartAsTheRuntimeRole starts a real River
// client connected as the least-privileged runtime role: the periodic
// maintain_partitions job runs on start and creates the months ahead
// through the definer function, which the role may call though it may not
// create a table.
func TestMaintainPartitionsRunsOnStartAsTheRuntimeRole(t *testing.T) {
	_, appURL, _ := storetest.NewAppRoleDatabase(t)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, appURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	_, err = pool.Exec(ctx, "CREATE TABLE evil (a int)")
	require.Error(t, err, "the runtime role creates no table")

	st := store.New(pool)
	a := app.New(st, app.Config{Partitions: app.PartitionConfig{MonthsAhead: 4}})
	client, err := jobs.NewClient(pool, st, jobs.ClientConfig{App: a, SkipReindex: true})
	require.NoError(t, err)
	require.NoError(t, client.Start(ctx))
	t.Cleanup(func() { _ = client.Stop(context.Background()) })

	now := time.Now().UTC()
	ahead := time.Date(now.Year(), now.Month()+4, 1, 0, 0, 0, 0, time.UTC).Format("200601")
	require.Eventually(t, func() bool {
		var completed int
		require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM river_job WHERE kind = 'maintain_partitions' AND state = 'completed'").Scan(&completed))
		return completed >= 1
	}, 30*time.Second, 50*time.Millisecond, "the job completes")
	for _, table := range []string{"webhook_deliveries", "webhook_delivery_attempts", "alarm_history", "telemetry_history"} {
		var n int
		require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM aether_partitions WHERE partition_name = $1", table+"_p"+ahead).Scan(&n))
		require.Equal(t, 1, n, "%s has its partition four months ahead", table)
	}
}
