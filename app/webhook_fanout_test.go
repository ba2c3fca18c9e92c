package app_test

import (
	"context"
	"regexp"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/jobargs"
)

func TestFanOutWebhookDeliveries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	// testBundle has two destinations: a gets two subscriptions (device.*
	// and the exact user.role.granted plus device.*), b one (user.*).
	type testBundle struct {
		*webhookBundle
		destA, destB             uuid.UUID
		devices, devicesAndRoles domain.WebhookSubscription
		users                    domain.WebhookSubscription
		schedule                 domain.RetrySchedule
	}
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		schedule := domain.RetrySchedule{domain.MaxRetryDelay, domain.MaxRetryDelay}
		b := &testBundle{webhookBundle: setupWebhooks(t, webhookOpts{schedule: schedule}), schedule: schedule}
		b.destA = b.createDestination(t, "/a").Destination.ID
		b.destB = b.createDestination(t, "/b").Destination.ID
		b.devices = b.subscribe(t, b.destA.String(), "device.*")
		b.devicesAndRoles = b.subscribe(t, b.destA.String(), "user.role.granted", "device.*")
		b.users = b.subscribe(t, b.destB.String(), "user.*")
		require.Zero(t, b.fanOut(t), "the subscriptions' own creation events match none of them")
		return b
	}

	t.Run("OneDeliveryPerMatchingSubscriptionAndEvent", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		events, err := b.app.RecordAuditEvents(ctx, b.writer, app.RecordAuditEventsInput{Events: []domain.AuditEventDraft{
			draft("p1", "device.firmware.updated"), draft("p1", "user.role.granted"),
			draft("p1", "devices.listed"), // matches no "device.*"
			draft("p1", "report.read"),
		}})
		require.NoError(t, err)
		firmware, granted := events[0], events[1]
		require.Equal(t, 4, b.fanOut(t))

		want := map[uuid.UUID][]uuid.UUID{ // event -> subscriptions
			firmware.ID: {b.devices.ID, b.devicesAndRoles.ID},
			granted.ID:  {b.devicesAndRoles.ID, b.users.ID},
		}
		got := map[uuid.UUID][]uuid.UUID{}
		keys := map[string]bool{}
		all := b.deliveries(t, app.WebhookDeliveriesInput{})
		for _, d := range all {
			got[d.EventID] = append(got[d.EventID], d.SubscriptionID)
			event := map[uuid.UUID]domain.AuditEvent{firmware.ID: firmware, granted.ID: granted}[d.EventID]
			require.Equal(t, event.Sequence, d.EventSequence)
			require.Equal(t, event.Action, d.EventType)
			require.Equal(t, domain.WebhookDeliveryPending, d.State)
			require.Zero(t, d.AttemptCount)
			require.Equal(t, b.schedule.MaxAttempts(), d.MaxAttempts)
			require.Equal(t, b.clock.Now(), d.CreatedAt)
			require.Empty(t, d.Attempts)
			require.Regexp(t, regexp.MustCompile(`^msg_[0-9a-f]{32}$`), d.IdempotencyKey)
			keys[d.IdempotencyKey] = true
		}
		for event := range want {
			require.ElementsMatch(t, want[event], got[event])
		}
		require.Len(t, keys, 4, "every delivery has its own webhook-id, also two of one event to one destination")

		// The first attempts of a fan-out go out in one job per destination.
		jobs := b.deliveryJobs(t)
		require.Len(t, jobs, 2)
		perDest := map[uuid.UUID]int{}
		for _, j := range jobs {
			require.Equal(t, jobargs.QueueWebhooks, j.Queue)
			require.Equal(t, "t1", j.Args.TenantID)
			ids, _, err := j.Args.IDs()
			require.NoError(t, err)
			for i := range ids {
				require.Equal(t, 1, j.Args.Attempt(i))
			}
			perDest[j.Args.DestinationID] += len(ids)
		}
		require.Equal(t, map[uuid.UUID]int{b.destA: 3, b.destB: 1}, perDest)
	})

	t.Run("RunningAgainCreatesNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		e := b.record(t, "device.rebooted")
		fanouts := jobsAfter[jobargs.WebhookFanoutArgs](t, b.pool, b.lastFanout)
		require.Len(t, fanouts, 1)
		require.Equal(t, jobargs.WebhookFanoutArgs{TenantID: "t1", ProjectID: "p1", FromSequence: e.Sequence, ToSequence: e.Sequence}, fanouts[0].Args)
		n, err := b.app.FanOutWebhookDeliveries(ctx, fanouts[0].Args)
		require.NoError(t, err)
		require.Equal(t, 2, n)
		before := b.deliveries(t, app.WebhookDeliveriesInput{})
		jobs := b.deliveryJobs(t)

		n, err = b.app.FanOutWebhookDeliveries(ctx, fanouts[0].Args)
		require.NoError(t, err)
		require.Zero(t, n, "a rerun (River retry, rescue) creates no delivery")
		require.Equal(t, before, b.deliveries(t, app.WebhookDeliveriesInput{}))
		require.Empty(t, b.deliveryJobs(t), "and enqueues no job")
		require.Len(t, jobs, 1)
	})

	t.Run("ARunOverARangeFannedOutInPartCreatesTheRest", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		first := b.record(t, "device.rebooted")
		b.record(t, "user.created")
		last := b.record(t, "device.rebooted")
		n, err := b.app.FanOutWebhookDeliveries(ctx, jobargs.WebhookFanoutArgs{TenantID: "t1", ProjectID: "p1",
			FromSequence: first.Sequence, ToSequence: first.Sequence + 1})
		require.NoError(t, err)
		require.Equal(t, 3, n)
		before := b.deliveries(t, app.WebhookDeliveriesInput{})
		b.deliveryJobs(t)

		// The plain insert of the first two events' deliveries fails; the
		// run goes on with the insert that skips them.
		n, err = b.app.FanOutWebhookDeliveries(ctx, jobargs.WebhookFanoutArgs{TenantID: "t1", ProjectID: "p1",
			FromSequence: first.Sequence, ToSequence: last.Sequence})
		require.NoError(t, err)
		require.Equal(t, 2, n, "the last event's deliveries only")
		after := b.deliveries(t, app.WebhookDeliveriesInput{})
		require.Len(t, after, 5)
		for _, d := range before {
			require.Contains(t, after, d, "the earlier deliveries as they were")
		}
		jobs := b.deliveryJobs(t)
		require.Len(t, jobs, 1, "one job, of the new deliveries")
		ids, events, err := jobs[0].Args.IDs()
		require.NoError(t, err)
		require.Len(t, ids, 2)
		require.Equal(t, []uuid.UUID{last.ID, last.ID}, events)
	})

	t.Run("NoBackfillBeforeTheSubscription", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		last := b.record(t, "device.rebooted")
		// A fan-out over every event of the project, the subscriptions'
		// own creation events and those before them included.
		n, err := b.app.FanOutWebhookDeliveries(ctx, jobargs.WebhookFanoutArgs{TenantID: "t1", ProjectID: "p1",
			FromSequence: 1, ToSequence: last.Sequence})
		require.NoError(t, err)
		require.Equal(t, 2, n)
		for _, d := range b.deliveries(t, app.WebhookDeliveriesInput{}) {
			require.Equal(t, last.ID, d.EventID)
		}

		// A subscription created now gets nothing of what came before it.
		later := b.subscribe(t, b.destB.String(), "device.*")
		n, err = b.app.FanOutWebhookDeliveries(ctx, jobargs.WebhookFanoutArgs{TenantID: "t1", ProjectID: "p1",
			FromSequence: 1, ToSequence: later.AfterSequence})
		require.NoError(t, err)
		require.Zero(t, n)
		require.Empty(t, b.deliveries(t, app.WebhookDeliveriesInput{SubscriptionID: later.ID.String()}))
	})

	t.Run("OnlyProjectsWithActiveSubscriptionsFanOut", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.app.RecordAuditEvent(ctx, b.writer, draft("p2", "device.rebooted"), "")
		require.NoError(t, err)
		require.Empty(t, jobsAfter[jobargs.WebhookFanoutArgs](t, b.pool, b.lastFanout), "p2 has no subscription: no fan-out job")

		// Even a fan-out run over p2's events finds nothing to deliver: the
		// subscriptions of p1 do not see p2's events.
		n, err := b.app.FanOutWebhookDeliveries(ctx, jobargs.WebhookFanoutArgs{TenantID: "t1", ProjectID: "p2", FromSequence: 1, ToSequence: 1})
		require.NoError(t, err)
		require.Zero(t, n)
		n, err = b.app.FanOutWebhookDeliveries(ctx, jobargs.WebhookFanoutArgs{TenantID: "t2", ProjectID: "p1", FromSequence: 1, ToSequence: 10})
		require.NoError(t, err)
		require.Zero(t, n, "nor does another tenant's p1")
		require.Zero(t, countRows(t, b.pool, "webhook_deliveries"))
	})

	t.Run("RefusesABadRange", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, args := range []jobargs.WebhookFanoutArgs{
			{TenantID: "t1", ProjectID: "p1", FromSequence: 0, ToSequence: 1},
			{TenantID: "t1", ProjectID: "p1", FromSequence: 3, ToSequence: 2},
		} {
			_, err := b.app.FanOutWebhookDeliveries(ctx, args)
			require.Error(t, err)
		}
	})
}

