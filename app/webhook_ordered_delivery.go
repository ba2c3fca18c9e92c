package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/jobargs"
	"github.com/aetheriot/aether-audit/webhook"
)

// Ordered delivery (subscriptions with ordering SEQUENCE) rests on three
// things:
//
//   - Completeness. The fan-out creates an ordered subscription's
//     deliveries in the order of the project sequence and without gap: it
//     locks the subscription and, when an earlier fan-out has not run yet,
//     fans that earlier range out itself (the events are committed: the
//     project sequence commits in order). Each delivery joins the
//     subscription's queue (webhook_ordered_queue) in the same transaction.
//   - One sender. Only the process holding the subscription's advisory lock
//     sends its deliveries (DeliverOrderedWebhooks). PostgreSQL releases the
//     lock as soon as the holder's connection ends, so a process killed
//     mid-send hands over at once; and a DELIVERING delivery found by the
//     next holder can only be a lost attempt.
//   - Order. The holder sends the queue's head, and the next delivery only
//     once the previous one was answered 2xx (a batch of them is committed
//     as DELIVERING first, durably, then sent one by one; the rest of the
//     batch is withdrawn unsent when one fails). A failed head retries on
//     its schedule and holds the queue; a dead-lettered head pauses the
//     subscription until it is redriven or skipped.

// WebhookSubscriptionLocker takes an ordered subscription's lock, held on a
// connection of its own until unlock (or until that connection ends).
type WebhookSubscriptionLocker interface {
	TryLockWebhookSubscription(ctx context.Context, id uuid.UUID) (check func(context.Context) error, unlock func(), ok bool, err error)
}

// ErrSubscriptionBusy means that another job holds the ordered
// subscription; the job should be tried again shortly.
var ErrSubscriptionBusy = errors.New("webhook subscription: its ordered deliveries are being sent by another job")

const (
	// orderedBatch is the most deliveries one round of an ordered job
	// commits as DELIVERING before sending them one by one.
	orderedBatch = 100
	// orderedQueueRead is how much of the queue a round reads: the
	// previous round's deliveries, finished but still queued (the round's
	// bookkeeping takes them off), and a batch after them, so that a round
	// follows another without a round of bookkeeping alone between them.
	orderedQueueRead = 2 * orderedBatch
	// orderedSlice is how long an ordered job keeps its subscription
	// before it hands over to a new job (so that River sees progress).
	orderedSlice = 10 * time.Second
	// orderedAwake is how long the fan-out trusts a queued or running
	// ordered job to see new deliveries without enqueueing another.
	orderedAwake = 5 * time.Second
	// maxOrderedGap bounds the events a fan-out fans out before its own
	// range, for an ordered subscription whose earlier fan-out has not run.
	maxOrderedGap = 10 * webhookFanoutChunk
)

// OrderedDeliveryJobTimeout bounds one ordered job: its slice and the half
// slice more its last round may take, the request under way then, and the
// recording of outcomes.
func OrderedDeliveryJobTimeout(perRequest time.Duration) time.Duration {
	return orderedSlice*3/2 + perRequest + finishTimeout
}

// orderedDeliveryJob is the job that sends a subscription's next
// deliveries, due at at (zero: now).
func orderedDeliveryJob(tenantID string, subscriptionID uuid.UUID, at time.Time) domain.OutboxJob {
	return domain.OutboxJob{Args: jobargs.WebhookOrderedDeliveryArgs{TenantID: tenantID, SubscriptionID: subscriptionID},
		Queue: jobargs.QueueWebhooks, ScheduledAt: at}
}

// orderedDeliveryJobs splits the ordered deliveries off ds, with one
// ordered job per subscription among them.
func orderedDeliveryJobs(ds []*domain.WebhookDelivery) (rest []*domain.WebhookDelivery, jobs []domain.OutboxJob) {
	var seen map[uuid.UUID]bool
	rest = ds
	for i, d := range ds {
		if !d.Ordered {
			if seen != nil {
				rest = append(rest, d)
			}
			continue
		}
		if seen == nil {
			seen = map[uuid.UUID]bool{}
			rest = append(make([]*domain.WebhookDelivery, 0, len(ds)), ds[:i]...)
		}
		if !seen[d.SubscriptionID] {
			seen[d.SubscriptionID] = true
			jobs = append(jobs, orderedDeliveryJob(d.TenantID, d.SubscriptionID, time.Time{}))
		}
	}
	return rest, jobs
}

