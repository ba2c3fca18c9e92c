package app

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/aetheriot/aether-audit/domain"
)

// ErrWebhookDeliveryNotFound answers a lookup of a delivery that is missing
// or not visible to the caller.
var ErrWebhookDeliveryNotFound = newError(CodeNotFound, "webhook delivery not found")

// WebhookDelivery returns one delivery with its attempts. Needs
// webhooks:read; another tenant's or project's delivery is not found.
func (a *App) WebhookDelivery(ctx context.Context, id Identity, deliveryID string) (domain.WebhookDelivery, error) {
	if err := authorize(id, PermissionWebhooksRead, tenantScope); err != nil {
		return domain.WebhookDelivery{}, err
	}
	dID, err := parseID(deliveryID, ErrWebhookDeliveryNotFound)
	if err != nil {
		return domain.WebhookDelivery{}, err
	}
	d, err := a.store.WebhookDeliveryWithAttempts(ctx, id.TenantID, dID)
	if errors.Is(err, domain.ErrNotFound) || err == nil && !id.CanAccessProject(d.ProjectID) {
		return domain.WebhookDelivery{}, ErrWebhookDeliveryNotFound
	}
	return d, err
}

// WebhookDeliveriesInput selects a page of a project's deliveries.
type WebhookDeliveriesInput struct {
	ProjectID      string
	SubscriptionID string
	EventID        string
	State          domain.WebhookDeliveryState
	First          *int
	After          string
}

// WebhookDeliveries returns a page of a project's deliveries, newest first,
// each with its attempts; filters by subscription, event and state (e.g.
// DEAD_LETTERED for the dead letters). Needs webhooks:read.
func (a *App) WebhookDeliveries(ctx context.Context, id Identity, in WebhookDeliveriesInput) (Page[domain.WebhookDelivery], error) {
	if err := authorize(id, PermissionWebhooksRead, in.ProjectID); err != nil {
		return Page[domain.WebhookDelivery]{}, err
	}
	limit, before, err := idPage(in.First, in.After)
	if err != nil {
		return Page[domain.WebhookDelivery]{}, err
	}
	f := domain.WebhookDeliveryFilter{State: in.State}
	if in.State != "" && !in.State.Valid() {
		return Page[domain.WebhookDelivery]{}, badInput("filter.state", "is not a delivery state")
	}
	if in.SubscriptionID != "" {
		if f.SubscriptionID, err = uuid.Parse(in.SubscriptionID); err != nil {
			return Page[domain.WebhookDelivery]{}, badInput("filter.subscriptionId", "must be a subscription id")
		}
	}
	if in.EventID != "" {
		if f.EventID, err = uuid.Parse(in.EventID); err != nil {
			return Page[domain.WebhookDelivery]{}, badInput("filter.eventId", "must be an audit event id")
		}
	}
	ds, err := a.store.SearchWebhookDeliveries(ctx, id.TenantID, in.ProjectID, f, before, limit+1)
	if err != nil {
		return Page[domain.WebhookDelivery]{}, err
	}
	return pageOf(ds, limit), nil
}

// RedriveWebhookDelivery sends a dead-lettered delivery again: it goes back
// to PENDING with a fresh budget of attempts (the retry schedule), keeps its
// webhook-id and attempt history, and its job is enqueued in the same
// transaction as the change and its audit event
// (webhook.delivery.redriven). Needs deliveries:redrive and confirm; only a
// DEAD_LETTERED delivery can be redriven (else INVALID_STATE).
func (a *App) RedriveWebhookDelivery(ctx context.Context, id Identity, deliveryID string, confirm bool) (_ domain.WebhookDelivery, err error) {
	ctx, span := a.startCommand(ctx, "RedriveWebhookDelivery")
	defer func() { a.endCommand(span, err) }()
	if err := a.authorizeCommand(id, PermissionDeliveriesRedrive, tenantScope); err != nil {
		return domain.WebhookDelivery{}, err
	}
	if !confirm {
		return domain.WebhookDelivery{}, &Error{Code: CodeConfirmationRequired, Field: "confirm",
			Message: "redriving a delivery sends it again: repeat with confirm: true"}
	}
	dID, err := parseID(deliveryID, ErrWebhookDeliveryNotFound)
	if err != nil {
		return domain.WebhookDelivery{}, err
	}
	var out domain.WebhookDelivery
	err = a.retryTx(ctx, func(ctx context.Context, tx Tx) error {
		d, err := tx.GetWebhookDelivery(ctx, id.TenantID, dID, true)
		if errors.Is(err, domain.ErrNotFound) || err == nil && !id.CanAccessProject(d.ProjectID) {
			return ErrWebhookDeliveryNotFound
		}
		if err != nil {
			return err
		}
		purged, err := tx.AuditPurgedPrefix(ctx, d.TenantID, d.ProjectID)
		if err != nil {
			return err
		}
		if d.EventSequence <= purged.Through {
			return newError(CodeInvalidState, "the delivery's audit event was purged by retention: there is nothing left to send")
		}
		now := a.storedNow()
		if err := d.Redrive(now, a.webhooks.RetrySchedule.MaxAttempts()); err != nil {
			return &Error{Code: CodeInvalidState, Message: err.Error() + "; this one is " + string(d.State), Err: err}
		}
		details, _ := json.Marshal(map[string]any{"deliveryId": d.ID.String(), "subscriptionId": d.SubscriptionID.String(),
			"eventId": d.EventID.String(), "idempotencyKey": d.IdempotencyKey})
		if _, err := a.recordCommandEvent(ctx, tx, id, d.ProjectID, "webhook.delivery.redriven",
			domain.Resource{Type: "webhook_delivery", ID: d.ID.String()}, domain.RiskMedium, string(details), now); err != nil {
			return err
		}
		if err := tx.UpdateWebhookDelivery(ctx, d); err != nil {
			return err
		}
		if err := tx.EnqueueJobs(ctx, webhookDeliveryJob(&d, time.Time{})); err != nil {
			return err
		}
		out = d
		return nil
	})
	if err != nil {
		return domain.WebhookDelivery{}, err
	}
	return a.store.WebhookDeliveryWithAttempts(ctx, id.TenantID, out.ID)
}
