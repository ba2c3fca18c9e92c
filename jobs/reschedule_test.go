package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/jobargs"
	"github.com/aetheriot/aether-audit/jobs"
	"github.com/aetheriot/aether-audit/store"
	"github.com/aetheriot/aether-audit/store/storetest"
)

// TestRescheduledJobRunsWithoutAPoll hands a scheduled job to River's
// workers the way the webhook dispatcher does (store.Tx.RescheduleJobs,
// due now) while the workers poll only once an hour: the job runs at once,
// woken by the insert signal RescheduleJobs sends, not at the next poll.
func TestRescheduledJobRunsWithoutAPoll(t *testing.T) {
	pool := storetest.NewPool(t)
	ctx := context.Background()
	st := store.New(pool)

	var id int64
	require.NoError(t, st.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
		ids, err := tx.EnqueueJobIDs(ctx, domain.OutboxJob{Args: jobargs.PruneIdempotencyKeysArgs{}, ScheduledAt: time.Now().Add(time.Hour)})
		id = ids[0]
		return err
	}))

	client, err := jobs.NewClient(pool, st, jobs.ClientConfig{
		FetchPollInterval: time.Hour, ExpiryInterval: time.Hour,
	})
	require.NoError(t, err)
	require.NoError(t, client.Start(ctx))
	t.Cleanup(func() { _ = client.Stop(context.Background()) })

	// The periodic prune that runs on start completes: the workers have
	// made their first fetch, and the next poll is an hour away.
	jobState := func(where string, args ...any) int {
		var n int
		require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM river_job WHERE "+where, args...).Scan(&n))
		return n
	}
	require.Eventually(t, func() bool {
		return jobState("kind = 'prune_idempotency_keys' AND state = 'completed'") >= 1
	}, 30*time.Second, 20*time.Millisecond)
	require.Equal(t, 1, jobState("id = $1 AND state = 'scheduled'", id))

	require.NoError(t, st.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
		return tx.RescheduleJobs(ctx, []int64{id}, time.Now())
	}))
	require.Eventually(t, func() bool {
		return jobState("id = $1 AND state = 'completed'", id) == 1
	}, 30*time.Second, 20*time.Millisecond, "the handed-over job runs without waiting for a poll")
}
