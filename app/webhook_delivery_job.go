package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/jobargs"
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

// webhookDeliveryJob is the job of d's next attempt, due at at (zero: now).
func webhookDeliveryJob(d *domain.WebhookDelivery, at time.Time) domain.OutboxJob {
	if time.Until(at) < jobScheduleGranularity {
		at = time.Time{}
	}
	if d.Ordered {
		return orderedDeliveryJob(d.TenantID, d.SubscriptionID, at)
	}
	args := jobargs.WebhookDeliveryArgs{TenantID: d.TenantID, DestinationID: d.DestinationID, Attempts: []int{d.AttemptCount + 1}}
	args.SetDeliveries(1, func(int) (uuid.UUID, uuid.UUID) { return d.ID, d.EventID })
	return domain.OutboxJob{Args: args, Queue: jobargs.QueueWebhooks, ScheduledAt: at}
}

// webhookFirstAttemptJobs groups deliveries waiting for their next attempt
// (new ones, or ones whose attempt a job withdrew unsent) by destination
// into jobs of at most maxDeliveryBatch, each job naming the attempt it is
// for of each delivery when one is not a first attempt. Ordered deliveries
// get their subscription's ordered job instead.
func webhookFirstAttemptJobs(ds []*domain.WebhookDelivery) []domain.OutboxJob {
	ds, jobs := orderedDeliveryJobs(ds)
	byDest := map[uuid.UUID][]*domain.WebhookDelivery{}
	var order []uuid.UUID
	for _, d := range ds {
		if _, ok := byDest[d.DestinationID]; !ok {
			order = append(order, d.DestinationID)
		}
		byDest[d.DestinationID] = append(byDest[d.DestinationID], d)
	}
	for _, dest := range order {
		list := byDest[dest]
		for start := 0; start < len(list); start += maxDeliveryBatch {
			part := list[start:min(start+maxDeliveryBatch, len(list))]
			args := jobargs.WebhookDeliveryArgs{TenantID: part[0].TenantID, DestinationID: dest}
			args.SetDeliveries(len(part), func(i int) (uuid.UUID, uuid.UUID) { return part[i].ID, part[i].EventID })
			if slices.ContainsFunc(part, func(d *domain.WebhookDelivery) bool { return d.AttemptCount > 0 }) {
				args.Attempts = make([]int, len(part))
				for i, d := range part {
					args.Attempts[i] = d.AttemptCount + 1
				}
			}
			jobs = append(jobs, domain.OutboxJob{Args: args, Queue: jobargs.QueueWebhooks})
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
func (a *App) DeliverWebhooks(ctx context.Context, args jobargs.WebhookDeliveryArgs) (err error) {
	ctx, span := a.startCommand(ctx, "DeliverWebhooks")
	defer func() { a.endCommand(span, err) }()
	_, err = a.deliverWebhooks(ctx, args, nil)
	return err
}

// deliverWebhooks is DeliverWebhooks; the transaction of the outcomes also
// drops the scheduled jobs rescue (the rescue job of a dispatched delivery
// job, see webhook_dispatch.go), and dropped tells that it committed.
func (a *App) deliverWebhooks(ctx context.Context, args jobargs.WebhookDeliveryArgs, rescue []int64) (dropped bool, err error) {
	if a.webhooks.Sender == nil || a.webhooks.Box == nil {
		return false, errors.New("webhooks: delivery needs a sender and a master key")
	}
	deliveryIDs, eventIDs, err := args.IDs()
	if err != nil {
		return false, err
	}
	if len(deliveryIDs) == 0 || len(deliveryIDs) > maxDeliveryBatch {
		return false, fmt.Errorf("webhook delivery job of %d deliveries", len(deliveryIDs))
	}
	// A destination with its maximum of jobs under way gives the worker
	// back rather than hold it.
	slots, leave, ok := a.webhooks.enter(ctx, args.DestinationID)
	if !ok {
		return false, ErrDestinationBusy
	}
	defer leave()
	now := a.storedNow()
	sc, err := a.store.WebhookBatchSendContext(ctx, args.TenantID, args.DestinationID, deliveryIDs, eventIDs, now)
	if errors.Is(err, domain.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	want := make(map[uuid.UUID]int, len(deliveryIDs))
	for i, id := range deliveryIDs {
		want[id] = args.Attempt(i)
	}
	due := make([]domain.WebhookDelivery, 0, len(sc.Deliveries))
	var latest time.Time
	for _, d := range sc.Deliveries {
		n := want[d.ID]
		switch {
		case d.State == domain.WebhookDeliveryDelivering && d.AttemptCount == n:
			var recorded bool
			if err := a.retryTx(ctx, func(ctx context.Context, tx Tx) (err error) {
				recorded, err = a.recordLostAttempt(ctx, tx, d.TenantID, d.ID, n)
				return err
			}); err != nil {
				return false, err
			}
			if recorded {
				// Counted once the transaction committed, not per try.
				a.observer.WebhookAttempt(outcomeLabel(domain.WebhookAttemptUnknown), 0)
			}
		case (d.State == domain.WebhookDeliveryPending || d.State == domain.WebhookDeliveryRetrying) && d.AttemptCount == n-1:
			due = append(due, d)
			if d.NextAttemptAt != nil && d.NextAttemptAt.After(latest) {
				latest = *d.NextAttemptAt
			}
		}
	}
	if len(due) == 0 {
		return false, nil
	}
	// A retry due within the scheduler's granularity was enqueued available
	// at once: wait for its time here.
	if wait := latest.Sub(now); wait > 0 {
		t := time.NewTimer(min(wait, jobScheduleGranularity))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return false, ctx.Err()
		}
		now = a.storedNow()
	}
	due, later, err := a.gateDestination(ctx, sc.Destination, slots, due, now)
	if err != nil || len(due) == 0 {
		return false, err
	}
	keys, keyErr := a.openSigningKeys(sc.Destination, sc.Secrets)
	if keyErr != nil {
		a.logger.ErrorContext(ctx, "webhook signing secret unavailable", "destination", sc.Destination.ID, "err", keyErr)
	}
	header := destinationHeader(sc.Destination)
	changes := make([]domain.WebhookDeliveryChange, 0, len(due))
	preps := make(map[uuid.UUID]*preparedAttempt, len(due))
	var purged *domain.PurgedPrefix
	batch := newAttemptBatch(len(due))
	for _, d := range due {
		event := sc.Events[d.EventID]
		if event == nil {
			// Only retention removes events: the project's deliveries of
			// purged events have nothing left to send, and are dead-lettered.
			if purged == nil {
				p, err := a.store.AuditPurgedPrefix(ctx, d.TenantID, d.ProjectID)
				if err != nil {
					return false, err
				}
				if _, err := a.store.DeadLetterPurgedWebhookDeliveries(ctx, d.TenantID, d.ProjectID, now); err != nil {
					return false, err
				}
				purged = &p
			}
			if d.EventSequence > purged.Through {
				return false, fmt.Errorf("event %s of delivery %s is missing", d.EventID, d.ID)
			}
			continue
		}
		change, prep, err := a.beginAttempt(batch, d, event, sc.Destination.URL, keys, keyErr, now)
		if err != nil {
			return false, err
		}
		prep.header = header
		changes = append(changes, change)
		preps[d.ID] = prep
	}
	saved, err := a.store.SaveWebhookDeliveriesIf(ctx, changes)
	if err != nil || len(saved) == 0 && len(later) == 0 {
		return false, err
	}
	sent := make([]*preparedAttempt, len(saved))
	for i, id := range saved {
		sent[i] = preps[id]
	}
	// In order of sequence, as far as the destination's in-flight limit
	// serializes them.
	slices.SortFunc(sent, func(x, y *preparedAttempt) int {
		return cmp.Compare(x.delivery.EventSequence, y.delivery.EventSequence)
	})
	gate, _ := sc.Destination.Gate(now)
	results, unsent := a.sendAll(ctx, slots, sent, gate != domain.WebhookGateProbe)
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	err = a.finishWebhookAttempts(fctx, sc.Destination, sent, results, unsent, later, rescue)
	return err == nil, err
}

// sendAll sends prepared attempts through the destination's request
// slots, as many at a time as slots are free: each request gets a goroutine
// (a request runner's) once it holds a slot, so that a job waiting for
// slots holds one goroutine, not one per request. unsent[i] tells that the i-th request was never
// handed to the sender: ctx ended (the job's timeout, a shutdown) while it
// waited for a slot, or, with guard, the destination tripped in this
// process (destination_trip.go) before its turn. Every result counts
// towards the trip.
func (a *App) sendAll(ctx context.Context, slots *destinationSlots, preps []*preparedAttempt, guard bool) (results []webhook.Result, unsent []bool) {
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
		if ok && guard {
			if _, tripped := slots.tripped(a.now()); tripped {
				release()
				ok = false
			}
		}
		if !ok {
			unsent[i] = true
			continue
		}
		wg.Add(1)
		a.webhooks.runners.run(func() {
			defer wg.Done()
			defer release()
			results[i] = a.webhooks.Sender.Send(ctx, webhook.Request{
				URL: prep.url, ID: prep.delivery.IdempotencyKey, Timestamp: a.now(), Body: prep.body, Keys: prep.keys,
				Header: prep.header,
			})
			slots.observe(results[i], a.now(), a.webhooks.Breaker)
		})
	}
	wg.Wait()
	return results, unsent
}
