package app

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/webhook"
)

// maxDeliveryBatch bounds the deliveries of one job. Each job costs
// PostgreSQL a fetch, a read, two transactions and a completion whatever its
// size, so that larger jobs cost less per delivery (50 to 100 took about a
// sixth off the CPU time per delivery in the webhook-delivery benchmark).
const maxDeliveryBatch = 100

// DeliveryJobTimeout bounds a delivery job of n deliveries whose requests
// may each take up to perRequest: the job sends them as many at a time as
// the destination's in-flight limit allows, then records their outcomes.
// Requests the job could not start in time (other jobs of the destination
// held its request slots) are withdrawn unsent, with no attempt used, and
// enqueued again (see finishWebhookAttempts).
func (a *App) DeliveryJobTimeout(n int, perRequest time.Duration) time.Duration {
	rounds := (max(n, 1) + a.webhooks.MaxInFlightPerDestination - 1) / a.webhooks.MaxInFlightPerDestination
	return time.Duration(rounds)*perRequest + finishTimeout
}

// WebhookDeliveryArgs asks for one attempt of each of up to
// maxDeliveryBatch deliveries to one destination: the first attempts of a
// fan-out's new deliveries (batched, so that their intents and outcomes are
// written with one statement each), or one delivery's retry, redrive or
// resend. Attempts[i] is the attempt number the job is for of its i-th
// delivery (1 when absent): a delivery found in another state is left
// alone.
//
// Deliveries holds the deliveries' ids and their events' ids as one string
// of hex digits (64 per delivery: its id, then its event's id), not as JSON
// arrays: River indexes job arguments with GIN, one index entry per array
// element, written again on every state change of the job (inserted,
// running, completed), which cost PostgreSQL more than the job's own
// statements. Jobs enqueued before that change carry the ids in
// LegacyDeliveryIDs and LegacyEventIDs instead, and still run.
type WebhookDeliveryArgs struct {
	TenantID          string      `json:"tenant_id"`
	DestinationID     uuid.UUID   `json:"destination_id"`
	Deliveries        string      `json:"deliveries,omitempty"`
	LegacyDeliveryIDs []uuid.UUID `json:"delivery_ids,omitempty"`
	LegacyEventIDs    []uuid.UUID `json:"event_ids,omitempty"`
	Attempts          []int       `json:"attempts,omitempty"`
}

// Kind names the job.
func (WebhookDeliveryArgs) Kind() string { return "webhook_delivery" }

// packedDeliveryLen is the length of one delivery in
// WebhookDeliveryArgs.Deliveries.
const packedDeliveryLen = 64

// setDeliveries sets the job's deliveries to ds.
func (args *WebhookDeliveryArgs) setDeliveries(ds ...*domain.WebhookDelivery) {
	b := make([]byte, len(ds)*packedDeliveryLen)
	for i, d := range ds {
		p := b[i*packedDeliveryLen:]
		hex.Encode(p[:32], d.ID[:])
		hex.Encode(p[32:packedDeliveryLen], d.EventID[:])
	}
	args.Deliveries = string(b)
}

// Len is the number of deliveries the job is for.
func (args WebhookDeliveryArgs) Len() int {
	if args.Deliveries == "" {
		return len(args.LegacyDeliveryIDs)
	}
	return len(args.Deliveries) / packedDeliveryLen
}

// IDs returns the ids of the job's deliveries and of their events, in
// order; an error if the arguments are malformed.
func (args WebhookDeliveryArgs) IDs() (deliveries, events []uuid.UUID, err error) {
	if args.Deliveries == "" {
		if len(args.LegacyEventIDs) != len(args.LegacyDeliveryIDs) {
			return nil, nil, fmt.Errorf("webhook delivery job of %d deliveries and %d events", len(args.LegacyDeliveryIDs), len(args.LegacyEventIDs))
		}
		return args.LegacyDeliveryIDs, args.LegacyEventIDs, nil
	}
	if len(args.Deliveries)%packedDeliveryLen != 0 {
		return nil, nil, fmt.Errorf("webhook delivery job: deliveries of %d characters", len(args.Deliveries))
	}
	n := len(args.Deliveries) / packedDeliveryLen
	deliveries, events = make([]uuid.UUID, n), make([]uuid.UUID, n)
	for i := range n {
		p := args.Deliveries[i*packedDeliveryLen:]
		if _, err := hex.Decode(deliveries[i][:], []byte(p[:32])); err != nil {
			return nil, nil, fmt.Errorf("webhook delivery job: %w", err)
		}
		if _, err := hex.Decode(events[i][:], []byte(p[32:packedDeliveryLen])); err != nil {
			return nil, nil, fmt.Errorf("webhook delivery job: %w", err)
		}
	}
	return deliveries, events, nil
}

