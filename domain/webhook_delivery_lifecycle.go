package domain

import (
	"fmt"
	"time"
)

// The delivery states of a destination's lifecycle.
const (
	// WebhookDeliveryPaused: waiting, without using an attempt, while its
	// destination is disabled; back to PENDING when it is enabled.
	WebhookDeliveryPaused WebhookDeliveryState = "PAUSED"
	// WebhookDeliveryCancelled: its destination was deleted before it was
	// delivered. Final; LastError says why.
	WebhookDeliveryCancelled WebhookDeliveryState = "CANCELLED"
)

// Pause moves a PENDING or RETRYING delivery to PAUSED, keeping its
// attempts and budget.
func (d *WebhookDelivery) Pause(now time.Time) error {
	if d.State != WebhookDeliveryPending && d.State != WebhookDeliveryRetrying {
		return fmt.Errorf("webhook delivery %s: cannot pause in state %s", d.ID, d.State)
	}
	d.State = WebhookDeliveryPaused
	d.NextAttemptAt = nil
	d.UpdatedAt = now
	return nil
}

// Cancel ends a delivery that was not sent to the end (PENDING, RETRYING
// or PAUSED) as CANCELLED, with reason as its LastError.
func (d *WebhookDelivery) Cancel(now time.Time, reason string) error {
	switch d.State {
	case WebhookDeliveryPending, WebhookDeliveryRetrying, WebhookDeliveryPaused:
	default:
		return fmt.Errorf("webhook delivery %s: cannot cancel in state %s", d.ID, d.State)
	}
	d.State = WebhookDeliveryCancelled
	d.NextAttemptAt = nil
	d.LastError = reason
	d.UpdatedAt = now
	return nil
}
