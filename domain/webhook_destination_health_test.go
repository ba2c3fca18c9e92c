package domain

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestWebhookDestinationHealth(t *testing.T) {
	t.Parallel()
	p := WebhookBreakerPolicy{Failures: 3, Backoff: time.Minute, MaxBackoff: 3 * time.Minute, AutoDisableAfter: time.Hour}
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	newDest := func() *WebhookDestination { return &WebhookDestination{State: WebhookDestinationEnabled} }

	t.Run("OpensBacksOffUpToTheMaximumAndCloses", func(t *testing.T) {
		t.Parallel()
		d := newDest()
		require.Equal(t, WebhookHealthChange{}, d.RecordAttempts(WebhookAttemptTally{Failed: 2}, t0, p))
		gate, _ := d.Gate(t0)
		require.Equal(t, WebhookGateSend, gate)
		c := d.RecordAttempts(WebhookAttemptTally{Failed: 1}, t0, p)
		require.Equal(t, WebhookHealthChange{CircuitOpened: true}, c)
		gate, until := d.Gate(t0.Add(time.Second))
		require.Equal(t, WebhookGateWait, gate)
		require.Equal(t, t0.Add(time.Minute), until)
		// Stragglers of the open breaker change nothing of it.
		require.Equal(t, WebhookHealthChange{}, d.RecordAttempts(WebhookAttemptTally{Failed: 5}, t0.Add(time.Second), p))
		require.Equal(t, t0.Add(time.Minute), *d.Health.CircuitOpenUntil)

		// Failed probes double the wait, up to the maximum.
		at := t0.Add(time.Minute)
		for _, wait := range []time.Duration{2 * time.Minute, 3 * time.Minute, 3 * time.Minute} {
			gate, _ = d.Gate(at)
			require.Equal(t, WebhookGateProbe, gate)
			require.Equal(t, WebhookHealthChange{}, d.RecordAttempts(WebhookAttemptTally{Failed: 1}, at, p), "no new opening")
			require.Equal(t, at.Add(wait), *d.Health.CircuitOpenUntil)
			at = at.Add(wait)
		}
		c = d.RecordAttempts(WebhookAttemptTally{Succeeded: 1}, at, p)
		require.Equal(t, WebhookHealthChange{CircuitClosed: true}, c)
		require.Zero(t, d.Health.ConsecutiveFailures)
		require.Nil(t, d.Health.FailingSince)
		require.Zero(t, d.Health.CircuitOpens)
		require.Equal(t, WebhookCircuitClosed, d.Health.Circuit(at))
	})

	t.Run("AutoDisables", func(t *testing.T) {
		t.Parallel()
		d := newDest()
		d.RecordAttempts(WebhookAttemptTally{Failed: 1}, t0, WebhookBreakerPolicy{Failures: 100, AutoDisableAfter: time.Hour})
		c := d.RecordAttempts(WebhookAttemptTally{Failed: 1}, t0.Add(time.Hour), WebhookBreakerPolicy{Failures: 100, AutoDisableAfter: time.Hour})
		require.True(t, c.AutoDisabled)
		require.Equal(t, WebhookDestinationAutoDisabled, d.State)
		gate, _ := d.Gate(t0.Add(time.Hour))
		require.Equal(t, WebhookGatePause, gate)

		gone := newDest()
		c = gone.RecordAttempts(WebhookAttemptTally{Failed: 1, Gone: true}, t0, p)
		require.True(t, c.AutoDisabled)
		require.Contains(t, gone.DisabledReason, "410 Gone")
		require.True(t, gone.Enable())
		require.Equal(t, WebhookDestinationEnabled, gone.State)
		require.Zero(t, gone.Health.ConsecutiveFailures)
		require.False(t, gone.Enable(), "already enabled")
	})

	t.Run("SuccessRateOverTheLastHour", func(t *testing.T) {
		t.Parallel()
		d := newDest()
		_, _, ok := d.Health.SuccessRate(t0)
		require.False(t, ok, "no attempts")
		d.RecordAttempts(WebhookAttemptTally{Succeeded: 3, Failed: 1}, t0.Add(30*time.Minute), p)
		rate, n, ok := d.Health.SuccessRate(t0.Add(40 * time.Minute))
		require.True(t, ok)
		require.InDelta(t, 0.75, rate, 1e-9)
		require.InDelta(t, 4, n, 1e-9)
		// Half of the previous hour still counts, at half its weight.
		d.RecordAttempts(WebhookAttemptTally{Failed: 2}, t0.Add(90*time.Minute), p)
		rate, n, _ = d.Health.SuccessRate(t0.Add(90 * time.Minute))
		require.InDelta(t, 1.5/4, rate, 1e-9)
		require.InDelta(t, 4, n, 1e-9)
		_, _, ok = d.Health.SuccessRate(t0.Add(4 * time.Hour))
		require.False(t, ok, "nothing in the last hour")
	})

	t.Run("SuccessesToASteadyDestinationChangeOnlyTheirCounts", func(t *testing.T) {
		t.Parallel()
		d := newDest()
		require.False(t, d.Health.Steady(t0), "no hour counts yet")
		d.RecordAttempts(WebhookAttemptTally{Succeeded: 1}, t0, p)
		require.True(t, d.Health.Steady(t0.Add(59*time.Minute)))
		require.False(t, d.Health.Steady(t0.Add(time.Hour)), "the hour ends")
		at := t0.Add(10 * time.Minute)
		before := *d
		require.Equal(t, WebhookHealthChange{}, d.RecordAttempts(WebhookAttemptTally{Succeeded: 4}, at, p))
		before.Health.HourSucceeded += 4
		before.Health.LastSuccessAt = &at
		require.Equal(t, before, *d, "the store counts them so without reading the row")

		d.RecordAttempts(WebhookAttemptTally{Failed: 1}, at, p)
		require.False(t, d.Health.Steady(at), "failing")
		d.RecordAttempts(WebhookAttemptTally{Succeeded: 1}, at, p)
		require.True(t, d.Health.Steady(at))
		for range 3 {
			d.RecordAttempts(WebhookAttemptTally{Failed: 1}, at, p)
		}
		require.Equal(t, WebhookCircuitOpen, d.Health.Circuit(at))
		d.RecordAttempts(WebhookAttemptTally{Succeeded: 1}, at.Add(time.Minute), p)
		require.True(t, d.Health.Steady(at.Add(time.Minute)), "closed again")
		d.Health.ProbeUntil = &at
		require.False(t, d.Health.Steady(at), "a probe is out")
	})

	t.Run("DeletedAndDisabledDestinationsHoldTheirDeliveries", func(t *testing.T) {
		t.Parallel()
		d := newDest()
		require.True(t, d.Disable(WebhookDestinationDisabled, "maintenance", t0))
		require.False(t, d.Disable(WebhookDestinationDisabled, "again", t0), "already disabled")
		gate, _ := d.Gate(t0)
		require.Equal(t, WebhookGatePause, gate)
		d.DeletedAt = &t0
		gate, _ = d.Gate(t0)
		require.Equal(t, WebhookGateCancel, gate)
	})
}

