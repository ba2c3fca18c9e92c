package app_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/jobargs"
)

// runJobs runs delivery jobs as River's worker would, and returns the
// waits the destination asked for (each a job River would snooze).
func (b *lifecycleBundle) runJobs(t *testing.T, jobs []riverJob[jobargs.WebhookDeliveryArgs]) (waits []*app.DestinationWaitError) {
	t.Helper()
	for _, j := range jobs {
		err := b.app.DeliverWebhooks(context.Background(), j.Args)
		var wait *app.DestinationWaitError
		if errors.As(err, &wait) {
			waits = append(waits, wait)
			continue
		}
		require.NoError(t, err)
	}
	return waits
}

// health reads the destination's health summary.
func (b *lifecycleBundle) health(t *testing.T) (domain.WebhookDestination, app.WebhookHealthSummary) {
	t.Helper()
	d, err := b.app.WebhookDestination(context.Background(), b.admin, b.dest.ID.String())
	require.NoError(t, err)
	return d, b.app.WebhookDestinationHealth(d)
}

func TestWebhookCircuitBreaker(t *testing.T) {
	t.Parallel()
	policy := domain.WebhookBreakerPolicy{Failures: 3, Backoff: time.Minute, MaxBackoff: 3 * time.Minute, AutoDisableAfter: 24 * time.Hour}

	t.Run("OpensProbesAndClosesWithoutChargingWaitingDeliveries", func(t *testing.T) {
		t.Parallel()
		b := setupLifecycle(t, webhookOpts{breaker: policy, schedule: domain.RetrySchedule{10 * time.Second, 10 * time.Second, 10 * time.Second}})
		b.receiver.setRespond(status(http.StatusInternalServerError))
		for range 3 {
			b.record(t, "device.rebooted")
		}
		b.fanOut(t)
		b.deliver(t)
		require.Len(t, b.receiver.requests(), 3)
		_, h := b.health(t)
		require.Equal(t, 3, h.ConsecutiveFailures)
		require.Equal(t, domain.WebhookCircuitOpen, h.Circuit)
		openedAt := b.clock.Now()
		require.Equal(t, openedAt.Add(time.Minute), *h.CircuitOpenUntil)
		require.Equal(t, openedAt, *h.FailingSince)
		require.InDelta(t, 0, *h.SuccessRateLastHour, 0)
		opened := auditEvents(t, b.app, b.admin, "p1", "webhook.destination.circuit_opened")
		require.Len(t, opened, 1)
		require.Equal(t, domain.Subject{Type: domain.SubjectSystem, ID: "system:aether"}, opened[0].Subject)
		require.Equal(t, domain.Resource{Type: "webhook_destination", ID: b.dest.ID.String()}, opened[0].Resource)

		// While open: the retries come due and a new event arrives, but
		// nothing is sent and no attempt is charged.
		retries := b.deliveryJobs(t)
		require.Len(t, retries, 3)
		b.clock.Add(15 * time.Second)
		fresh := b.record(t, "device.rebooted")
		b.fanOut(t)
		waiting := append(retries, b.deliveryJobs(t)...)
		waits := b.runJobs(t, waiting)
		require.Len(t, waits, 4, "every job waits")
		for _, w := range waits {
			require.Equal(t, openedAt.Add(time.Minute), w.Until)
		}
		require.Len(t, b.receiver.requests(), 3, "no request while open")
		for _, d := range b.deliveries(t, app.WebhookDeliveriesInput{}) {
			want := 1
			if d.EventID == fresh.ID {
				want = 0
			}
			require.Equal(t, want, d.AttemptCount, "waiting is not an attempt")
		}

		// Half open: the first job to claim it sends one probe; it fails,
		// and the breaker waits twice as long, without a new event.
		b.clock.Set(openedAt.Add(time.Minute))
		waits = b.runJobs(t, waiting)
		require.Len(t, b.receiver.requests(), 4, "one probe")
		require.Len(t, waits, 3, "the other jobs wait for the probe's outcome")
		_, h = b.health(t)
		require.Equal(t, domain.WebhookCircuitOpen, h.Circuit)
		require.Equal(t, b.clock.Now().Add(2*time.Minute), *h.CircuitOpenUntil)
		require.Len(t, auditEvents(t, b.app, b.admin, "p1", "webhook.destination.circuit_opened"), 1, "a failed probe is no new opening")
		waiting = append(waiting, b.deliveryJobs(t)...) // the probe's retry, the probe job's other deliveries

		// The next probe succeeds: the breaker closes and everything flows.
		b.receiver.setRespond(status(http.StatusOK))
		b.clock.Add(2 * time.Minute)
		b.runJobs(t, waiting)
		for {
			jobs := b.deliveryJobs(t)
			if len(jobs) == 0 {
				break
			}
			b.runJobs(t, jobs)
		}
		_, h = b.health(t)
		require.Equal(t, domain.WebhookCircuitClosed, h.Circuit)
		require.Zero(t, h.ConsecutiveFailures)
		require.Nil(t, h.FailingSince)
		require.Equal(t, b.clock.Now(), *h.LastSuccessAt)
		for _, d := range b.deliveries(t, app.WebhookDeliveriesInput{}) {
			require.Equal(t, domain.WebhookDeliveryDelivered, d.State)
		}
		closed := auditEvents(t, b.app, b.admin, "p1", "webhook.destination.circuit_closed")
		require.Len(t, closed, 1)
		require.Equal(t, domain.SubjectSystem, closed[0].Subject.Type)
		require.Len(t, b.receiver.requests(), 8, "3 failures, 1 failed probe, 4 deliveries")
	})

	t.Run("AutoDisablesAtOnceOn410", func(t *testing.T) {
		t.Parallel()
		b := setupLifecycle(t, webhookOpts{breaker: policy})
		b.receiver.setRespond(status(http.StatusGone))
		e, _ := b.send(t, "device.rebooted")
		d, _ := b.health(t)
		require.Equal(t, domain.WebhookDestinationAutoDisabled, d.State)
		require.Contains(t, d.DisabledReason, "410")
		events := auditEvents(t, b.app, b.admin, "p1", "webhook.destination.auto_disabled")
		require.Len(t, events, 1)
		require.Equal(t, domain.SubjectSystem, events[0].Subject.Type)
		del := b.deliveries(t, app.WebhookDeliveriesInput{EventID: e.ID.String()})[0]
		require.Equal(t, domain.WebhookDeliveryPaused, del.State, "its retry waits")
		require.Equal(t, 1, del.AttemptCount)

		b.receiver.setRespond(status(http.StatusOK))
		b.deliver(t)
		require.Len(t, b.receiver.requests(), 1, "nothing sent while auto-disabled")
		enabled, err := b.app.EnableWebhookDestination(context.Background(), b.admin, b.dest.ID.String())
		require.NoError(t, err)
		require.Equal(t, domain.WebhookDestinationEnabled, enabled.State)
		require.Zero(t, enabled.Health.ConsecutiveFailures)
		b.deliver(t)
		require.Equal(t, domain.WebhookDeliveryDelivered, b.delivery(t, del.ID.String()).State)
	})

	t.Run("AutoDisablesAfterFailingForTheWindow", func(t *testing.T) {
		t.Parallel()
		b := setupLifecycle(t, webhookOpts{breaker: domain.WebhookBreakerPolicy{Failures: 100, AutoDisableAfter: time.Hour},
			schedule: domain.RetrySchedule{40 * time.Minute, 40 * time.Minute}})
		b.receiver.setRespond(status(http.StatusServiceUnavailable))
		b.send(t, "device.rebooted")
		for range 2 {
			d, _ := b.health(t)
			require.Equal(t, domain.WebhookDestinationEnabled, d.State, "not failing for an hour yet")
			b.clock.Add(40 * time.Minute)
			b.deliver(t)
		}
		d, h := b.health(t)
		require.Equal(t, domain.WebhookDestinationAutoDisabled, d.State, "failing for 80 minutes")
		require.Contains(t, d.DisabledReason, "every attempt failed for 1h0m0s")
		require.Equal(t, 3, h.ConsecutiveFailures)
		require.Len(t, auditEvents(t, b.app, b.admin, "p1", "webhook.destination.auto_disabled"), 1)
	})

	t.Run("RateLimitSpreadsRequestsWithoutChargingAttempts", func(t *testing.T) {
		t.Parallel()
		b := setupLifecycle(t, webhookOpts{})
		two := 2
		_, err := b.app.UpdateWebhookDestination(context.Background(), b.admin, app.UpdateWebhookDestinationInput{
			DestinationID: b.dest.ID.String(), RateLimitPerSecond: &two})
		require.NoError(t, err)
		for range 5 {
			b.record(t, "device.rebooted")
		}
		b.fanOut(t)
		jobs := b.deliveryJobs(t) // one per event: they were recorded one at a time
		waits := b.runJobs(t, jobs)
		require.Len(t, b.receiver.requests(), 2, "a second's worth")
		require.Len(t, waits, 3, "the others wait for tokens")
		require.Equal(t, b.clock.Now().Add(500*time.Millisecond), waits[0].Until, "the next token")
		b.clock.Add(time.Second)
		require.Len(t, b.runJobs(t, jobs), 1)
		require.Len(t, b.receiver.requests(), 4)
		b.clock.Add(time.Second)
		require.Empty(t, b.runJobs(t, jobs))
		require.Len(t, b.receiver.requests(), 5)
		for _, d := range b.deliveries(t, app.WebhookDeliveriesInput{}) {
			require.Equal(t, domain.WebhookDeliveryDelivered, d.State)
			require.Equal(t, 1, d.AttemptCount)
		}
	})
}

