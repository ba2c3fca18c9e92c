package jobs_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/jobs"
	"github.com/aetheriot/aether-audit/store"
)

// TestWebhookBreakerIsSharedByProcesses: two processes (each an App with
// its River client) deliver to one failing receiver. Once the breaker
// opened, the receiver gets at most one request per backoff period from
// both together, no waiting delivery is charged an attempt, and when the
// receiver recovers a probe closes the breaker and everything is
// delivered.
func TestWebhookBreakerIsSharedByProcesses(t *testing.T) {
	const backoff = 400 * time.Millisecond
	var (
		mu      sync.Mutex
		healthy bool
		times   []time.Time
	)
	rc := newReceiver(t, func(int) int {
		mu.Lock()
		defer mu.Unlock()
		times = append(times, time.Now())
		if healthy {
			return http.StatusOK
		}
		return http.StatusInternalServerError
	})
	b := setupWebhooks(t, setupOpts{rootCAs: rc, schedule: "100ms,100ms,100ms,100ms,100ms,100ms,100ms,100ms,100ms,100ms,100ms,100ms,100ms,100ms,100ms,100ms,100ms,100ms,100ms,100ms",
		breaker: domain.WebhookBreakerPolicy{Failures: 3, Backoff: backoff, MaxBackoff: backoff}})
	// The second process.
	other := app.New(store.New(b.pool), app.Config{Webhooks: b.cfg})
	client, err := jobs.NewClient(b.pool, store.New(b.pool), jobs.ClientConfig{App: other, FetchCooldown: 10 * time.Millisecond})
	require.NoError(t, err)
	require.NoError(t, client.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = client.Stop(ctx)
	})

	dest, _ := b.subscribe(t, rc, "device.*")
	var events []domain.AuditEvent
	for range 6 {
		events = append(events, b.record(t, "device.rebooted"))
	}
	opened := awaitEvent(t, b, "webhook.destination.circuit_opened")
	require.Equal(t, domain.SubjectSystem, opened.Subject.Type)

	// Wait for two probes, then let the receiver recover. The first probe
	// can go out a backoff after the opening (requests under way when it
	// opened arrive within moments of it).
	firstProbe := opened.OccurredAt.Add(backoff - time.Millisecond)
	afterOpen := func() []time.Time {
		mu.Lock()
		defer mu.Unlock()
		var out []time.Time
		for _, at := range times {
			if !at.Before(firstProbe) {
				out = append(out, at)
			}
		}
		return out
	}
	require.Eventually(t, func() bool { return len(afterOpen()) >= 2 }, 30*time.Second, 10*time.Millisecond)
	mu.Lock()
	healthy = true
	mu.Unlock()
	for _, e := range events {
		b.awaitDelivery(t, e, domain.WebhookDeliveryDelivered)
	}
	awaitEvent(t, b, "webhook.destination.circuit_closed")

	// While open, the requests of both processes together were at least a
	// backoff apart (the last one closed the breaker; those after it flow).
	probes := afterOpen()
	closedAt := awaitEvent(t, b, "webhook.destination.circuit_closed").RecordedAt
	var open []time.Time
	for _, at := range probes {
		if !at.After(closedAt) {
			open = append(open, at)
		}
	}
	require.GreaterOrEqual(t, len(open), 2)
	for i := 1; i < len(open); i++ {
		require.GreaterOrEqual(t, open[i].Sub(open[i-1]), backoff-time.Millisecond, "probe %d came %s after the one before", i, open[i].Sub(open[i-1]))
	}
	// Every attempt is a request: waiting was never charged.
	total := 0
	for _, e := range events {
		page, err := b.app.WebhookDeliveries(context.Background(), b.admin, app.WebhookDeliveriesInput{ProjectID: "p1", EventID: e.ID.String()})
		require.NoError(t, err)
		total += page.Items[0].AttemptCount
	}
	require.Len(t, rc.requests(), total)
	got, err := b.app.WebhookDestination(context.Background(), b.admin, dest.Destination.ID.String())
	require.NoError(t, err)
	require.Zero(t, got.Health.ConsecutiveFailures)
	require.Nil(t, got.Health.CircuitOpenUntil)
}

// awaitEvent waits for the first event of p1 with action and returns it.
func awaitEvent(t *testing.T, b *bundle, action string) domain.AuditEvent {
	t.Helper()
	var found domain.AuditEvent
	require.Eventually(t, func() bool {
		page, err := b.app.SearchAuditEvents(context.Background(), b.admin, app.SearchAuditEventsInput{ProjectID: "p1",
			Filter: app.AuditEventFilterInput{Action: action}, Order: domain.OldestFirst})
		require.NoError(t, err)
		if len(page.Edges) == 0 {
			return false
		}
		found = page.Edges[0].Event
		return true
	}, 30*time.Second, 10*time.Millisecond, "no %s event", action)
	return found
}
