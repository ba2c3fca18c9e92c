package app

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"

	"github.com/aetheriot/aether-audit/domain"
)

// MaxReplaySequences bounds the range of one replayWebhookEvents:
// toSequence - fromSequence + 1.
const MaxReplaySequences = 10000

// ReplayWebhookEventsInput delivers a range of a project's events again to
// one subscription.
type ReplayWebhookEventsInput struct {
	SubscriptionID string
	// FromSequence and ToSequence bound the range of project sequences,
	// both included.
	FromSequence, ToSequence uint64
	Confirm                  bool
}

// WebhookReplay is the outcome of a replay: how many deliveries it created,
// and the id of its audit event, which each of them carries as ReplayOf.
type WebhookReplay struct {
	Count    int
	ReplayOf uuid.UUID
}

// ReplayWebhookEvents creates a new delivery, with a new webhook-id, for
// every event of the subscription's project in [FromSequence, ToSequence]
// whose action the subscription's event types match, including events
// recorded before the subscription existed, and enqueues them, in one
// transaction with its audit event (webhook.events.replayed). The range
// ends at the events recorded before the replay; events purged by
// retention are not replayed. A SEQUENCE subscription sends the replayed
// deliveries in order, before its deliveries of later events. Needs
// deliveries:redrive and confirm; the subscription must be ACTIVE (else
// INVALID_STATE); at most MaxReplaySequences sequences.
func (a *App) ReplayWebhookEvents(ctx context.Context, id Identity, in ReplayWebhookEventsInput) (_ WebhookReplay, err error) {
	ctx, span := a.startCommand(ctx, "ReplayWebhookEvents")
	defer func() { a.endCommand(span, err) }()
	if err := a.authorizeCommand(id, PermissionDeliveriesRedrive, tenantScope); err != nil {
		return WebhookReplay{}, err
	}
	if !in.Confirm {
		return WebhookReplay{}, &Error{Code: CodeConfirmationRequired, Field: "confirm",
			Message: "a replay sends events again: repeat with confirm: true"}
	}
	switch {
	case in.FromSequence == 0:
		return WebhookReplay{}, badInput("fromSequence", "must be at least 1")
	case in.ToSequence < in.FromSequence:
		return WebhookReplay{}, badInput("toSequence", "must not be below fromSequence")
	case in.ToSequence-in.FromSequence >= MaxReplaySequences:
		return WebhookReplay{}, badInput("toSequence", fmt.Sprintf("a replay covers at most %d sequences", MaxReplaySequences))
	}
	subID, err := parseID(in.SubscriptionID, ErrWebhookSubscriptionNotFound)
	if err != nil {
		return WebhookReplay{}, err
	}
	var out WebhookReplay
	err = a.retryTx(ctx, func(ctx context.Context, tx Tx) error {
		sub, err := a.visibleSubscription(ctx, tx, id, subID, true)
		if err != nil {
			return err
		}
		if sub.State != domain.WebhookSubscriptionActive {
			return newError(CodeInvalidState, "only an ACTIVE subscription can be replayed to; this one is "+string(sub.State))
		}
		// With the project's head locked, every event through it is
		// committed, and the replay's own event comes after it.
		head, _, err := tx.LockAuditHead(ctx, id.TenantID, sub.ProjectID)
		if err != nil {
			return err
		}
		to := min(in.ToSequence, head.Sequence)
		var refs []domain.AuditEventRef
		if in.FromSequence <= to {
			if refs, err = tx.AuditEventRefs(ctx, id.TenantID, sub.ProjectID, in.FromSequence, to); err != nil {
				return err
			}
		}
		now := a.storedNow()
		maxAttempts := a.webhooks.RetrySchedule.MaxAttempts()
		ds := make([]domain.WebhookDelivery, 0, len(refs))
		for _, ref := range refs {
			if sub.MatchesAction(ref.Action) {
				ds = append(ds, fanoutDelivery(&sub, ref, now, maxAttempts))
			}
		}
		details, _ := json.Marshal(map[string]any{"subscriptionId": sub.ID.String(),
			"fromSequence": fmt.Sprint(in.FromSequence), "toSequence": fmt.Sprint(in.ToSequence), "count": len(ds)})
		event, err := a.recordCommandEvent(ctx, tx, id, sub.ProjectID, "webhook.events.replayed",
			domain.Resource{Type: "webhook_subscription", ID: sub.ID.String()}, domain.RiskMedium, string(details), now)
		if err != nil {
			return err
		}
		for i := range ds {
			// A replay is a new delivery of the pair: an id of its own,
			// of now (the fan-out's is the pair's).
			ds[i].ID = uuid.Must(uuid.NewV7())
			ds[i].IdempotencyKey = domain.WebhookDeliveryIdempotencyKey(ds[i].ID)
			ds[i].ReplayOf = &event.ID
		}
		inserted, err := tx.InsertMissingWebhookDeliveries(ctx, ds)
		if err != nil {
			return err
		}
		if sub.Ordering == domain.WebhookOrderingSequence {
			if err := tx.QueueOrderedWebhookDeliveries(ctx, id.TenantID, inserted); err != nil {
				return err
			}
		}
		out = WebhookReplay{Count: len(inserted), ReplayOf: event.ID}
		return tx.EnqueueJobs(ctx, webhookFirstAttemptJobs(savedDeliveries(ds, inserted))...)
	})
	if err != nil {
		return WebhookReplay{}, err
	}
	return out, nil
}