// Fan-out jobs of one project that start together may run as one (how many
// coalesce depends on timing); either way every delivery is created once,
// with one first attempt, and every job returns only once its events'
// deliveries are committed.
func TestCoalesceWebhookFanout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupWebhooks(t, webhookOpts{})
	dest := b.createDestination(t, "/a").Destination.ID
	b.subscribe(t, dest.String(), "device.*")
	require.Zero(t, b.fanOut(t))
	b.deliveryJobs(t)

	const events = 5
	for range events {
		b.record(t, "device.firmware.updated")
	}
	fanouts := jobsAfter[jobargs.WebhookFanoutArgs](t, b.pool, b.lastFanout)
	require.Len(t, fanouts, events, "one outbox job per recording transaction")

	created := make(chan int, events)
	errs := make(chan error, events)
	for _, j := range fanouts {
		go func() {
			n, err := b.app.CoalesceWebhookFanout(ctx, j.Args)
			created <- n
			errs <- err
		}()
	}
	total := 0
	for range events {
		require.NoError(t, <-errs)
		total += <-created
	}
	require.Equal(t, events, total, "each delivery is created once")
	require.Len(t, b.deliveries(t, app.WebhookDeliveriesInput{}), events)
	jobs := b.deliveryJobs(t)
	deliveries := 0
	for _, j := range jobs {
		deliveries += j.Args.Len()
	}
	require.Equal(t, events, deliveries, "one first attempt per delivery, however the jobs were coalesced")

	// Run again (a retry, a rescue): nothing more.
	n, err := b.app.CoalesceWebhookFanout(ctx, fanouts[0].Args)
	require.NoError(t, err)
	require.Zero(t, n)
	_, err = b.app.CoalesceWebhookFanout(ctx, jobargs.WebhookFanoutArgs{TenantID: "t1", ProjectID: "p1", FromSequence: 3, ToSequence: 2})
	require.Error(t, err)
}
