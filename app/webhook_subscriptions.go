package app

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/aetheriot/aether-audit/domain"
)

// ErrWebhookSubscriptionNotFound answers a lookup of a subscription that is
// missing or not visible to the caller.
var ErrWebhookSubscriptionNotFound = newError(CodeNotFound, "webhook subscription not found")

const operationCreateWebhookSubscription = "createWebhookSubscription"

// CreateWebhookSubscriptionInput subscribes a destination to a project's
// audit events.
type CreateWebhookSubscriptionInput struct {
	ProjectID     string
	DestinationID string
	// EventTypes are audit actions, exact or "prefix.*"; 1 to 50.
	EventTypes  []string
	Description string
	// IdempotencyKey, when set, makes the call idempotent: a repeat with the
	// same input returns the first call's subscription; with other input it
	// fails with IDEMPOTENCY_CONFLICT.
	IdempotencyKey string
	// Ordering is UNORDERED (the default, when empty) or SEQUENCE.
	Ordering domain.WebhookOrdering
}

// CreateWebhookSubscription subscribes a destination of the same project to
// the audit events whose action matches EventTypes. The subscription
// receives the events recorded after its own creation event
// (webhook.subscription.created), written in the same transaction. Needs
// webhooks:write.
func (a *App) CreateWebhookSubscription(ctx context.Context, id Identity, in CreateWebhookSubscriptionInput) (_ domain.WebhookSubscription, err error) {
	ctx, span := a.startCommand(ctx, "CreateWebhookSubscription")
	defer func() { a.endCommand(span, err) }()
	if err := a.authorizeCommand(id, PermissionWebhooksWrite, in.ProjectID); err != nil {
		return domain.WebhookSubscription{}, err
	}
	types, err := domain.ParseWebhookEventTypes("eventTypes", in.EventTypes)
	if err != nil {
		return domain.WebhookSubscription{}, err
	}
	if err := checkDescription(in.Description); err != nil {
		return domain.WebhookSubscription{}, err
	}
	if err := checkIdempotencyKey(in.IdempotencyKey); err != nil {
		return domain.WebhookSubscription{}, err
	}
	if in.Ordering == "" {
		in.Ordering = domain.WebhookOrderingUnordered
	}
	if !in.Ordering.Valid() {
		return domain.WebhookSubscription{}, badInput("ordering", "must be UNORDERED or SEQUENCE")
	}
	destID, err := parseID(in.DestinationID, ErrWebhookDestinationNotFound)
	if err != nil {
		return domain.WebhookSubscription{}, err
	}
	var out domain.WebhookSubscription
	subID := uuid.Must(uuid.NewV7())
	err = a.retryTx(ctx, func(ctx context.Context, tx Tx) error {
		if in.IdempotencyKey != "" {
			fp := subscriptionFingerprint(in.ProjectID, destID, types, in.Description, in.Ordering)
			prev, found, err := a.claimIdempotentID(ctx, tx, id.TenantID, operationCreateWebhookSubscription, in.IdempotencyKey, fp, subID)
			if err != nil {
				return err
			}
			if found {
				out, err = tx.GetWebhookSubscription(ctx, id.TenantID, prev, false)
				return err
			}
		}
		d, err := a.visibleDestination(ctx, tx, id, destID, false)
		if err != nil {
			return err
		}
		if d.ProjectID != in.ProjectID {
			return ErrWebhookDestinationNotFound
		}
		now := a.storedNow()
		sub := domain.WebhookSubscription{
			ID: subID, TenantID: id.TenantID, ProjectID: in.ProjectID, DestinationID: d.ID,
			EventTypes: types, Description: in.Description, State: domain.WebhookSubscriptionActive,
			CreatedAt: now, CreatedBy: id.Subject, Ordering: in.Ordering,
		}
		fields := map[string]any{"subscriptionId": sub.ID.String(), "destinationId": d.ID.String(), "eventTypes": types}
		if in.Ordering == domain.WebhookOrderingSequence {
			fields["ordering"] = in.Ordering
		}
		details, _ := json.Marshal(fields)
		// The creation event locks the project's head: from here on no
		// event of the project commits between it and the subscription.
		event, err := a.recordCommandEvent(ctx, tx, id, in.ProjectID, "webhook.subscription.created",
			domain.Resource{Type: "webhook_subscription", ID: sub.ID.String()}, domain.RiskMedium, string(details), now)
		if err != nil {
			return err
		}
		active, err := tx.ListWebhookSubscriptions(ctx, id.TenantID, in.ProjectID, true, uuid.Nil, MaxActiveWebhookSubscriptionsPerProject)
		if err != nil {
			return err
		}
		if len(active) >= MaxActiveWebhookSubscriptionsPerProject {
			return newError(CodeQuotaExceeded, fmt.Sprintf("a project has at most %d active webhook subscriptions", MaxActiveWebhookSubscriptionsPerProject))
		}
		sub.AfterSequence = event.Sequence
		if sub.Ordering == domain.WebhookOrderingSequence {
			sub.FannedOutThrough = event.Sequence
		}
		if err := tx.InsertWebhookSubscription(ctx, sub); err != nil {
			return err
		}
		out = sub
		return nil
	})
	if err != nil {
		return domain.WebhookSubscription{}, err
	}
	return out, nil
}

