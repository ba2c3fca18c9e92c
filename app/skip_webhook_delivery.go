package app

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/aetheriot/aether-audit/domain"
)

// SkipWebhookDelivery ends a dead-lettered delivery as SKIPPED, for good:
// it will not be sent again, and an ordered subscription that it held goes
// on with its next delivery (its job is enqueued in the same transaction as
// the change and the audit event, webhook.delivery.skipped). Needs
// deliveries:redrive and confirm; only a DEAD_LETTERED delivery can be
// skipped (else INVALID_STATE).
func (a *App) SkipWebhookDelivery(ctx context.Context, id Identity, deliveryID string, confirm bool) (_ domain.WebhookDelivery, err error) {
	ctx, span := a.startCommand(ctx, "SkipWebhookDelivery")
	defer func() { a.endCommand(span, err) }()
	if err := a.authorizeCommand(id, PermissionDeliveriesRedrive, tenantScope); err != nil {
		return domain.WebhookDelivery{}, err
	}
	if !confirm {
		return domain.WebhookDelivery{}, &Error{Code: CodeConfirmationRequired, Field: "confirm",
			Message: "a skipped delivery is never sent: repeat with confirm: true"}
	}
	dID, err := parseID(deliveryID, ErrWebhookDeliveryNotFound)
	if err != nil {
		return domain.WebhookDelivery{}, err
	}
	err = a.retryTx(ctx, func(ctx context.Context, tx Tx) error {
		d, err := tx.GetWebhookDelivery(ctx, id.TenantID, dID, true)
		if errors.Is(err, domain.ErrNotFound) || err == nil && !id.CanAccessProject(d.ProjectID) {
			return ErrWebhookDeliveryNotFound
		}
		if err != nil {
			return err
		}
		now := a.storedNow()
		if err := d.Skip(now); err != nil {
			return &Error{Code: CodeInvalidState, Message: err.Error() + "; this one is " + string(d.State), Err: err}
		}
		// The subscription before the project's head, as disabling and
		// replaying lock them.
		var sub domain.WebhookSubscription
		if d.Ordered {
			if sub, err = tx.GetWebhookSubscription(ctx, d.TenantID, d.SubscriptionID, true); err != nil {
				return err
			}
		}
		details, _ := json.Marshal(map[string]any{"deliveryId": d.ID.String(), "subscriptionId": d.SubscriptionID.String(),
			"eventId": d.EventID.String(), "idempotencyKey": d.IdempotencyKey})
		if _, err := a.recordCommandEvent(ctx, tx, id, d.ProjectID, "webhook.delivery.skipped",
			domain.Resource{Type: "webhook_delivery", ID: d.ID.String()}, domain.RiskMedium, string(details), now); err != nil {
			return err
		}
		if err := tx.UpdateWebhookDelivery(ctx, d); err != nil {
			return err
		}
		if !d.Ordered {
			return nil
		}
		if sub.PausedByDeliveryID != nil && *sub.PausedByDeliveryID == d.ID {
			if err := tx.SetWebhookSubscriptionPausedBy(ctx, d.TenantID, sub.ID, nil); err != nil {
				return err
			}
		}
		return tx.EnqueueJobs(ctx, orderedDeliveryJob(d.TenantID, d.SubscriptionID, time.Time{}))
	})
	if err != nil {
		return domain.WebhookDelivery{}, err
	}
	return a.store.WebhookDeliveryWithAttempts(ctx, id.TenantID, dID)
}
