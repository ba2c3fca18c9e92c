package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/webhook"
)

// finishTimeout bounds the transaction that records an attempt's outcome,
// which runs even when the worker's context is cancelled.
const finishTimeout = 30 * time.Second

// unknownOutcome is the error text of an attempt whose outcome was lost.
const unknownOutcome = "outcome unknown: the attempt was interrupted after its request may have reached the receiver"

// WebhookPayload is the body of every webhook: the audit event in its
// GraphQL shape, with its action as type.
type WebhookPayload struct {
	Type      string             `json:"type"`
	Timestamp time.Time          `json:"timestamp"`
	Data      *domain.AuditEvent `json:"data"`
}

// preparedAttempt is an attempt committed as DELIVERING, ready to send.
type preparedAttempt struct {
	delivery domain.WebhookDelivery
	number   int
	started  time.Time
	url      string
	keys     [][]byte
	body     []byte
}

// DeliverWebhook runs the attempt a delivery job asks for. In one
// transaction it locks the delivery and, when it is due, commits a new
// attempt as DELIVERING; only then does it send the signed request; then a
// second transaction records the outcome and moves the delivery to
// DELIVERED, RETRYING (enqueuing the next attempt's job at its scheduled
// time, in that transaction) or DEAD_LETTERED.
//
// A job whose attempt is already DELIVERING is a rerun after a crash,
// rescue or interrupted shutdown: that attempt is recorded as UNKNOWN (the
// receiver may or may not have it) and the delivery is resent at once under
// the same webhook-id. A job that is stale (its attempt already finished) does
// nothing. ErrDestinationBusy means the destination has its maximum of
// requests in flight in this process; the job should be tried again shortly.
func (a *App) DeliverWebhook(ctx context.Context, args WebhookDeliveryArgs) error {
	if a.webhooks.Sender == nil || a.webhooks.Box == nil {
		return errors.New("webhooks: delivery needs a sender and a master key")
	}
	release, ok := a.webhooks.acquire(ctx, args.DestinationID)
	if !ok {
		return ErrDestinationBusy
	}
	defer release()

	var prep *preparedAttempt
	err := a.retryTx(ctx, func(ctx context.Context) error {
		var err error
		prep, err = a.startWebhookAttempt(ctx, args)
		return err
	})
	if err != nil || prep == nil {
		return err
	}
	res := a.webhooks.Sender.Send(ctx, webhook.Request{
		URL: prep.url, ID: prep.delivery.IdempotencyKey, Timestamp: a.now(), Body: prep.body, Keys: prep.keys,
	})
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	return a.retryTx(fctx, func(fctx context.Context) error {
		return a.finishWebhookAttempt(fctx, args, prep, res)
	})
}

