package app

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/secrets"
	"github.com/aetheriot/aether-audit/webhook"
)

// WebhookStore is what the webhook use cases need of persistence.
type WebhookStore interface {
	InsertWebhookDestination(ctx context.Context, d domain.WebhookDestination, secret domain.SealedWebhookSecret) error
	GetWebhookDestination(ctx context.Context, tenantID string, id uuid.UUID, lock bool) (domain.WebhookDestination, error)
	ListWebhookDestinations(ctx context.Context, tenantID, projectID string, after uuid.UUID, limit int) ([]domain.WebhookDestination, error)
	RotateWebhookDestinationSecret(ctx context.Context, destinationID uuid.UUID, secret domain.SealedWebhookSecret, graceUntil time.Time) error

	InsertWebhookSubscription(ctx context.Context, sub domain.WebhookSubscription) error
	GetWebhookSubscription(ctx context.Context, tenantID string, id uuid.UUID, lock bool) (domain.WebhookSubscription, error)
	DisableWebhookSubscription(ctx context.Context, sub domain.WebhookSubscription) error
	ListWebhookSubscriptions(ctx context.Context, tenantID, projectID string, activeOnly bool, after uuid.UUID, limit int) ([]domain.WebhookSubscription, error)
	FanOutWebhookSubscriptions(ctx context.Context, tenantID, projectID string, from, to uint64, limit int) ([]domain.WebhookSubscription, error)

	AuditEventRefs(ctx context.Context, tenantID, projectID string, from, to uint64) ([]domain.AuditEventRef, error)
	InsertWebhookDeliveries(ctx context.Context, ds []domain.WebhookDelivery) ([]uuid.UUID, error)
	GetWebhookDelivery(ctx context.Context, tenantID string, id uuid.UUID, lock bool) (domain.WebhookDelivery, error)
	UpdateWebhookDelivery(ctx context.Context, d domain.WebhookDelivery) error
	WebhookDeliveryWithAttempts(ctx context.Context, tenantID string, id uuid.UUID) (domain.WebhookDelivery, error)
	SearchWebhookDeliveries(ctx context.Context, tenantID, projectID string, f domain.WebhookDeliveryFilter, before uuid.UUID, limit int) ([]domain.WebhookDelivery, error)
	SaveWebhookAttempt(ctx context.Context, deliveryID uuid.UUID, a domain.WebhookDeliveryAttempt) error
	SaveWebhookDeliveriesIf(ctx context.Context, changes []domain.WebhookDeliveryChange) ([]uuid.UUID, error)
	WebhookBatchSendContext(ctx context.Context, tenantID string, destinationID uuid.UUID, deliveryIDs, eventIDs []uuid.UUID, now time.Time) (domain.WebhookBatchSendContext, error)
	// CommitWithoutFlush lets the transaction in ctx commit without waiting
	// for the disk; for writes whose loss is detected and repaired.
	CommitWithoutFlush(ctx context.Context) error
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

// webhookRuntime is the App's webhook configuration with defaults applied
// and the per-destination concurrency limits of this process.
type webhookRuntime struct {
	WebhookConfig
	mu    sync.Mutex
	slots map[uuid.UUID]*destinationSlots
}

// destinationSlots are one destination's limits in this process: jobs
// bounds the delivery jobs working on it at once (so that a slow receiver
// holds at most that many workers), requests the requests in flight to it.
// A job holds its place in jobs from start to end, but a request slot only
// while its request is under way, so that the slots are not idle while
// jobs read and write the database.
type destinationSlots struct {
	jobs, requests chan struct{}
	refs           int
}

func newWebhookRuntime(cfg WebhookConfig) webhookRuntime {
	if len(cfg.RetrySchedule) == 0 {
		cfg.RetrySchedule = domain.DefaultRetrySchedule
	}
	if cfg.MaxInFlightPerDestination <= 0 {
		cfg.MaxInFlightPerDestination = 8
	}
	return webhookRuntime{WebhookConfig: cfg, slots: map[uuid.UUID]*destinationSlots{}}
}

// ErrDestinationBusy is returned by DeliverWebhooks when the destination
// already has its maximum of jobs under way in this process; the worker
// tries again a little later without using an attempt.
var ErrDestinationBusy = fmt.Errorf("webhook destination has too many deliveries under way")

// enter takes a place among the destination's running jobs, waiting up to
// destinationWait; ok is false when none freed in time. leave must be
// called once, after the job's last request.
func (w *webhookRuntime) enter(ctx context.Context, destinationID uuid.UUID) (s *destinationSlots, leave func(), ok bool) {
	w.mu.Lock()
	s = w.slots[destinationID]
	if s == nil {
		s = &destinationSlots{
			jobs:     make(chan struct{}, w.MaxInFlightPerDestination),
			requests: make(chan struct{}, w.MaxInFlightPerDestination),
		}
		w.slots[destinationID] = s
	}
	s.refs++
	w.mu.Unlock()
	done := func() {
		w.mu.Lock()
		if s.refs--; s.refs == 0 {
			delete(w.slots, destinationID)
		}
		w.mu.Unlock()
	}
	select {
	case s.jobs <- struct{}{}:
	default:
		t := time.NewTimer(destinationWait)
		defer t.Stop()
		select {
		case s.jobs <- struct{}{}:
		case <-t.C:
			done()
			return nil, nil, false
		case <-ctx.Done():
			done()
			return nil, nil, false
		}
	}
	return s, func() { <-s.jobs; done() }, true
}

// request takes one of the destination's request slots, waiting for one
// as long as ctx allows (the requests ahead are bounded by the sender's
// timeout); release must be called once the request is over.
func (s *destinationSlots) request(ctx context.Context) (release func(), ok bool) {
	select {
	case s.requests <- struct{}{}:
		return func() { <-s.requests }, true
	case <-ctx.Done():
		return nil, false
	}
}

// The River queue of webhook deliveries, kept apart from other work so that
// slow receivers cannot delay it.
const QueueWebhooks = "webhooks"

// WebhookFanoutArgs is the outbox fact of recorded events: the events of
// tenant/project with sequence in [FromSequence, ToSequence] are to be
// matched against the project's webhook subscriptions.
type WebhookFanoutArgs struct {
	TenantID     string `json:"tenant_id"`
	ProjectID    string `json:"project_id"`
	FromSequence uint64 `json:"from_sequence,string"`
	ToSequence   uint64 `json:"to_sequence,string"`
}

// Kind names the job.
func (WebhookFanoutArgs) Kind() string { return "webhook_fanout" }

func webhookFanoutJob(tenantID, projectID string, from, to uint64) domain.OutboxJob {
	return domain.OutboxJob{Args: WebhookFanoutArgs{TenantID: tenantID, ProjectID: projectID, FromSequence: from, ToSequence: to}}
}

// jobScheduleGranularity is how late River may make a scheduled job
// available (its scheduler runs every few seconds). A retry due sooner is
// enqueued available at once and its worker waits for the due time itself.
const jobScheduleGranularity = 5 * time.Second

// recordCommandEvent appends the audit event of a command of id, in the
// caller's transaction: the command's own evidence, sealed into the
// project's chain like any recorded event (and fanned out to webhooks like
// them).
func (a *App) recordCommandEvent(ctx context.Context, id Identity, projectID, action string, resource domain.Resource, risk domain.Risk, details string, now time.Time) (domain.AuditEvent, error) {
	return a.recordCommandEventWith(ctx, id, projectID, action, resource, domain.Governance{Risk: risk}, details, now)
}

// commandSubject is the audit subject of a command's identity: the system
// for the service's own identities ("system:..."), else the token's subject.
func commandSubject(id Identity) domain.Subject {
	if strings.HasPrefix(id.Subject, "system:") {
		return domain.Subject{Type: domain.SubjectSystem, ID: id.Subject}
	}
	if id.Subject == "" {
		return domain.Subject{Type: domain.SubjectUser, ID: "unknown"}
	}
	return domain.Subject{Type: domain.SubjectUser, ID: id.Subject}
}

// recordCommandEventWith is recordCommandEvent with full governance.
func (a *App) recordCommandEventWith(ctx context.Context, id Identity, projectID, action string, resource domain.Resource, gov domain.Governance, details string, now time.Time) (domain.AuditEvent, error) {
	draft := domain.AuditEventDraft{
		ID:         uuid.Must(uuid.NewV7()),
		ProjectID:  projectID,
		Action:     action,
		OccurredAt: now,
		Subject:    commandSubject(id),
		Resource:   resource,
		Outcome:    domain.OutcomeSuccess,
		Governance: &gov,
		Details:    []byte(details),
	}
	if t := TraceIDFromContext(ctx); t != "" {
		draft.Correlation = &domain.Correlation{TraceID: t}
	}
	if err := draft.Normalize("", now); err != nil {
		return domain.AuditEvent{}, fmt.Errorf("building %s audit event: %w", action, err)
	}
	head, webhooks, err := a.store.LockAuditHead(ctx, id.TenantID, projectID)
	if err != nil {
		return domain.AuditEvent{}, err
	}
	req := &appendRequest{drafts: []domain.AuditEventDraft{draft}, fingerprints: []domain.Hash{draft.Fingerprint()}}
	req.reset()
	if err := a.sealAndInsert(ctx, id.TenantID, projectID, lockedHead{head, webhooks}, newSealBatch(nil), []*appendRequest{req}, now); err != nil {
		return domain.AuditEvent{}, err
	}
	return req.events[0], nil
}

// parseID reads a GraphQL ID that must be a UUID; a malformed one is simply
// not found (it cannot name anything).
func parseID(s string, notFound error) (uuid.UUID, error) {
	u, err := uuid.Parse(s)
	if err != nil {
		return uuid.Nil, notFound
	}
	return u, nil
}

// idPage reads first/after of a list of records keyed by UUID: a page size
// (default DefaultPageSize, at most MaxWebhookPageSize) and the id after
// which the page starts.
func idPage(first *int, after string) (int, uuid.UUID, error) {
	limit := DefaultPageSize
	if first != nil {
		if *first < 1 || *first > MaxWebhookPageSize {
			return 0, uuid.Nil, badInput("first", fmt.Sprintf("must be between 1 and %d", MaxWebhookPageSize))
		}
		limit = *first
	}
	if after == "" {
		return limit, uuid.Nil, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(after)
	if err != nil {
		return 0, uuid.Nil, badInput("after", "is not a cursor of this list")
	}
	id, err := uuid.FromBytes(raw)
	if err != nil {
		return 0, uuid.Nil, badInput("after", "is not a cursor of this list")
	}
	return limit, id, nil
}

// IDCursor is the opaque cursor of a record keyed by UUID (webhook
// subscriptions and deliveries, exports) in its list.
func IDCursor(id uuid.UUID) string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// Page is one page of a list: its items and whether more follow.
type Page[T any] struct {
	Items       []T
	HasNextPage bool
}

// pageOf trims a result fetched with limit+1 rows into a page.
func pageOf[T any](items []T, limit int) Page[T] {
	if len(items) > limit {
		return Page[T]{Items: items[:limit], HasNextPage: true}
	}
	return Page[T]{Items: items}
}

// storedNow is the current time at the precision PostgreSQL keeps
// (microseconds, UTC), so that a command's answer and later reads of what it
// stored show the same instant.
func (a *App) storedNow() time.Time { return a.now().UTC().Truncate(time.Microsecond) }
