package app

import (
	"context"
	"encoding/json"
	"time"

	"github.com/google/uuid"

	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/jobargs"
)

// WebhookRecoveryReads reads what recovery, replay and ordered delivery
// need (on the Store or in a Tx).
type WebhookRecoveryReads interface {
	RecoverableWebhookDeliveries(ctx context.Context, tenantID, projectID string, destinationID uuid.UUID, since time.Time, purgedThrough uint64, limit int) ([]domain.WebhookDelivery, error)
	OrderedWebhookQueue(ctx context.Context, tenantID string, subscriptionID uuid.UUID, limit int) ([]domain.WebhookDelivery, error)
}

// WebhookRecoveryTx is what recovery, replay and ordered delivery write in
// a transaction.
type WebhookRecoveryTx interface {
	// RunWebhookRetriesNow makes the scheduled retry jobs of the packed
	// one-delivery arguments available at once.
	RunWebhookRetriesNow(ctx context.Context, queue, kind string, packed []string) (int, error)
	QueueOrderedWebhookDeliveries(ctx context.Context, tenantID string, ids []uuid.UUID) error
	DequeueOrderedWebhookDeliveries(ctx context.Context, tenantID string, subscriptionID uuid.UUID, ids []uuid.UUID) error
	LockOrderedWebhookSubscriptions(ctx context.Context, tenantID string, ids []uuid.UUID) ([]domain.WebhookOrderedFanout, error)
	SetWebhookSubscriptionFannedOut(ctx context.Context, tenantID string, id uuid.UUID, through uint64) error
	SetWebhookSubscriptionAwake(ctx context.Context, tenantID string, id uuid.UUID, until *time.Time) error
	SetWebhookSubscriptionPausedBy(ctx context.Context, tenantID string, id uuid.UUID, deliveryID *uuid.UUID) error
}

// MaxRecoveredDeliveries bounds the deliveries one recoverWebhookDeliveries
// re-queues; a repeat re-queues the next ones.
const MaxRecoveredDeliveries = 10000

// RecoverWebhookDeliveriesInput re-queues a destination's failed
// deliveries.
type RecoverWebhookDeliveriesInput struct {
	DestinationID string
	// Since selects the deliveries whose last attempt failed at or after it.
	Since   time.Time
	Confirm bool
}

// RecoverWebhookDeliveries re-queues, in one transaction with its audit
// event (webhook.deliveries.recovered), the destination's deliveries whose
// last attempt failed at or after Since: each dead letter is redriven (back
// to PENDING with a fresh budget of attempts, same webhook-id), and each
// RETRYING delivery is tried now instead of at its scheduled time, keeping
// its budget. It returns how many it re-queued, at most
// MaxRecoveredDeliveries, oldest first. Deliveries whose events retention
// purged are left alone. Needs deliveries:redrive and confirm.
func (a *App) RecoverWebhookDeliveries(ctx context.Context, id Identity, in RecoverWebhookDeliveriesInput) (_ int, err error) {
	ctx, span := a.startCommand(ctx, "RecoverWebhookDeliveries")
	defer func() { a.endCommand(span, err) }()
	if err := a.authorizeCommand(id, PermissionDeliveriesRedrive, tenantScope); err != nil {
		return 0, err
	}
	if !in.Confirm {
		return 0, &Error{Code: CodeConfirmationRequired, Field: "confirm",
			Message: "recovering deliveries sends them again: repeat with confirm: true"}
	}
	if in.Since.IsZero() {
		return 0, badInput("since", "is required")
	}
	destID, err := parseID(in.DestinationID, ErrWebhookDestinationNotFound)
	if err != nil {
		return 0, err
	}
	var count int
	err = a.retryTx(ctx, func(ctx context.Context, tx Tx) error {
		dest, err := a.visibleDestination(ctx, tx, id, destID, true)
		if err != nil {
			return err
		}
		purged, err := tx.AuditPurgedPrefix(ctx, dest.TenantID, dest.ProjectID)
		if err != nil {
			return err
		}
		ds, err := tx.RecoverableWebhookDeliveries(ctx, dest.TenantID, dest.ProjectID, dest.ID, in.Since, purged.Through, MaxRecoveredDeliveries)
		if err != nil {
			return err
		}
		now := a.storedNow()
		changes := make([]domain.WebhookDeliveryChange, 0, len(ds))
		for _, d := range ds {
			change := domain.WebhookDeliveryChange{PrevState: d.State, PrevAttempts: d.AttemptCount}
			if err := d.Recover(now, a.webhooks.RetrySchedule.MaxAttempts()); err != nil {
				return err
			}
			change.Delivery = d
			changes = append(changes, change)
		}
		saved, err := tx.SaveWebhookDeliveriesIf(ctx, changes)
		if err != nil {
			return err
		}
		count = len(saved)
		details, _ := json.Marshal(map[string]any{"destinationId": dest.ID.String(), "since": in.Since.UTC(), "count": count})
		if _, err := a.recordCommandEvent(ctx, tx, id, dest.ProjectID, "webhook.deliveries.recovered",
			domain.Resource{Type: "webhook_destination", ID: dest.ID.String()}, domain.RiskMedium, string(details), now); err != nil {
			return err
		}
		recovered := make([]domain.WebhookDelivery, len(changes))
		for i := range changes {
			recovered[i] = changes[i].Delivery
		}
		var (
			redriven []*domain.WebhookDelivery
			packed   []string
			jobs     []domain.OutboxJob
		)
		for _, d := range savedDeliveries(recovered, saved) {
			switch {
			case d.State == domain.WebhookDeliveryPending:
				redriven = append(redriven, d)
			case d.Ordered:
				jobs = append(jobs, webhookDeliveryJob(d, time.Time{}))
			default:
				// Its retry's job is scheduled: make it run now.
				args := jobargs.WebhookDeliveryArgs{}
				args.SetDeliveries(1, func(int) (uuid.UUID, uuid.UUID) { return d.ID, d.EventID })
				packed = append(packed, args.Deliveries)
			}
		}
		if _, err := tx.RunWebhookRetriesNow(ctx, jobargs.QueueWebhooks, jobargs.WebhookDeliveryArgs{}.Kind(), packed); err != nil {
			return err
		}
		return tx.EnqueueJobs(ctx, append(jobs, webhookFirstAttemptJobs(redriven)...)...)
	})
	if err != nil {
		return 0, err
	}
	return count, nil
}
