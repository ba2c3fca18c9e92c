package app_test

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/jobargs"
)

// orderedBundle is a webhook world with one SEQUENCE subscription to
// device.*; the receiver fails the actions in failing.
type orderedBundle struct {
	*webhookBundle
	sub         domain.WebhookSubscription
	lastOrdered int64
	ran         map[int64]bool

	mu      sync.Mutex
	failing map[string]bool
}

func setupOrdered(t *testing.T, schedule domain.RetrySchedule) *orderedBundle {
	t.Helper()
	return setupOrderedOn(t, webhookOpts{schedule: schedule})
}

// setupOrderedOn is setupOrdered with the webhook bundle's options o.
func setupOrderedOn(t *testing.T, o webhookOpts) *orderedBundle {
	t.Helper()
	b := &orderedBundle{webhookBundle: setupWebhooks(t, o), failing: map[string]bool{}}
	b.receiver.setRespond(func(n int, w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		fail := b.failing[b.action(b.receiver.requests()[n-1])]
		b.mu.Unlock()
		status(map[bool]int{true: 500, false: 200}[fail])(n, w, r)
	})
	sub, err := b.app.CreateWebhookSubscription(context.Background(), b.admin, app.CreateWebhookSubscriptionInput{
		ProjectID: "p1", DestinationID: b.createDestination(t, "/ordered").Destination.ID.String(),
		EventTypes: []string{"device.*"}, Ordering: domain.WebhookOrderingSequence})
	require.NoError(t, err)
	require.Equal(t, domain.WebhookOrderingSequence, sub.Ordering)
	b.sub = sub
	return b
}

func (b *orderedBundle) fail(action string, fail bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failing[action] = fail
}

// action is the event action a request carried.
func (b *orderedBundle) action(req receivedRequest) string {
	var body struct{ Type string }
	_ = json.Unmarshal(req.Body, &body)
	return body.Type
}

// sent lists the actions of the requests the receiver got, in order.
func (b *orderedBundle) sent() []string {
	var out []string
	for _, req := range b.receiver.requests() {
		out = append(out, b.action(req))
	}
	return out
}

// orderedJobs returns the ordered jobs committed since the last call.
func (b *orderedBundle) orderedJobs(t *testing.T) []riverJob[jobargs.WebhookOrderedDeliveryArgs] {
	t.Helper()
	jobs := jobsAfter[jobargs.WebhookOrderedDeliveryArgs](t, b.pool, b.lastOrdered)
	if len(jobs) > 0 {
		b.lastOrdered = jobs[len(jobs)-1].ID
	}
	return jobs
}

// deliverOrdered runs the ordered jobs committed and not run yet that are
// due by the clock, as River's worker would.
func (b *orderedBundle) deliverOrdered(t *testing.T) {
	t.Helper()
	if b.ran == nil {
		b.ran = map[int64]bool{}
	}
	for _, j := range jobsAfter[jobargs.WebhookOrderedDeliveryArgs](t, b.pool, 0) {
		// Jobs due at once carry River's (the wall clock's) time.
		if b.ran[j.ID] || j.ScheduledAt.After(b.clock.Now()) && j.ScheduledAt.After(time.Now()) {
			continue
		}
		b.ran[j.ID] = true
		require.NoError(t, b.app.DeliverOrderedWebhooks(context.Background(), j.Args))
	}
}

func (b *orderedBundle) byAction(t *testing.T, action string) domain.WebhookDelivery {
	t.Helper()
	for _, d := range b.deliveries(t, app.WebhookDeliveriesInput{SubscriptionID: b.sub.ID.String()}) {
		if d.EventType == action && d.ReplayOf == nil {
			return d
		}
	}
	t.Fatalf("no delivery of %s", action)
	return domain.WebhookDelivery{}
}

