package chaos

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestKillDuringWebhookDeliveries kills `aether serve` with SIGKILL while
// 500 deliveries are in flight to a slow receiver, starts it again, and
// checks that every delivery ends delivered (or dead-lettered by its
// schedule), that the attempts the kill interrupted are recorded with an
// unknown outcome, and that the receiver's duplicates share a webhook-id.
func TestKillDuringWebhookDeliveries(t *testing.T) {
	t.Parallel()
	d := newDeployment(t, shared)
	rcv := newReceiver(t, 200*time.Millisecond, 500*time.Millisecond)
	first := d.serve(t, "first")

	// 2 subscriptions × 250 events: 500 deliveries.
	webhookSetup(t, first, d.token, rcv.url, 2)
	for range 5 {
		require.NoError(t, recordEvents(context.Background(), first, d.token, 50))
	}
	await(t, time.Minute, "the fan-out creates 500 deliveries", func() bool {
		return count(t, d.pool, `SELECT count(*) FROM webhook_deliveries`) == 500
	})
	await(t, time.Minute, "the receiver has requests open", func() bool {
		_, open, answered := rcv.stats()
		return open >= 4 && answered >= 10
	})
	first.kill(t)

	received, _, answered := rcv.stats()
	leftovers := deliveringAttempts(t, d.pool)
	unfinished := count(t, d.pool, `SELECT count(*) FROM webhook_deliveries WHERE state NOT IN ('DELIVERED', 'DEAD_LETTERED')`)
	t.Logf("at the kill: %d requests received, %d answered, %d attempts DELIVERING, %d deliveries unfinished",
		received, answered, len(leftovers), unfinished)
	require.NotEmpty(t, leftovers, "the kill left no attempt in flight")
	require.Greater(t, unfinished, 100, "most deliveries should still be in flight at the kill")

	second := d.serve(t, "second")
	awaitDeliveriesSettled(t, d.pool, rcv, 500, leftovers, 4*time.Minute)
	require.True(t, second.running())
	require.Positive(t, count(t, d.pool, `SELECT count(*) FROM webhook_delivery_attempts WHERE outcome = 'UNKNOWN'`))
}
