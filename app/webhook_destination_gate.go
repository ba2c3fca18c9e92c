package app

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/aetheriot/aether-audit/domain"
)

// WebhookGateStore is what the gate of a delivery job writes, each in one
// statement of its own, shared by every process through the destination's
// row.
type WebhookGateStore interface {
	// ClaimWebhookDestinationProbe claims, until until, the one probe of a
	// destination whose breaker is half open at now; false when another
	// job holds it or the breaker is not half open.
	ClaimWebhookDestinationProbe(ctx context.Context, tenantID string, destinationID uuid.UUID, now, until time.Time) (bool, error)
	// TakeWebhookDestinationTokens takes up to want requests from the
	// destination's rate limit at now: taken, and the fraction of a token
	// left.
	TakeWebhookDestinationTokens(ctx context.Context, tenantID string, destinationID uuid.UUID, want int, now time.Time) (taken int, remaining float64, err error)
}

// DestinationWaitError tells a delivery job that its destination takes no
// request before Until (its breaker is open, another job's probe is out, or
// its rate limit is spent): the job is tried again then, and no delivery
// was charged an attempt.
type DestinationWaitError struct {
	Until  time.Time
	Reason string
}

// Error implements error.
func (e *DestinationWaitError) Error() string {
	return fmt.Sprintf("webhook destination takes no request before %s: %s", e.Until.Format(time.RFC3339Nano), e.Reason)
}

// probeRecheck is how soon a job that lost the probe claim looks again.
const probeRecheck = time.Second

// probeHold is how long a probe's claim lasts: longer than its request
// and the recording of its outcome take; the claim of a job that died
// lapses then.
const probeHold = time.Minute

// gateDestination decides, at now, which of a job's due deliveries may be
// sent to dest (see domain.WebhookDestination.Gate), and sets the
// destination's in-flight limit in this process. A deleted destination's
// due deliveries are cancelled and a disabled one's paused, in a
// transaction that holds its row, so that no enable or delete can slip in
// between; with the breaker open, or no request left of the rate limit, it
// returns a DestinationWaitError. A half-open breaker lets one delivery
// through as its probe, for the job that claims it; a destination tripped
// in this process (destination_trip.go) waits as an open one does. later
// are the jobs of
// the due deliveries not sent now, to enqueue with the outcomes; none of
// them was charged an attempt.
func (a *App) gateDestination(ctx context.Context, dest domain.WebhookDestination, slots *destinationSlots, due []domain.WebhookDelivery, now time.Time) (send []domain.WebhookDelivery, later []domain.OutboxJob, err error) {
	slots.setLimit(a.webhooks.inFlightLimit(dest))
	gate, until := dest.Gate(now)
	switch gate {
	case domain.WebhookGateCancel, domain.WebhookGatePause:
		return nil, nil, a.holdDue(ctx, dest.TenantID, dest.ID, due)
	case domain.WebhookGateWait:
		return nil, nil, &DestinationWaitError{Until: until, Reason: "its circuit breaker is open"}
	case domain.WebhookGateProbe:
		won, err := a.store.ClaimWebhookDestinationProbe(ctx, dest.TenantID, dest.ID, now, now.Add(probeHold))
		if err != nil {
			return nil, nil, err
		}
		if !won {
			return nil, nil, &DestinationWaitError{Until: now.Add(probeRecheck), Reason: "another job's probe is out"}
		}
		due, later = due[:1], laterJobs(due[1:])
	default:
		// Closed in the row as read: this process's own trip may know better.
		if until, tripped := slots.tripped(now); tripped {
			return nil, nil, &DestinationWaitError{Until: until, Reason: "its last requests from this process failed"}
		}
	}
	if dest.RateLimitPerSecond > 0 {
		taken, remaining, err := a.store.TakeWebhookDestinationTokens(ctx, dest.TenantID, dest.ID, len(due), now)
		if err != nil {
			return nil, nil, err
		}
		next := now.Add(time.Duration((1 - remaining) / float64(dest.RateLimitPerSecond) * float64(time.Second)))
		if taken == 0 {
			return nil, nil, &DestinationWaitError{Until: next, Reason: "its rate limit is spent"}
		}
		due, later = due[:taken], append(later, laterJobs(due[taken:])...)
	}
	return due, later, nil
}

// laterJobs are the jobs of deliveries a job did not send: available at
// once, so that the gate decides again.
func laterJobs(ds []domain.WebhookDelivery) []domain.OutboxJob {
	if len(ds) == 0 {
		return nil
	}
	ptrs := make([]*domain.WebhookDelivery, len(ds))
	for i := range ds {
		ptrs[i] = &ds[i]
	}
	return webhookFirstAttemptJobs(ptrs)
}

// holdDue pauses (destination disabled) or cancels (destination deleted)
// due deliveries, deciding on the destination as read, locked, in the
// transaction: an enable or delete committed since the job read it is
// seen. Each delivery is saved only if still as the job read it.
func (a *App) holdDue(ctx context.Context, tenantID string, destID uuid.UUID, due []domain.WebhookDelivery) error {
	return a.retryTx(ctx, func(ctx context.Context, tx Tx) error {
		dest, err := tx.GetWebhookDestination(ctx, tenantID, destID, true)
		if err != nil {
			return err
		}
		now := a.storedNow()
		gate, _ := dest.Gate(now)
		if gate != domain.WebhookGatePause && gate != domain.WebhookGateCancel {
			// Enabled meanwhile: the enable resumed nothing of these (they
			// were not PAUSED), so they go on with a job of their own.
			return tx.EnqueueJobs(ctx, laterJobs(due)...)
		}
		changes := make([]domain.WebhookDeliveryChange, 0, len(due))
		for _, d := range due {
			change := domain.WebhookDeliveryChange{PrevState: d.State, PrevAttempts: d.AttemptCount}
			if gate == domain.WebhookGateCancel {
				err = d.Cancel(now, deletedDestinationReason)
			} else {
				err = d.Pause(now)
			}
			if err != nil {
				return err
			}
			change.Delivery = d
			changes = append(changes, change)
		}
		_, err = tx.SaveWebhookDeliveriesIf(ctx, changes)
		return err
	})
}

// inFlightLimit is the destination's limit of concurrent requests in this
// process: its own maxInFlight, else the service's.
func (w *webhookRuntime) inFlightLimit(dest domain.WebhookDestination) int {
	if dest.MaxInFlight > 0 {
		return dest.MaxInFlight
	}
	return w.MaxInFlightPerDestination
}
