package domain

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestWebhookDeliverySkip(t *testing.T) {
	now := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	for _, s := range []WebhookDeliveryState{WebhookDeliveryPending, WebhookDeliveryDelivering, WebhookDeliveryDelivered,
		WebhookDeliveryRetrying, WebhookDeliverySkipped} {
		d := WebhookDelivery{State: s}
		require.ErrorIs(t, d.Skip(now), ErrWebhookDeliveryNotSkippable, s)
		require.Equal(t, s, d.State)
	}
	d := WebhookDelivery{State: WebhookDeliveryDeadLettered, AttemptCount: 3, MaxAttempts: 3}
	require.NoError(t, d.Skip(now))
	require.Equal(t, WebhookDeliverySkipped, d.State)
	require.True(t, d.Finished())
	require.Equal(t, now, d.UpdatedAt)
	require.ErrorIs(t, d.Redrive(now, 3), ErrWebhookDeliveryNotDeadLettered, "a skipped delivery stays skipped")
}

func TestWebhookDeliveryRecover(t *testing.T) {
	now := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	later := now.Add(time.Hour)
	retrying := WebhookDelivery{State: WebhookDeliveryRetrying, AttemptCount: 1, MaxAttempts: 3, NextAttemptAt: &later}
	require.NoError(t, retrying.Recover(now, 3))
	require.Equal(t, WebhookDeliveryRetrying, retrying.State)
	require.Equal(t, 3, retrying.MaxAttempts, "a retry keeps its budget")
	require.Equal(t, now, *retrying.NextAttemptAt)

	dead := WebhookDelivery{State: WebhookDeliveryDeadLettered, AttemptCount: 3, MaxAttempts: 3, DeadLetteredAt: &now}
	require.NoError(t, dead.Recover(now, 3))
	require.Equal(t, WebhookDeliveryPending, dead.State)
	require.Equal(t, 6, dead.MaxAttempts, "a dead letter gets a fresh budget")

	for _, s := range []WebhookDeliveryState{WebhookDeliveryPending, WebhookDeliveryDelivering, WebhookDeliveryDelivered, WebhookDeliverySkipped} {
		d := WebhookDelivery{State: s}
		require.Error(t, d.Recover(now, 3), s)
	}
	require.False(t, WebhookDelivery{State: WebhookDeliveryDeadLettered}.Finished(), "a dead letter holds an ordered subscription")
	require.True(t, WebhookOrderingSequence.Valid())
	require.False(t, WebhookOrdering("RANDOM").Valid())
}
