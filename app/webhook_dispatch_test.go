package app_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/jobargs"
)

// startDispatch runs b's webhook dispatcher until the test ends, and waits
// until recordings go through it.
func startDispatch(t *testing.T, b *webhookBundle) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.app.RunWebhookDispatch(ctx, app.WebhookDispatchConfig{SendTimeout: 5 * time.Second}) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	require.Eventually(t, b.app.WebhookDispatchRunning, 10*time.Second, time.Millisecond)
}

// heldDispatch is a bundle with one device.* subscription, its dispatcher
// running and its receiver holding every request until release.
func heldDispatch(t *testing.T) (b *webhookBundle, release func()) {
	t.Helper()
	b = setupWebhooks(t, webhookOpts{})
	b.subscribe(t, b.createDestination(t, "/a").Destination.ID.String(), "device.*")
	startDispatch(t, b)
	return b, b.receiver.hold(t)
}

// webhookJobStates returns the states of the River jobs of kind, oldest
// first.
func webhookJobStates(t *testing.T, b *webhookBundle, kind string) []string {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), `SELECT state::text FROM river_job WHERE kind = $1 ORDER BY id`, kind)
	require.NoError(t, err)
	var out []string
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		out = append(out, s)
	}
	require.NoError(t, rows.Err())
	return out
}

func TestWebhookDispatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fanoutKind, deliveryKind := jobargs.WebhookFanoutArgs{}.Kind(), jobargs.WebhookDeliveryArgs{}.Kind()

	t.Run("FirstAttemptWithoutRiverIntentBeforeRequest", func(t *testing.T) {
		t.Parallel()
		b, release := heldDispatch(t)

		// No River client runs: only the dispatcher can send this.
		e := b.record(t, "device.registered")
		req := <-b.receiver.arrived
		ds := b.deliveries(t, app.WebhookDeliveriesInput{})
		require.Len(t, ds, 1)
		d := ds[0]
		require.Equal(t, e.ID, d.EventID)
		require.Equal(t, d.IdempotencyKey, req.Header.Get("webhook-id"))
		// While the request is under way, its attempt is on record, the
		// fan-out job is gone (its work is done) and the delivery job waits,
		// scheduled minutes ahead, as the rescue should this process die.
		require.Equal(t, domain.WebhookDeliveryDelivering, d.State)
		require.Equal(t, 1, d.AttemptCount)
		require.Empty(t, webhookJobStates(t, b, fanoutKind))
		rescue := jobsAfter[jobargs.WebhookDeliveryArgs](t, b.pool, 0)
		require.Len(t, rescue, 1)
		require.Equal(t, []string{"scheduled"}, webhookJobStates(t, b, deliveryKind))
		require.Greater(t, time.Until(rescue[0].ScheduledAt), time.Minute)

		release()
		require.Eventually(t, func() bool {
			return b.delivery(t, d.ID.String()).State == domain.WebhookDeliveryDelivered && len(webhookJobStates(t, b, deliveryKind)) == 0
		}, 10*time.Second, 5*time.Millisecond, "delivered, and the rescue job deleted with the outcome")
		got := b.delivery(t, d.ID.String())
		require.Len(t, got.Attempts, 1)
		require.Equal(t, domain.WebhookAttemptSucceeded, got.Attempts[0].Outcome)
		require.Len(t, b.receiver.requests(), 1)
	})

	t.Run("FanOutCommitsTheFirstIntent", func(t *testing.T) {
		t.Parallel()
		b, release := heldDispatch(t)

		b.record(t, "device.registered")
		req := <-b.receiver.arrived
		// The attempt under way (the delivery's row, DELIVERING, records
		// it) was committed by the fan-out's transaction, the one that
		// enqueued the rescue job: no commit of its own, and no moment when
		// the delivery was committed PENDING without its attempt. A process
		// killed after that commit leaves the attempt DELIVERING, which the
		// rescue records UNKNOWN before it resends (the next subtest).
		rescue := jobsAfter[jobargs.WebhookDeliveryArgs](t, b.pool, 0)
		require.Len(t, rescue, 1)
		var jobTx, deliveryTx, key string
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT xmin::text FROM river_job WHERE id = $1`, rescue[0].ID).Scan(&jobTx))
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT xmin::text, idempotency_key FROM webhook_deliveries
			WHERE state = 'DELIVERING' AND attempt_count = 1`).Scan(&deliveryTx, &key))
		require.Equal(t, jobTx, deliveryTx, "the delivery's DELIVERING row and the rescue job: one transaction")
		require.Equal(t, key, req.Header.Get("webhook-id"))
		release()
	})

	t.Run("EventAfterAQuietTimeDoesNotLinger", func(t *testing.T) {
		t.Parallel()
		b := setupWebhooks(t, webhookOpts{})
		b.subscribe(t, b.createDestination(t, "/a").Destination.ID.String(), "device.*")
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- b.app.RunWebhookDispatch(ctx, app.WebhookDispatchConfig{SendTimeout: 5 * time.Second, Linger: time.Hour})
		}()
		t.Cleanup(func() {
			cancel()
			require.NoError(t, <-done)
		})
		require.Eventually(t, b.app.WebhookDispatchRunning, 10*time.Second, time.Millisecond)

		// The first event the dispatcher is handed follows a quiet time:
		// it is sent at once, not after the hour of linger.
		b.record(t, "device.registered")
		select {
		case req := <-b.receiver.arrived:
			ds := b.deliveries(t, app.WebhookDeliveriesInput{})
			require.Len(t, ds, 1)
			require.Equal(t, ds[0].IdempotencyKey, req.Header.Get("webhook-id"))
		case <-time.After(10 * time.Second):
			t.Fatal("the event waited for its linger")
		}
	})

	t.Run("RescueJobResendsAnAttemptOfADeadProcess", func(t *testing.T) {
		t.Parallel()
		b, release := heldDispatch(t)

		b.record(t, "device.registered")
		first := <-b.receiver.arrived
		// This process "dies" with its request under way: another runs the
		// rescue job, as River does once it comes due.
		b.receiver.setRespond(status(200))
		rescue := jobsAfter[jobargs.WebhookDeliveryArgs](t, b.pool, 0)
		require.Len(t, rescue, 1)
		other := b.otherApp(func(*app.Config) {})
		// The rescue records the attempt under way as UNKNOWN and enqueues
		// the resend, which goes out under the same webhook-id.
		require.NoError(t, other.DeliverWebhooks(ctx, rescue[0].Args))
		resend := jobsAfter[jobargs.WebhookDeliveryArgs](t, b.pool, rescue[0].ID)
		require.Len(t, resend, 1)
		require.NoError(t, other.DeliverWebhooks(ctx, resend[0].Args))
		second := <-b.receiver.arrived
		require.Equal(t, first.Header.Get("webhook-id"), second.Header.Get("webhook-id"), "one webhook-id per delivery")
		release()

		ds := b.deliveries(t, app.WebhookDeliveriesInput{})
		require.Len(t, ds, 1)
		got := b.delivery(t, ds[0].ID.String())
		require.Equal(t, domain.WebhookDeliveryDelivered, got.State)
		require.Len(t, got.Attempts, 2)
		require.Equal(t, domain.WebhookAttemptUnknown, got.Attempts[0].Outcome)
		require.Equal(t, domain.WebhookAttemptSucceeded, got.Attempts[1].Outcome)
		// The first process's late outcome changes nothing, and its outcome
		// transaction deletes the rescue job (the resend job, run outside
		// River here, stays available).
		require.Eventually(t, func() bool {
			return len(webhookJobStates(t, b, deliveryKind)) == 1
		}, 10*time.Second, 5*time.Millisecond)
		require.Equal(t, []string{"available"}, webhookJobStates(t, b, deliveryKind))
		require.Len(t, b.delivery(t, ds[0].ID.String()).Attempts, 2)
	})

	t.Run("BusyDestinationGoesToRiver", func(t *testing.T) {
		t.Parallel()
		b := setupWebhooks(t, webhookOpts{perDestination: 1})
		b.subscribe(t, b.createDestination(t, "/a").Destination.ID.String(), "device.*")
		b.receiver.hold(t)
		// A worker's delivery job holds the destination's one job slot in
		// this process, its request under way.
		b.record(t, "device.registered")
		b.fanOut(t)
		first := b.deliveryJobs(t)
		require.Len(t, first, 1)
		go func() { _ = b.app.DeliverWebhooks(ctx, first[0].Args) }()
		<-b.receiver.arrived

		// The dispatcher's delivery job finds the destination busy: it is
		// handed to River's workers (due at once) rather than waited for.
		startDispatch(t, b)
		b.record(t, "device.registered")
		require.Eventually(t, func() bool {
			states := webhookJobStates(t, b, deliveryKind)
			return len(states) == 2 && states[1] == "available"
		}, 10*time.Second, 5*time.Millisecond)
		require.Len(t, b.receiver.requests(), 1)
	})

	t.Run("BurstsGoToRiver", func(t *testing.T) {
		t.Parallel()
		b := setupWebhooks(t, webhookOpts{})
		b.subscribe(t, b.createDestination(t, "/a").Destination.ID.String(), "device.*")
		startDispatch(t, b)

		drafts := make([]domain.AuditEventDraft, 101)
		for i := range drafts {
			drafts[i] = draft("p1", "device.registered")
		}
		_, err := b.app.RecordAuditEvents(ctx, b.writer, app.RecordAuditEventsInput{Events: drafts})
		require.NoError(t, err)
		// More events than one dispatched fan-out covers: the fan-out job
		// is available to River's workers at once, and nothing is sent.
		require.Equal(t, []string{"available"}, webhookJobStates(t, b, fanoutKind))
		require.Empty(t, b.receiver.requests())
	})

	t.Run("ManyDestinationsGoToRiver", func(t *testing.T) {
		t.Parallel()
		b := setupWebhooks(t, webhookOpts{})
		for _, path := range []string{"/a", "/b", "/c", "/d", "/e"} {
			b.subscribe(t, b.createDestination(t, path).Destination.ID.String(), "device.*")
		}
		startDispatch(t, b)

		fanouts := len(webhookJobStates(t, b, fanoutKind)) // of the setup's own events
		e := b.record(t, "device.registered")
		// The dispatcher fans out (and deletes the event's fan-out job), but five delivery jobs are more than it
		// sends itself: they are available to River's workers at once.
		require.Eventually(t, func() bool {
			n := len(b.deliveries(t, app.WebhookDeliveriesInput{EventID: e.ID.String()}))
			require.LessOrEqual(t, n, 5)
			return n == 5
		}, 10*time.Second, 5*time.Millisecond)
		require.Len(t, webhookJobStates(t, b, fanoutKind), fanouts)
		require.Equal(t, []string{"available", "available", "available", "available", "available"}, webhookJobStates(t, b, deliveryKind))
		require.Empty(t, b.receiver.requests())
	})
}
