package app

import (
	"context"
	"fmt"

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
// rescue) creates nothing more.
func (a *App) FanOutWebhookDeliveries(ctx context.Context, args jobargs.WebhookFanoutArgs) (_ int, err error) {
	ctx, span := a.startCommand(ctx, "FanOutWebhookDeliveries")
	defer func() { a.endCommand(span, err) }()
	if args.FromSequence == 0 || args.ToSequence < args.FromSequence {
		return 0, fmt.Errorf("webhook fan-out: bad sequence range [%d, %d]", args.FromSequence, args.ToSequence)
	}
	created := 0
	for from := args.FromSequence; from <= args.ToSequence; from += webhookFanoutChunk {
		to := min(from+webhookFanoutChunk-1, args.ToSequence)
		err := a.retryTx(ctx, func(ctx context.Context, tx Tx) error {
			n, err := a.fanOutChunk(ctx, tx, args.TenantID, args.ProjectID, from, to)
			created += n
			return err
		})
		if err != nil {
			return created, err
		}
	}
	return created, nil
}

// fanOutChunk fans out the events [from, to] in transaction tx.
func (a *App) fanOutChunk(ctx context.Context, tx Tx, tenantID, projectID string, from, to uint64) (int, error) {
	// Subscriptions disabled since these events were recorded still get
	// them; Matches tells which.
	const limit = 4 * MaxActiveWebhookSubscriptionsPerProject
	subs, err := tx.FanOutWebhookSubscriptions(ctx, tenantID, projectID, from, to, limit+1)
	if err != nil || len(subs) == 0 {
		return 0, err
	}
	if len(subs) > limit {
		// Never drop a subscription silently.
		return 0, fmt.Errorf("webhook fan-out of %s/%s [%d, %d]: more than %d subscriptions to match", tenantID, projectID, from, to, limit)
	}
	refs, err := tx.AuditEventRefs(ctx, tenantID, projectID, from, to)
	if err != nil {
		return 0, err
	}
	now := a.storedNow()
	maxAttempts := a.webhooks.RetrySchedule.MaxAttempts()
	ds := make([]domain.WebhookDelivery, 0, min(len(refs)*len(subs), 8192))
	for _, ref := range refs {
		for i := range subs {
			if !subs[i].Matches(ref.Action, ref.Sequence) {
				continue
			}
			id := uuid.Must(uuid.NewV7())
			ds = append(ds, domain.WebhookDelivery{
				ID: id, TenantID: tenantID, ProjectID: projectID, SubscriptionID: subs[i].ID,
				DestinationID: subs[i].DestinationID, EventID: ref.ID, EventSequence: ref.Sequence,
				EventType: ref.Action, IdempotencyKey: domain.WebhookDeliveryIdempotencyKey(id),
				State: domain.WebhookDeliveryPending, MaxAttempts: maxAttempts,
				CreatedAt: now, UpdatedAt: now,
			})
		}
	}
	inserted, err := tx.InsertWebhookDeliveries(ctx, ds)
	if err != nil || len(inserted) == 0 {
		return 0, err
	}
	return len(inserted), tx.EnqueueJobs(ctx, webhookFirstAttemptJobs(savedDeliveries(ds, inserted))...)
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
