package app

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/aetheriot/aether-audit/domain"
)

// tallyAttempts counts, of the recorded attempt ends (saved: the
// deliveries whose change was saved), what tells a destination's health:
// successes, failures that are the receiver's (not interrupted attempts,
// nor ones that could not be signed), and a 410 Gone.
func tallyAttempts(changes []domain.WebhookDeliveryChange, saved []uuid.UUID) domain.WebhookAttemptTally {
	ok := make(map[uuid.UUID]bool, len(saved))
	for _, id := range saved {
		ok[id] = true
	}
	var t domain.WebhookAttemptTally
	for _, c := range changes {
		if !ok[c.Delivery.ID] {
			continue
		}
		switch a := c.Attempt; {
		case a.Outcome == domain.WebhookAttemptSucceeded:
			t.Succeeded++
		case a.Outcome == domain.WebhookAttemptFailed && a.ErrorClass != string(errorClassSecret):
			t.Failed++
			if a.StatusCode != nil && *a.StatusCode == http.StatusGone {
				t.Gone = true
			}
		}
	}
	return t
}

// afterAttempts records, in tx, what the recorded attempt ends (changes,
// of which saved were saved) tell beyond their deliveries: the
// destination's health and the dead letters' operational events. The
// destination's row is locked (read for update, or updated at once when
// its health is steady and the attempts all succeeded) for the former, as
// the transaction's last step: its commands lock it first and then its
// deliveries, but they touch only deliveries that wait for an attempt,
// never the DELIVERING ones this transaction moves, so the order cannot
// deadlock, and the row is held only for the end of the transaction.
func (a *App) afterAttempts(ctx context.Context, tx Tx, dest domain.WebhookDestination, changes []domain.WebhookDeliveryChange, saved []uuid.UUID, now time.Time) error {
	// The destination before the project's head (the events below), as
	// its commands take them.
	if t := tallyAttempts(changes, saved); t != (domain.WebhookAttemptTally{}) {
		// Successes alone to a steady destination (the common case) are
		// counted in one statement, which holds the row only until the
		// commit: every job of a busy destination ends here, and each job
		// waiting for the row holds a pool connection meanwhile.
		if t.Failed == 0 && !t.Gone {
			counted, err := tx.RecordWebhookDestinationSuccesses(ctx, dest.TenantID, dest.ID, t.Succeeded, now)
			if err != nil {
				return err
			}
			if counted {
				return a.recordDeadLetters(ctx, tx, changes, saved, now)
			}
		}
		d, err := tx.GetWebhookDestination(ctx, dest.TenantID, dest.ID, true)
		switch {
		case errors.Is(err, domain.ErrNotFound):
		case err != nil:
			return err
		case d.DeletedAt == nil:
			if err := a.recordDestinationHealth(ctx, tx, &d, t, now); err != nil {
				return err
			}
		}
	}
	return a.recordDeadLetters(ctx, tx, changes, saved, now)
}

// recordDeadLetters records webhook.delivery.dead_lettered for the
// deliveries among changes that were saved dead-lettered, in tx.
func (a *App) recordDeadLetters(ctx context.Context, tx Tx, changes []domain.WebhookDeliveryChange, saved []uuid.UUID, now time.Time) error {
	var ok map[uuid.UUID]bool
	for _, c := range changes {
		if c.Delivery.State != domain.WebhookDeliveryDeadLettered {
			continue
		}
		if ok == nil {
			ok = make(map[uuid.UUID]bool, len(saved))
			for _, id := range saved {
				ok[id] = true
			}
		}
		if ok[c.Delivery.ID] {
			if err := a.recordDeadLetter(ctx, tx, c.Delivery, now); err != nil {
				return err
			}
		}
	}
	return nil
}

// recordDeadLetter records webhook.delivery.dead_lettered for a delivery
// that was just dead-lettered, in tx. A delivery of an operational event
// records none: so that two failing destinations subscribed to each
// other's operational events cannot feed each other forever.
func (a *App) recordDeadLetter(ctx context.Context, tx Tx, d domain.WebhookDelivery, now time.Time) error {
	if domain.IsOperationalAction(d.EventType) {
		return nil
	}
	details, _ := json.Marshal(map[string]any{"deliveryId": d.ID.String(), "destinationId": d.DestinationID.String(),
		"subscriptionId": d.SubscriptionID.String(), "eventId": d.EventID.String(),
		"eventSequence": d.EventSequence, "eventType": d.EventType, "attempts": d.AttemptCount, "lastError": d.LastError})
	return a.recordOperationalEvent(ctx, tx, d.TenantID, d.ProjectID, "webhook.delivery.dead_lettered",
		domain.Resource{Type: "webhook_delivery", ID: d.ID.String()}, domain.RiskMedium, string(details), now)
}