// orderedFanout is the fan-out of one chunk to the SEQUENCE subscriptions
// among its candidates, locked for the transaction.
type orderedFanout struct {
	entries []orderedFanoutEntry
}

type orderedFanoutEntry struct {
	sub *domain.WebhookSubscription
	// after is the sequence through which the subscription's deliveries
	// existed; gap the events between it and the chunk.
	after uint64
	gap   []domain.AuditEventRef
	awake bool
}

// lockOrderedFanout locks the SEQUENCE subscriptions among subs (in id
// order), fills the gap before [from, to] of any whose earlier events are
// not fanned out yet, and records them fanned out through to.
func (a *App) lockOrderedFanout(ctx context.Context, tx Tx, tenantID, projectID string, subs []domain.WebhookSubscription, from, to uint64, now time.Time) (*orderedFanout, error) {
	o := &orderedFanout{}
	bySub := map[uuid.UUID]*domain.WebhookSubscription{}
	var ids []uuid.UUID
	for i := range subs {
		if subs[i].Ordering == domain.WebhookOrderingSequence {
			bySub[subs[i].ID] = &subs[i]
			ids = append(ids, subs[i].ID)
		}
	}
	if len(ids) == 0 {
		return o, nil
	}
	marks, err := tx.LockOrderedWebhookSubscriptions(ctx, tenantID, ids)
	if err != nil {
		return nil, err
	}
	for _, m := range marks {
		if m.FannedOutThrough >= to {
			continue // another run got there first
		}
		e := orderedFanoutEntry{sub: bySub[m.SubscriptionID], after: m.FannedOutThrough,
			awake: m.AwakeUntil != nil && m.AwakeUntil.After(now)}
		if m.FannedOutThrough+1 < from {
			if from-1-m.FannedOutThrough > maxOrderedGap {
				return nil, fmt.Errorf("ordered fan-out of subscription %s: events %d to %d are not fanned out yet",
					m.SubscriptionID, m.FannedOutThrough+1, from-1)
			}
			if e.gap, err = tx.AuditEventRefs(ctx, tenantID, projectID, m.FannedOutThrough+1, from-1); err != nil {
				return nil, err
			}
		}
		if err := tx.SetWebhookSubscriptionFannedOut(ctx, tenantID, m.SubscriptionID, to); err != nil {
			return nil, err
		}
		o.entries = append(o.entries, e)
	}
	return o, nil
}

// appendDeliveries appends the deliveries of the gaps and of refs to the
// locked SEQUENCE subscriptions.
func (o *orderedFanout) appendDeliveries(ds []domain.WebhookDelivery, refs []domain.AuditEventRef, now time.Time, maxAttempts int) []domain.WebhookDelivery {
	for _, e := range o.entries {
		for _, part := range [][]domain.AuditEventRef{e.gap, refs} {
			for _, ref := range part {
				if ref.Sequence > e.after && e.sub.Matches(ref.Action, ref.Sequence) && ref.AboutDestination != e.sub.DestinationID {
					ds = append(ds, fanoutDelivery(e.sub, ref, now, maxAttempts))
				}
			}
		}
	}
	return ds
}

// queueOrderedFanout puts the ordered deliveries among saved into their
// queues and returns the others, with one ordered job for each subscription
// that got deliveries and has no job queued or running.
func (a *App) queueOrderedFanout(ctx context.Context, tx Tx, tenantID string, saved []*domain.WebhookDelivery, o *orderedFanout, now time.Time) (rest []*domain.WebhookDelivery, jobs []domain.OutboxJob, err error) {
	if len(o.entries) == 0 {
		return saved, nil, nil
	}
	var ids []uuid.UUID
	got := map[uuid.UUID]bool{}
	for _, d := range saved {
		if d.Ordered {
			ids = append(ids, d.ID)
			got[d.SubscriptionID] = true
		} else {
			rest = append(rest, d)
		}
	}
	if err := tx.QueueOrderedWebhookDeliveries(ctx, tenantID, ids); err != nil {
		return nil, nil, err
	}
	for _, e := range o.entries {
		if !got[e.sub.ID] || e.awake {
			continue
		}
		until := now.Add(orderedAwake)
		if err := tx.SetWebhookSubscriptionAwake(ctx, tenantID, e.sub.ID, &until); err != nil {
			return nil, nil, err
		}
		jobs = append(jobs, orderedDeliveryJob(tenantID, e.sub.ID, time.Time{}))
	}
	return rest, jobs, nil
}