func subscriptionFingerprint(projectID string, destID uuid.UUID, types []string, description string, ordering domain.WebhookOrdering) domain.Hash {
	parts := []any{projectID, destID, types, description}
	if ordering == domain.WebhookOrderingSequence {
		parts = append(parts, ordering) // UNORDERED keeps the fingerprints of before
	}
	b, _ := json.Marshal(parts)
	return sha256.Sum256(b)
}

// DisableWebhookSubscription moves a subscription to DISABLED: no new
// deliveries are created for it. Disabling a disabled subscription is a
// successful no-op (and is not audited again); there is no way back. Needs
// webhooks:write; audited as webhook.subscription.disabled.
func (a *App) DisableWebhookSubscription(ctx context.Context, id Identity, subscriptionID string) (_ domain.WebhookSubscription, err error) {
	ctx, span := a.startCommand(ctx, "DisableWebhookSubscription")
	defer func() { a.endCommand(span, err) }()
	if err := a.authorizeCommand(id, PermissionWebhooksWrite, tenantScope); err != nil {
		return domain.WebhookSubscription{}, err
	}
	subID, err := parseID(subscriptionID, ErrWebhookSubscriptionNotFound)
	if err != nil {
		return domain.WebhookSubscription{}, err
	}
	var out domain.WebhookSubscription
	err = a.retryTx(ctx, func(ctx context.Context, tx Tx) error {
		sub, err := a.visibleSubscription(ctx, tx, id, subID, true)
		if err != nil {
			return err
		}
		now := a.storedNow()
		if sub.State == domain.WebhookSubscriptionDisabled {
			out = sub
			return nil
		}
		details, _ := json.Marshal(map[string]string{"subscriptionId": sub.ID.String()})
		event, err := a.recordCommandEvent(ctx, tx, id, sub.ProjectID, "webhook.subscription.disabled",
			domain.Resource{Type: "webhook_subscription", ID: sub.ID.String()}, domain.RiskMedium, string(details), now)
		if err != nil {
			return err
		}
		// Events recorded before the disable event are still delivered.
		sub.Disable(now, event.Sequence)
		if err := tx.DisableWebhookSubscription(ctx, sub); err != nil {
			return err
		}
		out = sub
		return nil
	})
	if err != nil {
		return domain.WebhookSubscription{}, err
	}
	return out, nil
}

// visibleSubscription reads, through r (the Store, or a Tx), a subscription
// of id's tenant in one of its projects; anything else is
// ErrWebhookSubscriptionNotFound.
func (a *App) visibleSubscription(ctx context.Context, r WebhookReads, id Identity, subID uuid.UUID, lock bool) (domain.WebhookSubscription, error) {
	sub, err := r.GetWebhookSubscription(ctx, id.TenantID, subID, lock)
	if errors.Is(err, domain.ErrNotFound) || err == nil && !id.CanAccessProject(sub.ProjectID) {
		return domain.WebhookSubscription{}, ErrWebhookSubscriptionNotFound
	}
	return sub, err
}

// WebhookSubscription returns one subscription. Needs webhooks:read; another
// tenant's or project's subscription is not found.
func (a *App) WebhookSubscription(ctx context.Context, id Identity, subscriptionID string) (domain.WebhookSubscription, error) {
	if err := authorize(id, PermissionWebhooksRead, tenantScope); err != nil {
		return domain.WebhookSubscription{}, err
	}
	subID, err := parseID(subscriptionID, ErrWebhookSubscriptionNotFound)
	if err != nil {
		return domain.WebhookSubscription{}, err
	}
	return a.visibleSubscription(ctx, a.store, id, subID, false)
}

// WebhookSubscriptions returns a page of a project's subscriptions, oldest
// first. Needs webhooks:read.
func (a *App) WebhookSubscriptions(ctx context.Context, id Identity, projectID string, first *int, after string) (Page[domain.WebhookSubscription], error) {
	if err := authorize(id, PermissionWebhooksRead, projectID); err != nil {
		return Page[domain.WebhookSubscription]{}, err
	}
	limit, afterID, err := idPage(first, after)
	if err != nil {
		return Page[domain.WebhookSubscription]{}, err
	}
	subs, err := a.store.ListWebhookSubscriptions(ctx, id.TenantID, projectID, false, afterID, limit+1)
	if err != nil {
		return Page[domain.WebhookSubscription]{}, err
	}
	return pageOf(subs, limit), nil
}