// TestWebhookDestinationTripsInThisProcess: a job that read its
// destination's breaker closed stops sending once this process has seen
// the breaker's number of failures in a row, before its own outcomes open
// the shared breaker: the rest of its batch is withdrawn unsent, with no
// attempt used, and waits like the breaker's other deliveries. Without the
// trip, the job would send its whole batch to a receiver that is down.
func TestWebhookDestinationTripsInThisProcess(t *testing.T) {
	t.Parallel()
	policy := domain.WebhookBreakerPolicy{Failures: 3, Backoff: time.Minute, MaxBackoff: 3 * time.Minute, AutoDisableAfter: 24 * time.Hour}
	// One request at a time, so that the count is exact.
	b := setupLifecycle(t, webhookOpts{breaker: policy, perDestination: 1,
		schedule: domain.RetrySchedule{10 * time.Second, 10 * time.Second, 10 * time.Second}})
	b.receiver.setRespond(status(http.StatusInternalServerError))
	drafts := make([]domain.AuditEventDraft, 10)
	for i := range drafts {
		drafts[i] = draft("p1", "device.rebooted")
	}
	_, err := b.app.RecordAuditEvents(context.Background(), b.writer, app.RecordAuditEventsInput{Events: drafts})
	require.NoError(t, err)
	b.fanOut(t)
	jobs := b.deliveryJobs(t)
	require.Len(t, jobs, 1, "one job carries the ten deliveries")
	require.Empty(t, b.runJobs(t, jobs))
	require.Equal(t, 3, len(b.receiver.requests()), "the job stopped at the breaker's count")

	_, h := b.health(t)
	require.Equal(t, 3, h.ConsecutiveFailures)
	require.Equal(t, domain.WebhookCircuitOpen, h.Circuit)
	charged := 0
	for _, d := range b.deliveries(t, app.WebhookDeliveriesInput{}) {
		switch d.AttemptCount {
		case 1:
			charged++
		case 0:
			require.Equal(t, domain.WebhookDeliveryPending, d.State, "withdrawn unsent")
		default:
			t.Fatalf("delivery %s: %d attempts", d.ID, d.AttemptCount)
		}
	}
	require.Equal(t, 3, charged)

	// The withdrawn deliveries' job waits for the breaker; nothing is sent.
	waits := b.runJobs(t, b.deliveryJobs(t))
	require.NotEmpty(t, waits)
	require.Equal(t, 3, len(b.receiver.requests()))
}