// DeliverOrderedWebhooks sends the next deliveries of a SEQUENCE
// subscription, one after the other, for up to orderedSlice, then hands
// over to a new job if more are due. It holds the subscription's lock
// throughout: ErrSubscriptionBusy means another job holds it (the job
// should be tried again shortly, as for ErrDestinationBusy). A subscription
// whose queue's head is not due (a retry scheduled later, a dead letter)
// ends the job: the retry's own job, a redrive or a skip starts the next.
func (a *App) DeliverOrderedWebhooks(ctx context.Context, args jobargs.WebhookOrderedDeliveryArgs) (err error) {
	ctx, span := a.startCommand(ctx, "DeliverOrderedWebhooks")
	defer func() { a.endCommand(span, err) }()
	if a.webhooks.Sender == nil || a.webhooks.Box == nil {
		return errors.New("webhooks: delivery needs a sender and a master key")
	}
	sub, err := a.store.GetWebhookSubscription(ctx, args.TenantID, args.SubscriptionID, false)
	if errors.Is(err, domain.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	slots, leave, ok := a.webhooks.enter(ctx, sub.DestinationID)
	if !ok {
		return ErrDestinationBusy
	}
	defer leave()
	check, unlock, ok, err := a.store.TryLockWebhookSubscription(ctx, sub.ID)
	if err != nil {
		return err
	}
	if !ok {
		return ErrSubscriptionBusy
	}
	defer unlock()
	start := time.Now()
	deadline := start.Add(orderedSlice)
	for {
		if err := check(ctx); err != nil {
			return err
		}
		more, err := a.orderedRound(ctx, slots, &sub, deadline)
		if err != nil {
			return err
		}
		if more {
			if time.Now().Before(deadline) {
				continue
			}
			return a.retryTx(ctx, func(ctx context.Context, tx Tx) error {
				return tx.EnqueueJobs(ctx, orderedDeliveryJob(sub.TenantID, sub.ID, time.Time{}))
			})
		}
		idle, err := a.orderedIdle(ctx, &sub)
		if err != nil || idle {
			return err
		}
	}
}

// orderedStep is what an ordered subscription's queue allows now.
type orderedStep struct {
	// finished are finished deliveries to take off the queue.
	finished []uuid.UUID
	// head is the first unfinished delivery; nil when there is none.
	head *domain.WebhookDelivery
	// run is the head and the deliveries after it that may be sent in one
	// round, in order; empty when the head may not be sent now.
	run []domain.WebhookDelivery
	// lost tells that the head's attempt is under way with no one sending
	// it (only the lock's holder sends).
	lost bool
}

// nextOrdered reads the queue (in its order) at now. A head due within
// jobScheduleGranularity counts as due: its job waits for it.
func nextOrdered(queue []domain.WebhookDelivery, now time.Time) orderedStep {
	var s orderedStep
	due := func(d *domain.WebhookDelivery) bool {
		return (d.State == domain.WebhookDeliveryPending || d.State == domain.WebhookDeliveryRetrying) &&
			(d.NextAttemptAt == nil || d.NextAttemptAt.Sub(now) < jobScheduleGranularity)
	}
	for i := range queue {
		d := &queue[i]
		if d.Finished() {
			s.finished = append(s.finished, d.ID)
			continue
		}
		if s.head == nil {
			s.head = d
			switch {
			case d.State == domain.WebhookDeliveryDelivering:
				s.lost = true
				return s
			case !due(d):
				return s
			}
			s.run = append(s.run, *d)
			if d.AttemptCount > 0 {
				return s // a retry goes alone
			}
			continue
		}
		if d.State != domain.WebhookDeliveryPending || d.AttemptCount > 0 || !due(d) || len(s.run) == orderedBatch {
			return s
		}
		s.run = append(s.run, *d)
	}
	return s
}

// pausedBy is the dead letter at the queue's head, if any.
func (s orderedStep) pausedBy() *uuid.UUID {
	if s.head != nil && s.head.State == domain.WebhookDeliveryDeadLettered {
		return &s.head.ID
	}
	return nil
}

// orderedBookkeeping takes finished deliveries off the queue, records the
// dead letter that pauses the subscription (or that none does), and, with
// awake, that this job is running.
func (a *App) orderedBookkeeping(ctx context.Context, tx Tx, sub *domain.WebhookSubscription, s orderedStep, awake bool, now time.Time) error {
	if err := tx.DequeueOrderedWebhookDeliveries(ctx, sub.TenantID, sub.ID, s.finished); err != nil {
		return err
	}
	paused := s.pausedBy()
	if (paused == nil) != (sub.PausedByDeliveryID == nil) || paused != nil && *paused != *sub.PausedByDeliveryID {
		if err := tx.SetWebhookSubscriptionPausedBy(ctx, sub.TenantID, sub.ID, paused); err != nil {
			return err
		}
	}
	if awake {
		until := now.Add(orderedAwake)
		return tx.SetWebhookSubscriptionAwake(ctx, sub.TenantID, sub.ID, &until)
	}
	return nil
}

// orderedRound sends one round of the subscription's queue: its head, and
// the deliveries after it as long as each is answered 2xx. more tells
// whether the queue may have more to send now.
func (a *App) orderedRound(ctx context.Context, slots *destinationSlots, sub *domain.WebhookSubscription, deadline time.Time) (more bool, err error) {
	now := a.storedNow()
	queue, err := a.store.OrderedWebhookQueue(ctx, sub.TenantID, sub.ID, orderedQueueRead)
	if err != nil {
		return false, err
	}
	step := nextOrdered(queue, now)
	if step.lost {
		// Only the lock's holder sends, and this job holds it: the
		// attempt's worker is gone.
		var recorded bool
		if err := a.retryTx(ctx, func(ctx context.Context, tx Tx) (err error) {
			recorded, err = a.recordLostAttempt(ctx, tx, sub.TenantID, step.head.ID, step.head.AttemptCount)
			return err
		}); err != nil {
			return false, err
		}
		if recorded {
			a.observer.WebhookAttempt("unknown", 0)
		}
		return true, nil
	}
	if len(step.run) == 0 {
		err := a.retryTx(ctx, func(ctx context.Context, tx Tx) error {
			return a.orderedBookkeeping(ctx, tx, sub, step, false, now)
		})
		if err == nil {
			sub.PausedByDeliveryID = step.pausedBy()
		}
		return false, err
	}
	ids, eventIDs := make([]uuid.UUID, len(step.run)), make([]uuid.UUID, len(step.run))
	for i, d := range step.run {
		ids[i], eventIDs[i] = d.ID, d.EventID
	}
	sc, err := a.store.WebhookBatchSendContext(ctx, sub.TenantID, sub.DestinationID, ids, eventIDs, now)
	if errors.Is(err, domain.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if next := step.run[0].NextAttemptAt; next != nil && next.After(now) {
		// Due within the scheduler's granularity: wait for it here.
		t := time.NewTimer(next.Sub(now))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return false, ctx.Err()
		}
		now = a.storedNow()
	}
	// The destination's gate (disabled, deleted, breaker, rate limit) as for
	// unordered deliveries; what it holds back stays queued, in order, for
	// a later round or job of this subscription.
	run, _, err := a.gateDestination(ctx, sc.Destination, slots, step.run, now)
	if err != nil || len(run) == 0 {
		return false, err
	}
	keys, keyErr := a.openSigningKeys(sc.Destination, sc.Secrets)
	if keyErr != nil {
		a.logger.ErrorContext(ctx, "webhook signing secret unavailable", "destination", sc.Destination.ID, "err", keyErr)
	}
	header := destinationHeader(sc.Destination)
	current := make(map[uuid.UUID]domain.WebhookDelivery, len(sc.Deliveries))
	for _, d := range sc.Deliveries {
		current[d.ID] = d
	}
	var (
		changes []domain.WebhookDeliveryChange
		preps   []*preparedAttempt
		batch   = newAttemptBatch(len(run))
	)
	for _, d := range run {
		cur, ok := current[d.ID]
		if !ok || cur.State != d.State || cur.AttemptCount != d.AttemptCount {
			break // moved meanwhile: the next round reads it again
		}
		event := sc.Events[d.EventID]
		if event == nil {
			if len(changes) > 0 {
				break
			}
			// Only retention removes events: dead-letter the project's
			// deliveries of purged events; a skip lets the subscription on.
			_, err := a.store.DeadLetterPurgedWebhookDeliveries(ctx, d.TenantID, d.ProjectID, now)
			return err == nil, err
		}
		change, prep, err := a.beginAttempt(batch, cur, event, sc.Destination.URL, keys, keyErr, now)
		if err != nil {
			return false, err
		}
		prep.header = header
		changes, preps = append(changes, change), append(preps, prep)
	}
	if len(changes) == 0 {
		return true, nil
	}
	var saved []uuid.UUID
	err = a.retryTx(ctx, func(ctx context.Context, tx Tx) (err error) {
		if err := a.orderedBookkeeping(ctx, tx, sub, step, true, now); err != nil {
			return err
		}
		saved, err = tx.SaveWebhookDeliveriesIf(ctx, changes)
		return err
	})
	if err != nil {
		return false, err
	}
	sub.PausedByDeliveryID = step.pausedBy()
	isSaved := make(map[uuid.UUID]bool, len(saved))
	for _, id := range saved {
		isSaved[id] = true
	}
	// A delivery after one that was not saved (moved meanwhile) must wait
	// for it, as must every one after a failure: withdrawn unsent.
	var (
		sent  []*preparedAttempt
		after []bool
		gap   bool
	)
	for _, prep := range preps {
		if !isSaved[prep.delivery.ID] {
			gap = true
			continue
		}
		sent, after = append(sent, prep), append(after, gap)
	}
	if len(sent) == 0 {
		return true, nil
	}
	results, unsent := make([]webhook.Result, len(sent)), make([]bool, len(sent))
	// The outcomes are recorded by a goroutine of their own while the next
	// requests go out (see orderedRecorder).
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	rec := a.startOrderedRecorder(fctx, sc.Destination, sent, results, unsent)
	stop := false
	// A round started before the slice's end may finish after it, within
	// half a slice more (a slow receiver's round is cut short there).
	hard := deadline.Add(orderedSlice / 2)
	for i, prep := range sent {
		if stop || after[i] || time.Now().After(hard) || ctx.Err() != nil {
			unsent[i], stop = true, true
			continue
		}
		if prep.unsendable != nil {
			results[i], stop = *prep.unsendable, true
			continue
		}
		release, ok := slots.request(ctx)
		if !ok {
			unsent[i], stop = true, true
			continue
		}
		results[i] = a.webhooks.Sender.Send(ctx, webhook.Request{
			URL: prep.url, ID: prep.delivery.IdempotencyKey, Timestamp: a.now(), Body: prep.body, Keys: prep.keys,
			Header: prep.header,
		})
		release()
		if !results[i].Delivered {
			stop = true
		} else if !rec.advance(i + 1) {
			stop = true
		}
	}
	return true, rec.wait(len(sent))
}

// orderedIdle ends an ordered job whose subscription has nothing to send
// now: with the subscription locked, it reads the queue again and, if still
// nothing is due, records that no job is running (a fan-out after this
// commit enqueues one). idle is false when something became due.
func (a *App) orderedIdle(ctx context.Context, sub *domain.WebhookSubscription) (idle bool, err error) {
	err = a.retryTx(ctx, func(ctx context.Context, tx Tx) error {
		if _, err := tx.GetWebhookSubscription(ctx, sub.TenantID, sub.ID, true); err != nil {
			return err
		}
		queue, err := tx.OrderedWebhookQueue(ctx, sub.TenantID, sub.ID, orderedQueueRead)
		if err != nil {
			return err
		}
		if s := nextOrdered(queue, a.storedNow()); s.lost || len(s.run) > 0 {
			idle = false
			return nil
		}
		idle = true
		return tx.SetWebhookSubscriptionAwake(ctx, sub.TenantID, sub.ID, nil)
	})
	return idle, err
}