// startWebhookAttempt commits the attempt of args as DELIVERING and returns
// what to send, or nil when there is nothing to send.
func (a *App) startWebhookAttempt(ctx context.Context, args WebhookDeliveryArgs) (*preparedAttempt, error) {
	d, err := a.store.GetWebhookDelivery(ctx, args.TenantID, args.DeliveryID, true)
	if errors.Is(err, domain.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	now := a.now().UTC()
	switch {
	case d.State == domain.WebhookDeliveryDelivering && d.AttemptCount == args.Attempt:
		return nil, a.recordLostAttempt(ctx, &d, now)
	case (d.State == domain.WebhookDeliveryPending || d.State == domain.WebhookDeliveryRetrying) && d.AttemptCount == args.Attempt-1:
	default:
		return nil, nil // stale: this attempt already ran to an end
	}

	dest, err := a.store.GetWebhookDestination(ctx, d.TenantID, d.DestinationID, false)
	if err != nil {
		return nil, fmt.Errorf("reading destination of delivery %s: %w", d.ID, err)
	}
	sealed, err := a.store.WebhookDestinationSecrets(ctx, dest.ID, now)
	if err != nil {
		return nil, err
	}
	keys := make([][]byte, 0, len(sealed))
	for _, s := range sealed {
		plain, err := a.webhooks.Box.Open(s.Sealed, secretAAD(dest.ID, s.ID))
		if err != nil {
			return nil, fmt.Errorf("opening secret %s of destination %s: %w", s.ID, dest.ID, err)
		}
		key, err := webhook.ParseSecret(string(plain))
		if err != nil {
			return nil, fmt.Errorf("secret %s of destination %s: %w", s.ID, dest.ID, err)
		}
		keys = append(keys, key)
	}
	event, err := a.store.GetAuditEvent(ctx, d.TenantID, d.ProjectID, d.EventID)
	if err != nil {
		return nil, fmt.Errorf("reading event of delivery %s: %w", d.ID, err)
	}
	body, err := json.Marshal(WebhookPayload{Type: event.Action, Timestamp: event.RecordedAt, Data: &event})
	if err != nil {
		return nil, fmt.Errorf("encoding webhook payload: %w", err)
	}
	n, err := d.StartAttempt(now)
	if err != nil {
		return nil, err
	}
	if err := a.store.SaveWebhookAttempt(ctx, d.ID, domain.WebhookDeliveryAttempt{
		Number: n, Outcome: domain.WebhookAttemptDelivering, StartedAt: now,
	}); err != nil {
		return nil, err
	}
	if err := a.store.UpdateWebhookDelivery(ctx, d); err != nil {
		return nil, err
	}
	return &preparedAttempt{delivery: d, number: n, started: now, url: dest.URL, keys: keys, body: body}, nil
}

// recordLostAttempt closes a DELIVERING attempt whose worker is gone as
// UNKNOWN and schedules the resend at once (or dead-letters the delivery if
// it was the last attempt).
func (a *App) recordLostAttempt(ctx context.Context, d *domain.WebhookDelivery, now time.Time) error {
	last, err := a.store.LastWebhookAttempt(ctx, d.ID)
	if err != nil {
		return err
	}
	if last.Outcome == domain.WebhookAttemptDelivering {
		last.Outcome = domain.WebhookAttemptUnknown
		last.FinishedAt = &now
		last.Latency = now.Sub(last.StartedAt)
		last.ErrorClass = "unknown"
		last.Error = unknownOutcome
		if err := a.store.SaveWebhookAttempt(ctx, d.ID, last); err != nil {
			return err
		}
	}
	return a.failDelivery(ctx, d, now, now, unknownOutcome)
}

// failDelivery moves a DELIVERING delivery to RETRYING (enqueuing its next
// attempt for next) or DEAD_LETTERED, and persists it.
func (a *App) failDelivery(ctx context.Context, d *domain.WebhookDelivery, now, next time.Time, reason string) error {
	retry, err := d.Fail(now, next, reason)
	if err != nil {
		return err
	}
	if err := a.store.UpdateWebhookDelivery(ctx, *d); err != nil {
		return err
	}
	if !retry {
		return nil
	}
	at := next
	if !next.After(now) {
		at = time.Time{}
	}
	return a.store.EnqueueJobs(ctx, webhookDeliveryJob(d, at))
}

// finishWebhookAttempt records the outcome of a sent attempt.
func (a *App) finishWebhookAttempt(ctx context.Context, args WebhookDeliveryArgs, prep *preparedAttempt, res webhook.Result) error {
	d, err := a.store.GetWebhookDelivery(ctx, args.TenantID, args.DeliveryID, true)
	if err != nil {
		return err
	}
	if d.State != domain.WebhookDeliveryDelivering || d.AttemptCount != prep.number {
		// Another run took the attempt over (recorded it as unknown); the
		// outcome we saw is still evidence.
		return nil
	}
	now := a.now().UTC()
	attempt := domain.WebhookDeliveryAttempt{
		Number: prep.number, StartedAt: prep.started, FinishedAt: &now, Latency: res.Latency,
		ErrorClass: string(res.ErrorClass), Error: res.Error, ResponseBody: cleanBody(res.Body),
	}
	if res.StatusCode != 0 {
		code := res.StatusCode
		attempt.StatusCode = &code
	}
	switch {
	case res.Delivered:
		attempt.Outcome = domain.WebhookAttemptSucceeded
		if err := a.store.SaveWebhookAttempt(ctx, d.ID, attempt); err != nil {
			return err
		}
		if err := d.Succeed(now); err != nil {
			return err
		}
		return a.store.UpdateWebhookDelivery(ctx, d)
	case res.ErrorClass == webhook.ErrorClassCanceled && res.MayHaveReached:
		// Interrupted (shutdown): unknown outcome, resend at once.
		attempt.Outcome = domain.WebhookAttemptUnknown
		attempt.Error = unknownOutcome
		if err := a.store.SaveWebhookAttempt(ctx, d.ID, attempt); err != nil {
			return err
		}
		return a.failDelivery(ctx, &d, now, now, unknownOutcome)
	default:
		attempt.Outcome = domain.WebhookAttemptFailed
		if err := a.store.SaveWebhookAttempt(ctx, d.ID, attempt); err != nil {
			return err
		}
		next := now.Add(a.webhooks.RetrySchedule.Delay(prep.number, res.RetryAfter))
		return a.failDelivery(ctx, &d, now, next, attemptReason(res))
	}
}

// attemptReason is the delivery's lastError for a failed attempt.
func attemptReason(res webhook.Result) string {
	if res.Error != "" {
		return res.Error
	}
	if res.StatusCode != 0 {
		return fmt.Sprintf("receiver answered HTTP %d", res.StatusCode)
	}
	return string(res.ErrorClass)
}

// cleanBody makes a receiver's response storable as text: valid UTF-8
// without NUL bytes.
func cleanBody(b []byte) string {
	return strings.ReplaceAll(strings.ToValidUTF8(string(b), "\uFFFD"), "\x00", "\uFFFD")
}
