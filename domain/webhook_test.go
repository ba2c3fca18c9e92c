package domain

import (
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

func TestParseRetrySchedule(t *testing.T) {
	s, err := ParseRetrySchedule("")
	require.NoError(t, err)
	require.Equal(t, DefaultRetrySchedule, s)
	require.Equal(t, 9, s.MaxAttempts())

	s, err = ParseRetrySchedule("200ms, 400ms,800ms")
	require.NoError(t, err)
	require.Equal(t, RetrySchedule{200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond}, s)
	require.Equal(t, 4, s.MaxAttempts(), "N delays allow N+1 attempts")

	for _, bad := range []string{"soon", "0s", "-1s", "200ms,,1s", "8d", "192h", strings.Repeat("1s,", 20) + "1s"} {
		_, err := ParseRetrySchedule(bad)
		require.Error(t, err, bad)
	}
}

func TestRetryScheduleDelayJitterAndRetryAfter(t *testing.T) {
	s := RetrySchedule{10 * time.Second, time.Minute}
	for range 200 {
		d := s.Delay(1, 0)
		require.GreaterOrEqual(t, d, 8*time.Second)
		require.LessOrEqual(t, d, 12*time.Second)
		d = s.Delay(5, 0)
		require.GreaterOrEqual(t, d, 48*time.Second, "past the end the last delay repeats")
		require.LessOrEqual(t, d, 72*time.Second)
	}
	require.Equal(t, time.Hour, s.Delay(1, time.Hour), "Retry-After outweighs a shorter delay")
	require.Equal(t, MaxRetryDelay, s.Delay(1, 30*24*time.Hour), "Retry-After is bounded")
	require.Less(t, s.Delay(2, time.Second), 73*time.Second, "a shorter Retry-After does not shorten the schedule")
	require.GreaterOrEqual(t, s.Delay(2, time.Second), 48*time.Second)
}

func TestWebhookSubscriptionMatches(t *testing.T) {
	sub := WebhookSubscription{State: WebhookSubscriptionActive, AfterSequence: 10,
		EventTypes: []string{"device.*", "user.login"}}
	require.True(t, sub.Matches("device.firmware.updated", 11))
	require.True(t, sub.Matches("user.login", 11))
	require.False(t, sub.Matches("user.logout", 11))
	require.False(t, sub.Matches("devices.x", 11), "a prefix matches whole segments")
	require.False(t, sub.Matches("device.x", 10), "events up to the subscription's own creation are not sent")
	require.True(t, sub.Disable(time.Now(), 20))
	require.True(t, sub.Matches("device.x", 19), "events before the disable are still delivered")
	require.False(t, sub.Matches("device.x", 20), "disabled")
	require.False(t, sub.Matches("device.x", 21), "disabled")
	require.False(t, sub.Disable(time.Now(), 30), "disabling twice changes nothing")
	require.EqualValues(t, 20, sub.DisabledSequence)
}

func TestParseWebhookEventTypes(t *testing.T) {
	got, err := ParseWebhookEventTypes("eventTypes", []string{"device.*", "user.login", "device.*"})
	require.NoError(t, err)
	require.Equal(t, []string{"device.*", "user.login"}, got)
	_, err = ParseWebhookEventTypes("eventTypes", nil)
	require.Error(t, err)
	_, err = ParseWebhookEventTypes("eventTypes", []string{"Bad Type"})
	require.ErrorContains(t, err, "eventTypes[0]")
	many := make([]string, MaxWebhookEventTypes+1)
	for i := range many {
		many[i] = "a.b"
	}
	_, err = ParseWebhookEventTypes("eventTypes", many)
	require.Error(t, err)
}

func TestWebhookDeliveryStateMachine(t *testing.T) {
	now := time.Now()
	d := WebhookDelivery{ID: uuid.New(), State: WebhookDeliveryPending, MaxAttempts: 2}
	require.Error(t, d.Succeed(now), "only a delivering delivery succeeds")
	require.ErrorIs(t, d.Redrive(now, 2), ErrWebhookDeliveryNotDeadLettered)

	n, err := d.StartAttempt(now)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	_, err = d.StartAttempt(now)
	require.Error(t, err, "one attempt at a time")
	retry, err := d.Fail(now, now.Add(time.Second), "HTTP 500")
	require.NoError(t, err)
	require.True(t, retry)
	require.Equal(t, WebhookDeliveryRetrying, d.State)

	_, err = d.StartAttempt(now)
	require.NoError(t, err)
	retry, err = d.Fail(now, now.Add(time.Second), "HTTP 500")
	require.NoError(t, err)
	require.False(t, retry, "the last attempt dead-letters")
	require.Equal(t, WebhookDeliveryDeadLettered, d.State)
	require.NotNil(t, d.DeadLetteredAt)

	require.NoError(t, d.Redrive(now, 3))
	require.Equal(t, WebhookDeliveryPending, d.State)
	require.Equal(t, 5, d.MaxAttempts, "a fresh budget on top of the attempts made")
	n, err = d.StartAttempt(now)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	require.NoError(t, d.Succeed(now))
	require.Equal(t, WebhookDeliveryDelivered, d.State)
	require.Empty(t, d.LastError)
	_, err = d.StartAttempt(now)
	require.Error(t, err, "delivered is final")
}
