package app

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/jobargs"
)

// FanOutWebhookDeliveries runs the outbox fact of recorded events: it
// matches the events of args against the project's active subscriptions and
// creates one WebhookDelivery per (subscription, event) with its delivery
// job (batched per destination, see jobargs.WebhookDeliveryArgs), in one
// transaction per chunk of events. It is idempotent: deliveries
// are unique per (subscription, event), and a delivery job is enqueued only
// for a delivery this run inserted, so running it twice (River retry,
// rescue, an overlapping coalesced run) creates nothing more. A chunk's
// deliveries are inserted with a plain insert, which fails on a delivery
// that exists; the chunk's transaction then runs again, and the rest of the
// run too, with the insert that skips existing deliveries (the plain one
// costs PostgreSQL less per delivery: docs/benchmarks.md, "Fan-out ratio:
// database side").
func (a *App) FanOutWebhookDeliveries(ctx context.Context, args jobargs.WebhookFanoutArgs) (_ int, err error) {
	ctx, span := a.startCommand(ctx, "FanOutWebhookDeliveries")
	defer func() { a.endCommand(span, err) }()
	if args.FromSequence == 0 || args.ToSequence < args.FromSequence {
		return 0, fmt.Errorf("webhook fan-out: bad sequence range [%d, %d]", args.FromSequence, args.ToSequence)
	}
	created := 0
	var fan fanoutTries
	for from := args.FromSequence; from <= args.ToSequence; from += webhookFanoutChunk {
		to := min(from+webhookFanoutChunk-1, args.ToSequence)
		err := a.retryTx(ctx, func(ctx context.Context, tx Tx) error {
			n, jobs, err := fan.chunk(ctx, a, tx, args.TenantID, args.ProjectID, from, to)
			if err != nil {
				return err
			}
			created += n
			return tx.EnqueueJobs(ctx, jobs...)
		})
		if err != nil {
			return created, err
		}
	}
	return created, nil
}

// fanOutChunk fans out the events [from, to] in transaction tx: it inserts
// their deliveries and returns how many, with the jobs of their first
// attempts, for the caller to enqueue in tx. Without skipExisting, a
// delivery that exists already fails it with
// domain.ErrWebhookDeliveryExists.
func (a *App) fanOutChunk(ctx context.Context, tx Tx, tenantID, projectID string, from, to uint64, skipExisting bool) (int, []domain.OutboxJob, error) {
	// Subscriptions disabled since these events were recorded still get
	// them; Matches tells which.
	const limit = 4 * MaxActiveWebhookSubscriptionsPerProject
	subs, err := tx.FanOutWebhookSubscriptions(ctx, tenantID, projectID, from, to, limit+1)
	if err != nil || len(subs) == 0 {
		return 0, nil, err
	}
	if len(subs) > limit {
		// Never drop a subscription silently.
		return 0, nil, fmt.Errorf("webhook fan-out of %s/%s [%d, %d]: more than %d subscriptions to match", tenantID, projectID, from, to, limit)
	}
	refs, err := tx.AuditEventRefs(ctx, tenantID, projectID, from, to)
	if err != nil {
		return 0, nil, err
	}
	now := a.storedNow()
	// SEQUENCE subscriptions get their deliveries in order, without gap
	// (webhook_ordered_delivery.go).
	ordered, err := a.lockOrderedFanout(ctx, tx, tenantID, projectID, subs, from, to, now)
	if err != nil {
		return 0, nil, err
	}
	maxAttempts := a.webhooks.RetrySchedule.MaxAttempts()
	ds := make([]domain.WebhookDelivery, 0, min(len(refs)*len(subs), 8192))
	for _, ref := range refs {
		for i := range subs {
			if subs[i].Ordering == domain.WebhookOrderingSequence || !subs[i].Matches(ref.Action, ref.Sequence) || ref.AboutDestination == subs[i].DestinationID {
				// Ordered subscriptions get theirs below; an operational
				// event is never sent to the destination it is about
				// (docs/webhooks.md, "Operational events").
				continue
			}
			ds = append(ds, fanoutDelivery(&subs[i], ref, now, maxAttempts))
		}
	}
	ds = ordered.appendDeliveries(ds, refs, now, maxAttempts)
	saved, err := insertFanoutDeliveries(ctx, tx, ds, skipExisting)
	if err != nil || len(saved) == 0 {
		return 0, nil, err
	}
	rest, jobs, err := a.queueOrderedFanout(ctx, tx, tenantID, saved, ordered, now)
	if err != nil {
		return 0, nil, err
	}
	return len(saved), append(jobs, webhookFirstAttemptJobs(rest)...), nil
}

// fanoutTries carries what the tries of a fan-out's transaction learned:
// the first inserts its deliveries plainly; once one found a delivery that
// exists (a rerun: retry, rescue, an overlapping run), its error is a
// unique violation, retryTx runs the transaction again, and every later
// try skips what exists.
type fanoutTries struct{ skipExisting bool }

// chunk runs fanOutChunk in tx as this try of the transaction should.
func (f *fanoutTries) chunk(ctx context.Context, a *App, tx Tx, tenantID, projectID string, from, to uint64) (int, []domain.OutboxJob, error) {
	n, jobs, err := a.fanOutChunk(ctx, tx, tenantID, projectID, from, to, f.skipExisting)
	if errors.Is(err, domain.ErrWebhookDeliveryExists) {
		f.skipExisting = true
	}
	return n, jobs, err
}

