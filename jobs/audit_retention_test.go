package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/jobs"
	"github.com/aetheriot/aether-audit/store"
)

// TestWebhookDeliveriesOfPurgedEventsAreDeadLettered purges events whose
// deliveries are still to be sent: one waiting for a retry is dead-lettered
// by the purge itself, one in flight when its event goes is dead-lettered by
// its next run, and neither can be redriven.
func TestWebhookDeliveriesOfPurgedEventsAreDeadLettered(t *testing.T) {
	r := newReceiver(t, always(503))
	b := setupWebhooks(t, setupOpts{rootCAs: r, schedule: "100ms,1h"})
	b.subscribe(t, r, "device.*")
	ctx := context.Background()

	waiting := b.record(t, "device.rebooted")
	require.Eventually(t, func() bool {
		return b.awaitDelivery(t, waiting, domain.WebhookDeliveryRetrying).AttemptCount == 2
	}, 30*time.Second, 20*time.Millisecond, "the delivery waits an hour for its third attempt")

	hold := make(chan struct{})
	r.mu.Lock()
	r.hold = hold
	r.mu.Unlock()
	inFlight := b.record(t, "device.rebooted")
	b.awaitDelivery(t, inFlight, domain.WebhookDeliveryDelivering)

	// A process 401 days later purges everything recorded so far.
	later := app.New(store.New(b.pool), app.Config{Webhooks: b.cfg,
		Now: func() time.Time { return time.Now().Add(401 * 24 * time.Hour) }})
	purges, err := later.PurgeExpiredAuditEvents(ctx, 10)
	require.NoError(t, err)
	require.Len(t, purges, 1)
	require.Equal(t, int64(1), purges[0].DeadLettered)
	require.Equal(t, inFlight.Sequence, purges[0].Through)

	d := b.awaitDelivery(t, waiting, domain.WebhookDeliveryDeadLettered)
	require.Contains(t, d.LastError, "event_purged")
	require.Equal(t, domain.WebhookDeliveryDelivering, b.awaitDelivery(t, inFlight, domain.WebhookDeliveryDelivering).State,
		"a request in flight is left to finish")

	close(hold)
	d = b.awaitDelivery(t, inFlight, domain.WebhookDeliveryDeadLettered)
	require.Contains(t, d.LastError, "event_purged")
	require.Equal(t, 1, d.AttemptCount, "nothing was sent once the event was gone")

	_, err = b.app.RedriveWebhookDelivery(ctx, b.admin, d.ID.String(), true)
	require.Equal(t, app.CodeInvalidState, app.ErrorOf(err).Code)
	require.Contains(t, err.Error(), "purged")
}

// TestPurgeAuditEventsRunsOnStart starts a real River client whose clock is
// 2 days past a 1-day retention window: the periodic purge runs on start,
// removes the old events and records its purge event.
func TestPurgeAuditEventsRunsOnStart(t *testing.T) {
	b := setupWebhooks(t, setupOpts{noWorkers: true})
	ctx := context.Background()
	for range 3 {
		b.record(t, "device.updated")
	}
	later := app.New(store.New(b.pool), app.Config{AuditRetention: 24 * time.Hour,
		Now: func() time.Time { return time.Now().Add(48 * time.Hour) }})
	client, err := jobs.NewClient(b.pool, store.New(b.pool), jobs.ClientConfig{App: later})
	require.NoError(t, err)
	require.NoError(t, client.Start(ctx))
	t.Cleanup(func() { _ = client.Stop(context.Background()) })

	require.Eventually(t, func() bool {
		var completed int
		require.NoError(t, b.pool.QueryRow(ctx, "SELECT count(*) FROM river_job WHERE kind = 'purge_audit_events' AND state = 'completed'").Scan(&completed))
		return completed >= 1
	}, 30*time.Second, 50*time.Millisecond, "the job completes")
	var actions []string
	rows, err := b.pool.Query(ctx, "SELECT action FROM audit_events WHERE tenant_id = 't1' AND project_id = 'p1' ORDER BY sequence")
	require.NoError(t, err)
	for rows.Next() {
		var a string
		require.NoError(t, rows.Scan(&a))
		actions = append(actions, a)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"audit.events.purged"}, actions)
}