func TestOrderedWebhookDelivery(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("OneAfterTheOtherARetryHoldsADeadLetterPauses", func(t *testing.T) {
		t.Parallel()
		b := setupOrdered(t, domain.RetrySchedule{time.Hour})
		b.fail("device.e3", true)
		b.fail("device.e5", true)
		for _, a := range []string{"device.e1", "device.e2", "device.e3", "device.e4", "device.e5", "device.e6"} {
			b.record(t, a)
		}
		require.Equal(t, 6, b.fanOut(t))
		require.Empty(t, b.deliveryJobs(t), "no delivery job of its own for an ordered delivery")
		require.Len(t, b.orderedJobs(t), 1, "one ordered job for the subscription")

		b.deliverOrdered(t)
		require.Equal(t, []string{"device.e1", "device.e2", "device.e3"}, b.sent(), "stops at the failure")
		d3, d4 := b.byAction(t, "device.e3"), b.byAction(t, "device.e4")
		require.Equal(t, domain.WebhookDeliveryRetrying, d3.State)
		require.Equal(t, domain.WebhookDeliveryPending, d4.State)
		require.Zero(t, d4.AttemptCount, "the withdrawn ones used no attempt")
		b.deliverOrdered(t)
		require.Len(t, b.sent(), 3, "nothing is sent before the retry is due")

		b.fail("device.e3", false)
		b.clock.Set(*d3.NextAttemptAt)
		b.deliverOrdered(t)
		require.Equal(t, []string{"device.e1", "device.e2", "device.e3", "device.e3", "device.e4", "device.e5"}, b.sent())
		d5 := b.byAction(t, "device.e5")
		b.clock.Set(*d5.NextAttemptAt)
		b.deliverOrdered(t)
		d5 = b.byAction(t, "device.e5")
		require.Equal(t, domain.WebhookDeliveryDeadLettered, d5.State)
		sub, err := b.app.WebhookSubscription(ctx, b.admin, b.sub.ID.String())
		require.NoError(t, err)
		require.Equal(t, &d5.ID, sub.PausedByDeliveryID, "the dead letter pauses the subscription")
		b.clock.Add(time.Hour)
		b.deliverOrdered(t)
		require.Len(t, b.sent(), 7, "device.6 waits behind the dead letter")
		require.Equal(t, domain.WebhookDeliveryPending, b.byAction(t, "device.e6").State)

		_, err = b.app.SkipWebhookDelivery(ctx, b.admin, d5.ID.String(), true)
		require.NoError(t, err)
		b.deliverOrdered(t)
		require.Equal(t, []string{"device.e1", "device.e2", "device.e3", "device.e3", "device.e4", "device.e5", "device.e5", "device.e6"}, b.sent())
		sub, err = b.app.WebhookSubscription(ctx, b.admin, b.sub.ID.String())
		require.NoError(t, err)
		require.Nil(t, sub.PausedByDeliveryID)

		// A replay joins the order: its deliveries go before later events'.
		out, err := b.app.ReplayWebhookEvents(ctx, b.admin, app.ReplayWebhookEventsInput{SubscriptionID: b.sub.ID.String(),
			FromSequence: b.byAction(t, "device.e1").EventSequence, ToSequence: b.byAction(t, "device.e2").EventSequence, Confirm: true})
		require.NoError(t, err)
		require.Equal(t, 2, out.Count)
		b.record(t, "device.e7")
		b.fanOut(t)
		b.deliverOrdered(t)
		require.Equal(t, []string{"device.e1", "device.e2", "device.e7"}, b.sent()[8:])
	})

	t.Run("FanOutsOutOfOrderLeaveNoGap", func(t *testing.T) {
		t.Parallel()
		b := setupOrdered(t, nil)
		for _, a := range []string{"device.e1", "device.e2", "device.e3"} {
			b.record(t, a)
		}
		fanouts := jobsAfter[jobargs.WebhookFanoutArgs](t, b.pool, 0)
		require.Len(t, fanouts, 3)
		// The last event's fan-out runs first: it fans out the two
		// before it too, in order; theirs then find nothing to do.
		created, err := b.app.FanOutWebhookDeliveries(ctx, fanouts[2].Args)
		require.NoError(t, err)
		require.Equal(t, 3, created)
		for _, j := range fanouts[:2] {
			created, err := b.app.FanOutWebhookDeliveries(ctx, j.Args)
			require.NoError(t, err)
			require.Zero(t, created)
		}
		b.deliverOrdered(t)
		require.Equal(t, []string{"device.e1", "device.e2", "device.e3"}, b.sent())
	})

	t.Run("OneSenderAtATime", func(t *testing.T) {
		t.Parallel()
		b := setupOrdered(t, nil)
		release := b.receiver.hold(t)
		b.record(t, "device.e1")
		b.fanOut(t)
		jobs := b.orderedJobs(t)
		require.Len(t, jobs, 1)
		done := make(chan error, 1)
		go func() { done <- b.app.DeliverOrderedWebhooks(ctx, jobs[0].Args) }()
		<-b.receiver.arrived
		other := b.otherApp(func(*app.Config) {})
		require.ErrorIs(t, other.DeliverOrderedWebhooks(ctx, jobs[0].Args), app.ErrSubscriptionBusy,
			"another process waits while one sends")
		release()
		require.NoError(t, <-done)
		require.NoError(t, other.DeliverOrderedWebhooks(ctx, jobs[0].Args), "and may send once it is done")
		require.Equal(t, []string{"device.e1"}, b.sent())
		require.Equal(t, domain.WebhookDeliveryDelivered, b.byAction(t, "device.e1").State)
	})

	t.Run("UnknownInvalid", func(t *testing.T) {
		t.Parallel()
		b := setupWebhooks(t, webhookOpts{})
		_, err := b.app.CreateWebhookSubscription(ctx, b.admin, app.CreateWebhookSubscriptionInput{
			ProjectID: "p1", DestinationID: b.createDestination(t, "/x").Destination.ID.String(),
			EventTypes: []string{"device.*"}, Ordering: "RANDOM"})
		requireCode(t, err, app.CodeBadUserInput)
		require.Equal(t, "ordering", app.ErrorOf(err).Field)
	})
}