// attempt is the attempt number the job is for of its i-th delivery.
func (args WebhookDeliveryArgs) attempt(i int) int {
	if i < len(args.Attempts) {
		return args.Attempts[i]
	}
	return 1
}

// webhookDeliveryJob is the job of d's next attempt, due at at (zero: now).
func webhookDeliveryJob(d *domain.WebhookDelivery, at time.Time) domain.OutboxJob {
	if time.Until(at) < jobScheduleGranularity {
		at = time.Time{}
	}
	args := WebhookDeliveryArgs{TenantID: d.TenantID, DestinationID: d.DestinationID, Attempts: []int{d.AttemptCount + 1}}
	args.setDeliveries(d)
	return domain.OutboxJob{Args: args, Queue: QueueWebhooks, ScheduledAt: at}
}

// webhookFirstAttemptJobs groups deliveries waiting for their next attempt
// (new ones, or ones whose attempt a job withdrew unsent) by destination
// into jobs of at most maxDeliveryBatch, each job naming the attempt it is
// for of each delivery when one is not a first attempt.
func webhookFirstAttemptJobs(ds []*domain.WebhookDelivery) []domain.OutboxJob {
	byDest := map[uuid.UUID][]*domain.WebhookDelivery{}
	var order []uuid.UUID
	for _, d := range ds {
		if _, ok := byDest[d.DestinationID]; !ok {
			order = append(order, d.DestinationID)
		}
		byDest[d.DestinationID] = append(byDest[d.DestinationID], d)
	}
	var jobs []domain.OutboxJob
	for _, dest := range order {
		list := byDest[dest]
		for start := 0; start < len(list); start += maxDeliveryBatch {
			part := list[start:min(start+maxDeliveryBatch, len(list))]
			args := WebhookDeliveryArgs{TenantID: part[0].TenantID, DestinationID: dest}
			args.setDeliveries(part...)
			if slices.ContainsFunc(part, func(d *domain.WebhookDelivery) bool { return d.AttemptCount > 0 }) {
				args.Attempts = make([]int, len(part))
				for i, d := range part {
					args.Attempts[i] = d.AttemptCount + 1
				}
			}
			jobs = append(jobs, domain.OutboxJob{Args: args, Queue: QueueWebhooks})
		}
	}
	return jobs
}

