package app

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/jobargs"
	"github.com/aetheriot/aether-audit/secrets"
	"github.com/aetheriot/aether-audit/webhook"
)

// WebhookReads reads webhook destinations, subscriptions and deliveries:
// on the Store each read runs alone, on a Tx in its transaction (with lock,
// a read row stays locked until the commit).
type WebhookReads interface {
	GetWebhookDestination(ctx context.Context, tenantID string, id uuid.UUID, lock bool) (domain.WebhookDestination, error)
	ListWebhookDestinations(ctx context.Context, tenantID, projectID string, after uuid.UUID, limit int) ([]domain.WebhookDestination, error)
	GetWebhookSubscription(ctx context.Context, tenantID string, id uuid.UUID, lock bool) (domain.WebhookSubscription, error)
	ListWebhookSubscriptions(ctx context.Context, tenantID, projectID string, activeOnly bool, after uuid.UUID, limit int) ([]domain.WebhookSubscription, error)
	FanOutWebhookSubscriptions(ctx context.Context, tenantID, projectID string, from, to uint64, limit int) ([]domain.WebhookSubscription, error)
	AuditEventRefs(ctx context.Context, tenantID, projectID string, from, to uint64) ([]domain.AuditEventRef, error)
	GetWebhookDelivery(ctx context.Context, tenantID string, id uuid.UUID, lock bool) (domain.WebhookDelivery, error)
	WebhookDeliveryWithAttempts(ctx context.Context, tenantID string, id uuid.UUID) (domain.WebhookDelivery, error)
	SearchWebhookDeliveries(ctx context.Context, tenantID, projectID string, f domain.WebhookDeliveryFilter, before uuid.UUID, limit int) ([]domain.WebhookDelivery, error)
	WebhookBatchSendContext(ctx context.Context, tenantID string, destinationID uuid.UUID, deliveryIDs, eventIDs []uuid.UUID, now time.Time) (domain.WebhookBatchSendContext, error)
	WebhookRecoveryReads
}

// WebhookStore is what the webhook use cases need of the Store.
type WebhookStore interface {
	WebhookReads
	// SaveWebhookDeliveriesIf saves delivery changes, each only if its
	// delivery is still as it was read: one statement, alone (an attempt's
	// durable intent) or in a Tx.
	SaveWebhookDeliveriesIf(ctx context.Context, changes []domain.WebhookDeliveryChange) ([]uuid.UUID, error)
	WebhookGateStore
}

// WebhookTx is what the webhook use cases do in a transaction.
type WebhookTx interface {
	WebhookStore
	InsertWebhookDestination(ctx context.Context, d domain.WebhookDestination, secret domain.SealedWebhookSecret) error
	RotateWebhookDestinationSecret(ctx context.Context, destinationID uuid.UUID, secret domain.SealedWebhookSecret, graceUntil time.Time) error
	InsertWebhookSubscription(ctx context.Context, sub domain.WebhookSubscription) error
	DisableWebhookSubscription(ctx context.Context, sub domain.WebhookSubscription) error
	// InsertWebhookDeliveries inserts deliveries, all or none: one that
	// exists already fails the transaction with an error wrapping
	// domain.ErrWebhookDeliveryExists that IsRetryable accepts.
	InsertWebhookDeliveries(ctx context.Context, ds []domain.WebhookDelivery) error
	// InsertMissingWebhookDeliveries inserts the deliveries that do not
	// exist yet and returns their ids.
	InsertMissingWebhookDeliveries(ctx context.Context, ds []domain.WebhookDelivery) ([]uuid.UUID, error)
	UpdateWebhookDelivery(ctx context.Context, d domain.WebhookDelivery) error
	SaveWebhookAttempt(ctx context.Context, deliveryID uuid.UUID, a domain.WebhookDeliveryAttempt) error
	// CommitWithoutFlush lets the transaction commit without waiting for
	// the disk; for writes whose loss is detected and repaired.
	CommitWithoutFlush(ctx context.Context) error
	WebhookLifecycleTx
	WebhookRecoveryTx
}

// WebhookSender sends one signed request; *webhook.Sender implements it.
type WebhookSender interface {
	Send(ctx context.Context, r webhook.Request) webhook.Result
}

// WebhookConfig configures webhook destinations and deliveries.
type WebhookConfig struct {
	// Box seals signing secrets at rest; required to create destinations and
	// to send.
	Box *secrets.Box
	// Sender sends deliveries; required to run the delivery worker.
	Sender WebhookSender
	// RetrySchedule is the delays between attempts; default
	// domain.DefaultRetrySchedule.
	RetrySchedule domain.RetrySchedule
	// URLPolicy relaxes destination URL checks, for local development only.
	URLPolicy webhook.URLPolicy
	// MaxInFlightPerDestination bounds this process's concurrent requests to
	// one destination, and its delivery jobs working on one destination at
	// once, so that a slow receiver cannot take every worker; default 8.
	MaxInFlightPerDestination int
	// Breaker configures the destinations' circuit breaker and
	// auto-disable; zero fields take domain.DefaultWebhookBreakerPolicy's.
	Breaker domain.WebhookBreakerPolicy
}

// Limits of the webhook registry.
const (
	// DefaultSecretGracePeriod is how long a rotated-out secret keeps
	// signing when the rotation does not say.
	DefaultSecretGracePeriod = 24 * time.Hour
	// MaxSecretGracePeriod bounds a rotation's grace period.
	MaxSecretGracePeriod = 7 * 24 * time.Hour
	// MaxWebhookDestinationsPerProject bounds a project's destinations.
	MaxWebhookDestinationsPerProject = 100
	// MaxActiveWebhookSubscriptionsPerProject bounds a project's active
	// subscriptions (and so the fan-out of one event).
	MaxActiveWebhookSubscriptionsPerProject = 100
	// MaxWebhookPageSize bounds pages of subscriptions and deliveries.
	MaxWebhookPageSize = 100
	// webhookFanoutChunk is how many events one fan-out transaction covers.
	webhookFanoutChunk = 500
	// destinationWait is how long a delivery waits for a free slot of its
	// destination before it gives its worker back (ErrDestinationBusy).
	destinationWait = time.Second
)

func webhookFanoutJob(tenantID, projectID string, from, to uint64) domain.OutboxJob {
	return domain.OutboxJob{Args: jobargs.WebhookFanoutArgs{TenantID: tenantID, ProjectID: projectID, FromSequence: from, ToSequence: to}}
}

// jobScheduleGranularity is how late River may make a scheduled job
// available (its scheduler runs every few seconds). A retry due sooner is
// enqueued available at once and its worker waits for the due time itself.
const jobScheduleGranularity = 5 * time.Second
