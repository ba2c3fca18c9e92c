package app

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/webhook"
)

// finishTimeout bounds the transaction that records an attempt's outcome,
// which runs even when the worker's context is cancelled.
const finishTimeout = 30 * time.Second

// unknownOutcome is the error text of an attempt whose outcome was lost.
const unknownOutcome = "outcome unknown: the attempt was interrupted after its request may have reached the receiver"

// WebhookPayload is the body of every webhook: the audit event in its
// GraphQL shape, with its action as type. Deliveries encode it with
// eventjson.AppendWebhookPayload, which writes the same bytes
// as json.Marshal of this type.
type WebhookPayload struct {
	Type      string             `json:"type"`
	Timestamp time.Time          `json:"timestamp"`
	Data      *domain.AuditEvent `json:"data"`
}

// preparedAttempt is an attempt committed as DELIVERING, ready to send.
type preparedAttempt struct {
	// before is the delivery as read, before the attempt started; delivery
	// as committed with the attempt under way.
	before   domain.WebhookDelivery
	delivery domain.WebhookDelivery
	started  time.Time
	// recordedAt is when the event was recorded, for the delivery lag.
	recordedAt time.Time
	url        string
	keys       [][]byte
	body       []byte
	// header has the destination's custom headers.
	header http.Header
	// unsendable, when set, is the outcome of an attempt that could not be
	// sent at all (no signing key); it is recorded without a request.
	unsendable *webhook.Result
}

// beginAttempt computes the start of d's next attempt: the change that
// commits it as DELIVERING, and what to send (in batch, the job's).
func (a *App) beginAttempt(batch *attemptBatch, d domain.WebhookDelivery, event *domain.AuditEvent, url string, keys [][]byte, keyErr error, now time.Time) (domain.WebhookDeliveryChange, *preparedAttempt, error) {
	body, err := batch.payload(event)
	if err != nil {
		return domain.WebhookDeliveryChange{}, nil, err
	}
	change := domain.WebhookDeliveryChange{PrevState: d.State, PrevAttempts: d.AttemptCount}
	before := d
	n, err := d.StartAttempt(now)
	if err != nil {
		return change, nil, err
	}
	change.Delivery = d
	change.Attempt = domain.WebhookDeliveryAttempt{Number: n, Outcome: domain.WebhookAttemptDelivering, StartedAt: now}
	prep := batch.prepared(preparedAttempt{before: before, delivery: d, started: now, recordedAt: event.RecordedAt, url: url, keys: keys, body: body})
	if keyErr != nil {
		prep.unsendable = &webhook.Result{ErrorClass: errorClassSecret,
			Error: "the destination's signing secret cannot be opened (was the master key changed?); rotate the destination's secret"}
	}
	return change, prep, nil
}

// errorClassSecret marks an attempt that could not be signed.
const errorClassSecret webhook.ErrorClass = "secret_unavailable"

// openSigningKeys opens the destination's valid secrets. Without one that
// opens, nothing can be signed.
func (a *App) openSigningKeys(dest domain.WebhookDestination, sealed []domain.SealedWebhookSecret) ([][]byte, error) {
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
	if len(keys) == 0 {
		return nil, fmt.Errorf("destination %s has no valid signing secret", dest.ID)
	}
	return keys, nil
}

// recordLostAttempt closes a DELIVERING attempt whose worker is gone as
// UNKNOWN and schedules the resend at once (or dead-letters the delivery if
// it was the last attempt), in transaction tx. recorded tells
// whether it did (the attempt may have been resolved meanwhile).
func (a *App) recordLostAttempt(ctx context.Context, tx Tx, tenantID string, deliveryID uuid.UUID, attempt int) (recorded bool, err error) {
	d, err := tx.GetWebhookDelivery(ctx, tenantID, deliveryID, true)
	if err != nil {
		return false, err
	}
	if d.State != domain.WebhookDeliveryDelivering || d.AttemptCount != attempt {
		return false, nil // resolved meanwhile
	}
	now := a.storedNow()
	lost, _ := d.AttemptUnderWay()
	lost.Outcome = domain.WebhookAttemptUnknown
	lost.FinishedAt = &now
	lost.Latency = now.Sub(lost.StartedAt)
	lost.ErrorClass = "unknown"
	lost.Error = unknownOutcome
	// An upsert: a row may exist, written at the attempt's start by an
	// earlier version.
	if err := tx.SaveWebhookAttempt(ctx, d.ID, lost); err != nil {
		return false, err
	}
	retry, err := d.Fail(now, now, unknownOutcome)
	if err != nil {
		return false, err
	}
	if err := tx.UpdateWebhookDelivery(ctx, d); err != nil {
		return false, err
	}
	if !retry {
		return true, a.recordDeadLetter(ctx, tx, d, now)
	}
	return true, tx.EnqueueJobs(ctx, webhookDeliveryJob(&d, time.Time{}))
}