// recordDestinationHealth records a tally of attempts to a destination in
// its health, in transaction tx (the one that records the attempts, which
// holds d locked; see afterAttempts): the breaker opens, closes or backs off, and the
// destination is auto-disabled when it answered 410 Gone or failed for too
// long (its waiting deliveries then pause). Each change is reported by an
// operational event in the same transaction.
func (a *App) recordDestinationHealth(ctx context.Context, tx Tx, d *domain.WebhookDestination, t domain.WebhookAttemptTally, now time.Time) error {
	opensBefore := d.Health.CircuitOpens
	change := d.RecordAttempts(t, now, a.webhooks.Breaker)
	if err := tx.SaveWebhookDestinationState(ctx, *d); err != nil {
		return err
	}
	resource := domain.Resource{Type: "webhook_destination", ID: d.ID.String()}
	detail := func(m map[string]any) string {
		m["destinationId"] = d.ID.String()
		b, _ := json.Marshal(m)
		return string(b)
	}
	if change.CircuitOpened {
		if err := a.recordOperationalEvent(ctx, tx, d.TenantID, d.ProjectID, "webhook.destination.circuit_opened", resource, domain.RiskMedium,
			detail(map[string]any{"consecutiveFailures": d.Health.ConsecutiveFailures, "openUntil": d.Health.CircuitOpenUntil}), now); err != nil {
			return err
		}
	}
	if change.CircuitClosed {
		if err := a.recordOperationalEvent(ctx, tx, d.TenantID, d.ProjectID, "webhook.destination.circuit_closed", resource, domain.RiskLow,
			detail(map[string]any{"failedProbes": max(opensBefore-1, 0)}), now); err != nil {
			return err
		}
	}
	if change.AutoDisabled {
		paused, err := tx.PauseWebhookDeliveriesOfDestination(ctx, d.TenantID, d.ProjectID, d.ID, now)
		if err != nil {
			return err
		}
		if err := a.recordOperationalEvent(ctx, tx, d.TenantID, d.ProjectID, "webhook.destination.auto_disabled", resource, domain.RiskHigh,
			detail(map[string]any{"reason": d.DisabledReason, "paused": paused}), now); err != nil {
			return err
		}
	}
	return nil
}

// destinationHeader is the destination's custom headers as sent; nil
// without any.
func destinationHeader(d domain.WebhookDestination) http.Header {
	if len(d.Headers) == 0 {
		return nil
	}
	h := make(http.Header, len(d.Headers))
	for _, x := range d.Headers {
		h.Set(x.Name, x.Value)
	}
	return h
}

// WebhookHealthSummary is a destination's health as the API shows it.
type WebhookHealthSummary struct {
	ConsecutiveFailures int
	LastSuccessAt       *time.Time
	LastFailureAt       *time.Time
	FailingSince        *time.Time
	// SuccessRateLastHour is nil without attempts in the last hour.
	SuccessRateLastHour *float64
	AttemptsLastHour    int
	Circuit             domain.WebhookCircuitState
	// CircuitOpenUntil is set while the breaker is OPEN.
	CircuitOpenUntil *time.Time
}

// WebhookDestinationHealth summarizes a destination's health now.
func (a *App) WebhookDestinationHealth(d domain.WebhookDestination) WebhookHealthSummary {
	now := a.now()
	h := d.Health
	out := WebhookHealthSummary{ConsecutiveFailures: h.ConsecutiveFailures, LastSuccessAt: h.LastSuccessAt,
		LastFailureAt: h.LastFailureAt, FailingSince: h.FailingSince, Circuit: h.Circuit(now)}
	if rate, attempts, ok := h.SuccessRate(now); ok {
		out.SuccessRateLastHour, out.AttemptsLastHour = &rate, int(attempts+0.5)
	}
	if out.Circuit == domain.WebhookCircuitOpen {
		out.CircuitOpenUntil = h.CircuitOpenUntil
	}
	return out
}