func TestParseWebhookHeaders(t *testing.T) {
	t.Parallel()
	ok := []WebhookHeader{{Name: "X-Route", Value: "eu 1\tb"}, {Name: "X-Api-Key", Value: ""}}
	got, err := ParseWebhookHeaders("headers", ok)
	require.NoError(t, err)
	require.Equal(t, ok, got)
	for _, name := range []string{"webhook-id", "Webhook-Signature", "content-length", "CONTENT-TYPE", "host", "Authorization",
		"proxy-authorization", "x-forwarded-for", "cookie", "user-agent", "transfer-encoding", "connection", "te", "upgrade"} {
		_, err := ParseWebhookHeaders("headers", []WebhookHeader{{Name: name, Value: "v"}})
		require.Error(t, err, name)
		require.True(t, strings.HasPrefix(err.(*ValidationError).Field, "headers[0].name"), name)
	}
	for _, h := range []WebhookHeader{{Name: "", Value: "v"}, {Name: "a b", Value: "v"}, {Name: "x:y", Value: "v"},
		{Name: strings.Repeat("x", 65), Value: "v"}, {Name: "X-A", Value: "a\nb"}, {Name: "X-A", Value: "é"}} {
		_, err := ParseWebhookHeaders("headers", []WebhookHeader{h})
		require.Error(t, err, "%+v", h)
	}
	_, err = ParseWebhookHeaders("headers", []WebhookHeader{{Name: "X-A", Value: "1"}, {Name: "x-a", Value: "2"}})
	require.ErrorContains(t, err, "twice")
}

func TestWebhookDeliveryPauseAndCancel(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	d := WebhookDelivery{State: WebhookDeliveryRetrying, AttemptCount: 2, MaxAttempts: 9, NextAttemptAt: &now}
	require.NoError(t, d.Pause(now))
	require.Equal(t, WebhookDeliveryPaused, d.State)
	require.Nil(t, d.NextAttemptAt)
	require.Equal(t, 2, d.AttemptCount, "attempts kept")
	require.Error(t, d.Pause(now), "already paused")
	require.NoError(t, d.Cancel(now, "gone"))
	require.Equal(t, WebhookDeliveryCancelled, d.State)
	require.Equal(t, "gone", d.LastError)
	require.Error(t, d.Cancel(now, "again"), "final")
	delivered := WebhookDelivery{State: WebhookDeliveryDelivered}
	require.Error(t, delivered.Cancel(now, "x"))
	require.Error(t, delivered.Pause(now))
	require.True(t, WebhookDeliveryPaused.Valid())
	require.True(t, WebhookDeliveryCancelled.Valid())
}
