package app_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
)

// TestOrderedDeliveryThroughDestinationLifecycle: the deliveries of a
// SEQUENCE subscription whose destination is disabled wait (PAUSED, or
// PENDING behind a PAUSED head) and nothing is sent; enabling it sends them
// all, in order of sequence, with the destination's custom headers.
func TestOrderedDeliveryThroughDestinationLifecycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupOrdered(t, nil)
	destID := b.sub.DestinationID.String()
	_, err := b.app.UpdateWebhookDestination(ctx, b.admin, app.UpdateWebhookDestinationInput{
		DestinationID: destID, Headers: &[]domain.WebhookHeader{{Name: "X-Ordered", Value: "yes"}}})
	require.NoError(t, err)
	for _, a := range []string{"device.e1", "device.e2"} {
		b.record(t, a)
	}
	b.fanOut(t)
	_, err = b.app.DisableWebhookDestination(ctx, b.admin, app.DisableWebhookDestinationInput{DestinationID: destID})
	require.NoError(t, err)
	require.Equal(t, domain.WebhookDeliveryPaused, b.byAction(t, "device.e1").State)

	// Recorded while disabled: its ordered job finds the destination
	// disabled and holds it too.
	b.record(t, "device.e3")
	b.fanOut(t)
	b.deliverOrdered(t)
	require.Empty(t, b.sent(), "a disabled destination gets no request")
	require.NotEqual(t, domain.WebhookDeliveryDelivered, b.byAction(t, "device.e3").State)

	_, err = b.app.EnableWebhookDestination(ctx, b.admin, destID)
	require.NoError(t, err)
	b.deliverOrdered(t)
	require.Equal(t, []string{"device.e1", "device.e2", "device.e3"}, b.sent(), "resumed in order of sequence")
	for _, req := range b.receiver.requests() {
		require.Equal(t, "yes", req.Header.Get("X-Ordered"))
	}
}
