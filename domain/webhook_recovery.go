package domain

import (
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// WebhookOrdering is how a subscription's deliveries relate to each other.
type WebhookOrdering string

// The orderings.
const (
	// WebhookOrderingUnordered sends each delivery on its own: the default.
	WebhookOrderingUnordered WebhookOrdering = "UNORDERED"
	// WebhookOrderingSequence sends a subscription's deliveries one after
	// the other, in the order of the project sequence: the next only once
	// the previous one is delivered (or skipped).
	WebhookOrderingSequence WebhookOrdering = "SEQUENCE"
)

// Valid reports whether o is a defined ordering.
func (o WebhookOrdering) Valid() bool {
	return o == WebhookOrderingUnordered || o == WebhookOrderingSequence
}

// Finished reports whether the delivery has reached a state it never leaves
// by itself: delivered, skipped, or cancelled (a deleted destination's). An
// ordered subscription's next delivery may be sent once all earlier ones
// are finished.
func (d WebhookDelivery) Finished() bool {
	switch d.State {
	case WebhookDeliveryDelivered, WebhookDeliverySkipped, WebhookDeliveryCancelled:
		return true
	}
	return false
}

// ErrWebhookDeliveryNotSkippable is returned by Skip for a delivery that is
// not DEAD_LETTERED.
var ErrWebhookDeliveryNotSkippable = errors.New("only a dead-lettered delivery can be skipped")

// Skip moves a DEAD_LETTERED delivery to SKIPPED, for good: an ordered
// subscription held by it goes on with its next delivery.
func (d *WebhookDelivery) Skip(now time.Time) error {
	if d.State != WebhookDeliveryDeadLettered {
		return ErrWebhookDeliveryNotSkippable
	}
	d.State = WebhookDeliverySkipped
	d.NextAttemptAt = nil
	d.UpdatedAt = now
	return nil
}

// Recover makes a delivery whose last attempt failed due at now: a
// DEAD_LETTERED one is redriven with a fresh budget of attempts, a RETRYING
// one keeps its budget and tries now rather than at its scheduled time.
func (d *WebhookDelivery) Recover(now time.Time, attempts int) error {
	switch d.State {
	case WebhookDeliveryDeadLettered:
		return d.Redrive(now, attempts)
	case WebhookDeliveryRetrying:
		d.NextAttemptAt = &now
		d.UpdatedAt = now
		return nil
	}
	return fmt.Errorf("webhook delivery %s: cannot recover in state %s", d.ID, d.State)
}

// WebhookOrderedFanout is what the fan-out keeps of a SEQUENCE
// subscription: the project sequence through which its deliveries exist,
// and until when an ordered job is queued or running for it.
type WebhookOrderedFanout struct {
	SubscriptionID   uuid.UUID
	FannedOutThrough uint64
	AwakeUntil       *time.Time
}