// insertFanoutDeliveries inserts ds in tx and returns those it inserted:
// all of them (a plain insert, which fails on one that exists), or with
// skipExisting those that did not exist.
func insertFanoutDeliveries(ctx context.Context, tx Tx, ds []domain.WebhookDelivery, skipExisting bool) ([]*domain.WebhookDelivery, error) {
	if skipExisting {
		inserted, err := tx.InsertMissingWebhookDeliveries(ctx, ds)
		if err != nil {
			return nil, err
		}
		return savedDeliveries(ds, inserted), nil
	}
	if err := tx.InsertWebhookDeliveries(ctx, ds); err != nil {
		return nil, err
	}
	saved := make([]*domain.WebhookDelivery, len(ds))
	for i := range ds {
		saved[i] = &ds[i]
	}
	return saved, nil
}

// fanoutDelivery is a new PENDING delivery of the event ref to sub, with
// the id of this (subscription, event) pair (domain.FanoutDeliveryID).
func fanoutDelivery(sub *domain.WebhookSubscription, ref domain.AuditEventRef, now time.Time, maxAttempts int) domain.WebhookDelivery {
	id := domain.FanoutDeliveryID(sub.ID, ref.ID, ref.RecordedAt)
	return domain.WebhookDelivery{
		ID: id, TenantID: sub.TenantID, ProjectID: sub.ProjectID, SubscriptionID: sub.ID,
		DestinationID: sub.DestinationID, EventID: ref.ID, EventSequence: ref.Sequence,
		EventType: ref.Action, IdempotencyKey: domain.WebhookDeliveryIdempotencyKey(id),
		State: domain.WebhookDeliveryPending, MaxAttempts: maxAttempts,
		CreatedAt: now, UpdatedAt: now, Ordered: sub.Ordering == domain.WebhookOrderingSequence,
	}
}

// savedDeliveries returns the deliveries of ds that a statement saved, in
// the order of its saved ids.
func savedDeliveries(ds []domain.WebhookDelivery, saved []uuid.UUID) []*domain.WebhookDelivery {
	byID := make(map[uuid.UUID]*domain.WebhookDelivery, len(ds))
	for i := range ds {
		byID[ds[i].ID] = &ds[i]
	}
	out := make([]*domain.WebhookDelivery, len(saved))
	for i, id := range saved {
		out[i] = byID[id]
	}
	return out
}

// fanoutWindow is how long the first fan-out job of a project to arrive
// waits for others of the same project before it runs them all in one: the
// jobs of one River fetch start within a millisecond or two of each other,
// and a lone job is delayed by no more than this.
const fanoutWindow = 3 * time.Millisecond

// fanoutBatch is the fan-out jobs of one project coalesced into one run:
// from and to span their sequence ranges; done is closed once the run
// ended, with created and err its result.
type fanoutBatch struct {
	from, to uint64
	jobs     int
	done     chan struct{}
	created  int
	err      error
}

// fanoutCoalescer gathers the fan-out jobs of a project that this
// process's workers start within fanoutWindow of each other.
type fanoutCoalescer struct {
	mu   sync.Mutex
	open map[[2]string]*fanoutBatch
}

// CoalesceWebhookFanout runs the fan-out of args (see
// FanOutWebhookDeliveries) together with the fan-outs of the same project
// that other workers of this process start within fanoutWindow: one run
// over the span of their sequence ranges, so that events recorded one at a
// time, close together, share one transaction and one delivery job per
// destination instead of paying for their own. Every caller returns once
// that run ended, with its error: a job succeeds only when the deliveries
// of all its events are committed. The span may hold events of no job
// here (recorded in between, their own jobs not fetched yet): they are
// committed (the project's sequence commits in order), and fanning them out
// early is idempotent, as FanOutWebhookDeliveries is. created counts the
// run's new deliveries for the job that ran it, 0 for the others.
func (a *App) CoalesceWebhookFanout(ctx context.Context, args jobargs.WebhookFanoutArgs) (created int, err error) {
	if args.FromSequence == 0 || args.ToSequence < args.FromSequence {
		return 0, fmt.Errorf("webhook fan-out: bad sequence range [%d, %d]", args.FromSequence, args.ToSequence)
	}
	c := &a.fanouts
	key := [2]string{args.TenantID, args.ProjectID}
	c.mu.Lock()
	if c.open == nil {
		c.open = map[[2]string]*fanoutBatch{}
	}
	if b := c.open[key]; b != nil && max(b.to, args.ToSequence)-min(b.from, args.FromSequence) < webhookFanoutChunk {
		b.from, b.to = min(b.from, args.FromSequence), max(b.to, args.ToSequence)
		b.jobs++
		c.mu.Unlock()
		select {
		case <-b.done:
			return 0, b.err
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	b := &fanoutBatch{from: args.FromSequence, to: args.ToSequence, jobs: 1, done: make(chan struct{})}
	c.open[key] = b
	c.mu.Unlock()

	t := time.NewTimer(fanoutWindow)
	select {
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
	}
	c.mu.Lock()
	if c.open[key] == b {
		delete(c.open, key)
	}
	span := args
	span.FromSequence, span.ToSequence = b.from, b.to
	c.mu.Unlock()
	// The run has this job's context: should it end early, the others
	// get its error, and River runs them again.
	b.created, b.err = a.FanOutWebhookDeliveries(ctx, span)
	close(b.done)
	return b.created, b.err
}