// finishWebhookAttempts records the outcomes of sent attempts of one
// tenant, in one transaction. Its commit does not wait for the disk: if
// PostgreSQL loses it in a crash, the attempts are still DELIVERING, and the
// job's rerun records them as unknown and resends under the same
// webhook-ids. The intents, in contrast, were committed durably before the
// requests.
//
// An attempt whose request was never handed to the sender (unsent: the
// job's context ended while it waited for a request slot, or its
// destination tripped in this process, destination_trip.go) is withdrawn: its
// delivery goes back to the state it was in, without an attempt of its
// budget used, and a new job is enqueued for it. So a job that runs out of
// time behind a slow destination's other jobs costs no delivery an attempt.
func (a *App) finishWebhookAttempts(ctx context.Context, dest domain.WebhookDestination, preps []*preparedAttempt, results []webhook.Result, unsent []bool, later []domain.OutboxJob, drop []int64) error {
	now := a.storedNow()
	changes := make([]domain.WebhookDeliveryChange, 0, len(preps))
	var (
		withdrawals []domain.WebhookDeliveryChange
		backs       []domain.WebhookDelivery
	)
	sentPreps := make([]*preparedAttempt, 0, len(preps))
	next := make(map[uuid.UUID]domain.OutboxJob, len(preps))
	finished := now // one end shared by the attempts' records
	for i, prep := range preps {
		if unsent[i] {
			back := prep.before
			back.UpdatedAt = now
			withdrawals = append(withdrawals, domain.WebhookDeliveryChange{
				PrevState: prep.delivery.State, PrevAttempts: prep.delivery.AttemptCount, Delivery: back})
			backs = append(backs, back)
			continue
		}
		change, job, err := a.attemptOutcome(prep, &results[i], &finished)
		if err != nil {
			return err
		}
		changes = append(changes, change)
		sentPreps = append(sentPreps, prep)
		if job != nil {
			next[change.Delivery.ID] = *job
		}
	}
	var recorded []uuid.UUID
	err := a.retryTx(ctx, func(ctx context.Context, tx Tx) error {
		if err := tx.CommitWithoutFlush(ctx); err != nil {
			return err
		}
		saved, err := tx.SaveWebhookDeliveriesIf(ctx, changes)
		if err != nil {
			return err
		}
		recorded = saved
		jobs := later
		for _, id := range saved {
			if job, ok := next[id]; ok {
				jobs = append(jobs, job)
			}
		}
		withdrawn, err := tx.SaveWebhookDeliveriesIf(ctx, withdrawals)
		if err != nil {
			return err
		}
		jobs = append(jobs, webhookFirstAttemptJobs(savedDeliveries(backs, withdrawn))...)
		if err := tx.EnqueueJobs(ctx, jobs...); err != nil {
			return err
		}
		tx.DropScheduledJobs(drop)
		// Last, so that the destination's row is locked only briefly.
		return a.afterAttempts(ctx, tx, dest, changes, saved, now)
	})
	if err != nil {
		return err
	}
	if len(withdrawals) > 0 {
		a.logger.WarnContext(ctx, "webhook deliveries not sent (their job ended, or their destination tripped in this process); enqueued again without using an attempt",
			"destination", withdrawals[0].Delivery.DestinationID, "deliveries", len(withdrawals))
	}
	a.observeAttempts(changes, sentPreps, recorded, now)
	return nil
}