// DeliverWebhooks runs the attempts a delivery job asks for. It commits
// every due attempt as DELIVERING in one statement (each the domain's
// transition, saved only if its delivery is still in the state it was
// computed from, so concurrent runs cannot both act), sends them through
// the destination's request slots (each held only while its request is
// under way), then records every outcome in one transaction, with the
// retries' jobs at their scheduled times.
//
// A delivery whose attempt is already DELIVERING is a rerun after a crash,
// rescue or interrupted shutdown: that attempt is recorded as UNKNOWN (the
// receiver may or may not have it) and the delivery is resent at once under
// the same webhook-id. A delivery whose attempt already ran to an end is
// left alone. ErrDestinationBusy means the destination has its maximum of
// delivery jobs under way in this process; the job should be tried again
// shortly.
func (a *App) DeliverWebhooks(ctx context.Context, args WebhookDeliveryArgs) (err error) {
	ctx, span := a.startCommand(ctx, "DeliverWebhooks")
	defer func() { a.endCommand(span, err) }()
	if a.webhooks.Sender == nil || a.webhooks.Box == nil {
		return errors.New("webhooks: delivery needs a sender and a master key")
	}
	deliveryIDs, eventIDs, err := args.IDs()
	if err != nil {
		return err
	}
	if len(deliveryIDs) == 0 || len(deliveryIDs) > maxDeliveryBatch {
		return fmt.Errorf("webhook delivery job of %d deliveries", len(deliveryIDs))
	}
	// A destination with its maximum of jobs under way gives the worker
	// back rather than hold it.
	slots, leave, ok := a.webhooks.enter(ctx, args.DestinationID)
	if !ok {
		return ErrDestinationBusy
	}
	defer leave()
	now := a.storedNow()
	sc, err := a.store.WebhookBatchSendContext(ctx, args.TenantID, args.DestinationID, deliveryIDs, eventIDs, now)
	if errors.Is(err, domain.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	want := make(map[uuid.UUID]int, len(deliveryIDs))
	for i, id := range deliveryIDs {
		want[id] = args.attempt(i)
	}
	due := make([]domain.WebhookDelivery, 0, len(sc.Deliveries))
	var latest time.Time
	for _, d := range sc.Deliveries {
		n := want[d.ID]
		switch {
		case d.State == domain.WebhookDeliveryDelivering && d.AttemptCount == n:
			var recorded bool
			if err := a.retryTx(ctx, func(ctx context.Context) (err error) {
				recorded, err = a.recordLostAttempt(ctx, d.TenantID, d.ID, n)
				return err
			}); err != nil {
				return err
			}
			if recorded {
				// Counted once the transaction committed, not per try.
				a.observer.WebhookAttempt(strings.ToLower(string(domain.WebhookAttemptUnknown)), 0)
			}
		case (d.State == domain.WebhookDeliveryPending || d.State == domain.WebhookDeliveryRetrying) && d.AttemptCount == n-1:
			due = append(due, d)
			if d.NextAttemptAt != nil && d.NextAttemptAt.After(latest) {
				latest = *d.NextAttemptAt
			}
		}
	}
	if len(due) == 0 {
		return nil
	}
	// A retry due within the scheduler's granularity was enqueued available
	// at once: wait for its time here.
	if wait := latest.Sub(now); wait > 0 {
		t := time.NewTimer(min(wait, jobScheduleGranularity))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
		now = a.storedNow()
	}
	keys, keyErr := a.openSigningKeys(sc.Destination, sc.Secrets)
	if keyErr != nil {
		a.logger.ErrorContext(ctx, "webhook signing secret unavailable", "destination", sc.Destination.ID, "err", keyErr)
	}
	changes := make([]domain.WebhookDeliveryChange, 0, len(due))
	preps := make(map[uuid.UUID]*preparedAttempt, len(due))
	var purged *domain.PurgedPrefix
	for _, d := range due {
		event := sc.Events[d.EventID]
		if event == nil {
			// Only retention removes events: the project's deliveries of
			// purged events have nothing left to send, and are dead-lettered.
			if purged == nil {
				p, err := a.store.AuditPurgedPrefix(ctx, d.TenantID, d.ProjectID)
				if err != nil {
					return err
				}
				if _, err := a.store.DeadLetterPurgedWebhookDeliveries(ctx, d.TenantID, d.ProjectID, now); err != nil {
					return err
				}
				purged = &p
			}
			if d.EventSequence > purged.Through {
				return fmt.Errorf("event %s of delivery %s is missing", d.EventID, d.ID)
			}
			continue
		}
		change, prep, err := a.beginAttempt(d, event, sc.Destination.URL, keys, keyErr, now)
		if err != nil {
			return err
		}
		changes = append(changes, change)
		preps[d.ID] = prep
	}
	saved, err := a.store.SaveWebhookDeliveriesIf(ctx, changes)
	if err != nil || len(saved) == 0 {
		return err
	}
	sent := make([]*preparedAttempt, len(saved))
	for i, id := range saved {
		sent[i] = preps[id]
	}
	results, unsent := a.sendAll(ctx, slots, sent)
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	return a.finishWebhookAttempts(fctx, sent, results, unsent)
}

// sendAll sends prepared attempts through the destination's request
// slots, as many at a time as slots are free: each request gets a goroutine
// once it holds a slot, so that a job waiting for slots holds one goroutine,
// not one per request. unsent[i] tells that the i-th request was never
// handed to the sender: ctx ended (the job's timeout, a shutdown) while it
// waited for a slot.
func (a *App) sendAll(ctx context.Context, slots *destinationSlots, preps []*preparedAttempt) (results []webhook.Result, unsent []bool) {
	results, unsent = make([]webhook.Result, len(preps)), make([]bool, len(preps))
	var wg sync.WaitGroup
	for i, prep := range preps {
		if prep.unsendable != nil {
			results[i] = *prep.unsendable
			continue
		}
		release, ok := slots.request(ctx)
		if ok && ctx.Err() != nil {
			release()
			ok = false
		}
		if !ok {
			unsent[i] = true
			continue
		}
		wg.Go(func() {
			defer release()
			results[i] = a.webhooks.Sender.Send(ctx, webhook.Request{
				URL: prep.url, ID: prep.delivery.IdempotencyKey, Timestamp: a.now(), Body: prep.body, Keys: prep.keys,
			})
		})
	}
	wg.Wait()
	return results, unsent
}
