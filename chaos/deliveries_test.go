package chaos

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// attemptKey names one attempt of one delivery.
type attemptKey struct {
	delivery string
	number   int
}

// deliveringAttempts returns the attempts under way now: an attempt under
// way lives in its delivery's row (state DELIVERING, attempt_count its
// number) until its outcome's row is written.
func deliveringAttempts(t *testing.T, pool *pgxpool.Pool) map[attemptKey]bool {
	t.Helper()
	rows, err := pool.Query(context.Background(),
		`SELECT id::text, attempt_count FROM webhook_deliveries WHERE state = 'DELIVERING'`)
	require.NoError(t, err)
	out := map[attemptKey]bool{}
	for rows.Next() {
		var k attemptKey
		require.NoError(t, rows.Scan(&k.delivery, &k.number))
		out[k] = true
	}
	require.NoError(t, rows.Err())
	return out
}

// riverClients returns the ids of the River clients that have worked a job.
func riverClients(t *testing.T, pool *pgxpool.Pool) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT DISTINCT unnest(attempted_by) FROM river_job`)
	require.NoError(t, err)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return ids
}

// deliveringAttemptsOf returns the attempts left DELIVERING by the jobs
// that River clients (of one process) were running, and by the webhook
// dispatcher of the process that recorded the events: its delivery jobs
// wait scheduled, never run, as their rescue (callers make sure that only
// the killed process recorded events before the kill).
func deliveringAttemptsOf(t *testing.T, pool *pgxpool.Pool, clients []string) map[attemptKey]bool {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT d.id::text, d.attempt_count FROM webhook_deliveries d
		WHERE d.state = 'DELIVERING' AND EXISTS (SELECT 1 FROM river_job j
			WHERE j.kind = 'webhook_delivery'
			  AND (j.state = 'running' AND j.attempted_by[array_length(j.attempted_by, 1)] = ANY($1)
			    OR j.state = 'scheduled' AND coalesce(array_length(j.attempted_by, 1), 0) = 0)
			  AND position(replace(d.id::text, '-', '') IN j.args->>'deliveries') % 64 = 1)`, clients)
	require.NoError(t, err)
	out := map[attemptKey]bool{}
	for rows.Next() {
		var k attemptKey
		require.NoError(t, rows.Scan(&k.delivery, &k.number))
		out[k] = true
	}
	require.NoError(t, rows.Err())
	return out
}

// awaitDeliveriesSettled waits until the database has want deliveries, each
// DELIVERED or DEAD_LETTERED (so no attempt under way), then checks the end
// state against the receiver:
//
//   - a delivery is dead-lettered only by its schedule (every attempt used);
//   - every attempt left DELIVERING by a killed process (leftovers) was
//     recorded as UNKNOWN;
//   - every webhook-id the receiver got is one delivery's, hence one
//     (subscription, event), and every body sent under it is the same
//     payload of that event;
//   - every DELIVERED delivery reached the receiver.
func awaitDeliveriesSettled(t *testing.T, pool *pgxpool.Pool, rcv *receiver, want int, leftovers map[attemptKey]bool, timeout time.Duration) {
	t.Helper()
	await(t, timeout, "every delivery ends DELIVERED or DEAD_LETTERED", func() bool {
		total := count(t, pool, `SELECT count(*) FROM webhook_deliveries`)
		open := count(t, pool, `SELECT count(*) FROM webhook_deliveries WHERE state NOT IN ('DELIVERED', 'DEAD_LETTERED')`)
		return total == want && open == 0
	})
	require.Zero(t, count(t, pool, `SELECT count(*) FROM webhook_deliveries
		WHERE state = 'DEAD_LETTERED' AND attempt_count < max_attempts`), "a delivery was dead-lettered before its schedule ran out")

	for k := range leftovers {
		var outcome string
		require.NoError(t, pool.QueryRow(context.Background(),
			`SELECT outcome FROM webhook_delivery_attempts WHERE delivery_id = $1 AND number = $2`, k.delivery, k.number).Scan(&outcome))
		require.Equal(t, "UNKNOWN", outcome, "attempt %d of delivery %s was in flight at the kill", k.number, k.delivery)
	}

	type delivery struct{ subscription, event, state string }
	byKey := map[string]delivery{}
	pairs := map[[2]string]bool{}
	rows, err := pool.Query(context.Background(),
		`SELECT idempotency_key, subscription_id::text, event_id::text, state FROM webhook_deliveries`)
	require.NoError(t, err)
	for rows.Next() {
		var key string
		var d delivery
		require.NoError(t, rows.Scan(&key, &d.subscription, &d.event, &d.state))
		_, dup := byKey[key]
		require.False(t, dup, "webhook-id %s belongs to two deliveries", key)
		byKey[key] = d
		pair := [2]string{d.subscription, d.event}
		require.False(t, pairs[pair], "two deliveries of event %s to subscription %s", d.event, d.subscription)
		pairs[pair] = true
	}
	require.NoError(t, rows.Err())

	bodies := map[string]string{}
	for _, r := range rcv.received() {
		d, ok := byKey[r.webhookID]
		require.True(t, ok, "the receiver got webhook-id %q of no delivery", r.webhookID)
		if prev, seen := bodies[r.webhookID]; seen {
			require.Equal(t, prev, r.body, "two bodies under webhook-id %s", r.webhookID)
			continue
		}
		bodies[r.webhookID] = r.body
		var payload struct {
			Data struct {
				ID string `json:"id"`
			} `json:"data"`
		}
		require.NoError(t, json.Unmarshal([]byte(r.body), &payload))
		require.Equal(t, d.event, payload.Data.ID, "webhook-id %s carried another event", r.webhookID)
	}
	for key, d := range byKey {
		if d.state == "DELIVERED" {
			_, ok := bodies[key]
			require.True(t, ok, "delivery %s is DELIVERED but the receiver never got it", key)
		}
	}
}