// observeAttempts reports the recorded attempts' outcomes, and the delivery
// lag of the succeeded ones, to the observer.
func (a *App) observeAttempts(changes []domain.WebhookDeliveryChange, preps []*preparedAttempt, recorded []uuid.UUID, now time.Time) {
	saved := make(map[uuid.UUID]bool, len(recorded))
	for _, id := range recorded {
		saved[id] = true
	}
	for i, change := range changes {
		if !saved[change.Delivery.ID] {
			continue
		}
		var lag time.Duration
		if change.Attempt.Outcome == domain.WebhookAttemptSucceeded {
			lag = max(now.Sub(preps[i].recordedAt), time.Nanosecond)
		}
		a.observer.WebhookAttempt(outcomeLabel(change.Attempt.Outcome), lag)
	}
}

// outcomeLabel is the observer's name of an attempt's outcome: its lower
// case, built once for the outcomes that end attempts.
func outcomeLabel(o domain.WebhookAttemptOutcome) string {
	switch o {
	case domain.WebhookAttemptSucceeded:
		return "succeeded"
	case domain.WebhookAttemptFailed:
		return "failed"
	case domain.WebhookAttemptUnknown:
		return "unknown"
	}
	return strings.ToLower(string(o))
}

// attemptOutcome computes the end, at *end, of a sent attempt whose result
// is *result: the delivery's change and, when a retry is due, its job. The
// attempt's end and status code point to *end and result's.
func (a *App) attemptOutcome(prep *preparedAttempt, result *webhook.Result, end *time.Time) (domain.WebhookDeliveryChange, *domain.OutboxJob, error) {
	d, res, now := prep.delivery, *result, *end
	if unresolvable(res.ErrorClass) {
		// The tenant sees one answer for a name that does not resolve and
		// for one that resolves to a private address, or the attempt would
		// tell which internal names exist; the operator log has which.
		a.logger.Warn("webhook destination unreachable", "tenant_id", d.TenantID, "destination_id", d.DestinationID,
			"delivery_id", d.ID, "error_class", res.ErrorClass, "error", res.Error)
		res.ErrorClass, res.Error = webhook.ErrorClassDNS, unresolvableMessage
	}
	attempt := domain.WebhookDeliveryAttempt{
		Number: d.AttemptCount, StartedAt: prep.started, FinishedAt: end, Latency: res.Latency,
		ErrorClass: string(res.ErrorClass), Error: res.Error, ResponseBody: cleanBody(res.Body),
	}
	if res.StatusCode != 0 {
		attempt.StatusCode = &result.StatusCode
	}
	var (
		retry bool
		next  time.Time
		err   error
	)
	switch {
	case res.Delivered:
		attempt.Outcome = domain.WebhookAttemptSucceeded
		err = d.Succeed(now)
	case res.ErrorClass == webhook.ErrorClassCanceled && res.MayHaveReached:
		// Interrupted (shutdown): unknown outcome, resend at once.
		attempt.Outcome = domain.WebhookAttemptUnknown
		attempt.ErrorClass = "unknown"
		attempt.Error = unknownOutcome
		next = now
		retry, err = d.Fail(now, next, unknownOutcome)
	default:
		attempt.Outcome = domain.WebhookAttemptFailed
		// The schedule restarts with each budget of attempts (a redrive
		// grants a fresh one).
		sinceBudget := d.AttemptCount - (d.MaxAttempts - a.webhooks.RetrySchedule.MaxAttempts())
		next = now.Add(a.webhooks.RetrySchedule.Delay(sinceBudget, res.RetryAfter))
		retry, err = d.Fail(now, next, attemptReason(res))
	}
	change := domain.WebhookDeliveryChange{PrevState: domain.WebhookDeliveryDelivering, PrevAttempts: attempt.Number,
		Delivery: d, Attempt: attempt}
	if err != nil || !retry {
		return change, nil, err
	}
	at := next
	if !next.After(now) {
		at = time.Time{}
	}
	job := webhookDeliveryJob(&d, at)
	return change, &job, nil
}

// unresolvableMessage is what the tenant reads of an attempt whose host
// name did not resolve, or resolved only to addresses the sender refuses.
const unresolvableMessage = "host name does not resolve to a public address"

// unresolvable reports whether class is a failure to find a public address
// for the destination's host: not found in DNS, or found at a non-public
// address (blocked against SSRF).
func unresolvable(class webhook.ErrorClass) bool {
	return class == webhook.ErrorClassDNS || class == webhook.ErrorClassSSRF
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
