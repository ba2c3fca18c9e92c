package domain

import (
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Limits of webhook registrations.
const (
	// MaxWebhookEventTypes bounds the allowlist of one subscription.
	MaxWebhookEventTypes = 50
	// MaxWebhookDescriptionLength bounds descriptions, in bytes.
	MaxWebhookDescriptionLength = 1024
)

// WebhookDestination is a tenant's registered receiver: an HTTPS URL and
// signing secrets. The secrets never leave the store in plaintext except
// once, at creation or rotation; other records hold only the destination's
// ID.
type WebhookDestination struct {
	ID          uuid.UUID
	TenantID    string
	ProjectID   string
	URL         string
	Description string
	CreatedAt   time.Time
	CreatedBy   string
	// SecretRotatedAt is when the secret was last rotated; nil if never.
	SecretRotatedAt *time.Time
	// ActiveSecrets counts the secrets that currently sign deliveries: one,
	// or more during a rotation's grace period.
	ActiveSecrets int
	// State, DisabledReason and DisabledAt are its lifecycle; DeletedAt is
	// set once it was deleted (webhook_destination_lifecycle.go).
	State          WebhookDestinationState
	DisabledReason string
	DisabledAt     *time.Time
	DeletedAt      *time.Time
	// RateLimitPerSecond bounds its requests per second across all
	// processes; 0 for no limit. MaxInFlight bounds its concurrent requests
	// per process; 0 for the service's default.
	RateLimitPerSecond int
	MaxInFlight        int
	// Headers are sent with every request (ParseWebhookHeaders).
	Headers []WebhookHeader
	// Health is its circuit breaker and recent outcomes
	// (webhook_destination_health.go).
	Health WebhookDestinationHealth
}

// WebhookSubscriptionState is the lifecycle state of a subscription:
// ACTIVE -> DISABLED, never back.
type WebhookSubscriptionState string

// The subscription states.
const (
	WebhookSubscriptionActive   WebhookSubscriptionState = "ACTIVE"
	WebhookSubscriptionDisabled WebhookSubscriptionState = "DISABLED"
)

// WebhookSubscription sends the audit events of a project whose action
// matches EventTypes to a destination.
type WebhookSubscription struct {
	ID            uuid.UUID
	TenantID      string
	ProjectID     string
	DestinationID uuid.UUID
	EventTypes    []string
	Description   string
	State         WebhookSubscriptionState
	// AfterSequence is the project sequence of the subscription's own
	// creation event: it receives the events recorded after it.
	AfterSequence uint64
	CreatedAt     time.Time
	CreatedBy     string
	DisabledAt    *time.Time
	// DisabledSequence is, once disabled, the project sequence of the
	// disable event: the subscription still receives the events before it.
	DisabledSequence uint64
	// Ordering says whether deliveries go one after the other
	// (WebhookOrderingSequence) or each on its own (the default).
	Ordering WebhookOrdering
	// FannedOutThrough is, for a SEQUENCE subscription, the project sequence
	// through which its deliveries were created, in order and without gap.
	FannedOutThrough uint64
	// PausedByDeliveryID is, for a SEQUENCE subscription, the dead letter
	// that holds its later deliveries until it is redriven or skipped.
	PausedByDeliveryID *uuid.UUID
}

// ParseWebhookEventTypes validates an allowlist: 1 to MaxWebhookEventTypes
// entries, each an action or a "prefix.*" pattern (see ParseActionPattern).
// Duplicates are removed, keeping the first.
func ParseWebhookEventTypes(field string, types []string) ([]string, error) {
	if len(types) == 0 {
		return nil, invalid(field, "must contain at least one event type")
	}
	if len(types) > MaxWebhookEventTypes {
		return nil, invalid(field, "must contain at most %d event types", MaxWebhookEventTypes)
	}
	out := make([]string, 0, len(types))
	seen := make(map[string]bool, len(types))
	for i, t := range types {
		if _, err := ParseActionPattern(fmt.Sprintf("%s[%d]", field, i), t); err != nil {
			return nil, err
		}
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out, nil
}

// Matches reports whether the subscription wants an event with this action
// and sequence: the event came after the subscription and, for a disabled
// one, before its disable, and the action matches one of its event types.
func (s *WebhookSubscription) Matches(action string, sequence uint64) bool {
	if sequence <= s.AfterSequence {
		return false
	}
	if s.State != WebhookSubscriptionActive && sequence >= s.DisabledSequence {
		return false
	}
	return s.MatchesAction(action)
}

// MatchesAction reports whether action matches one of the subscription's
// event types, whatever the event's sequence (a replay's matching).
func (s *WebhookSubscription) MatchesAction(action string) bool {
	for _, t := range s.EventTypes {
		if base, ok := strings.CutSuffix(t, ".*"); ok {
			if strings.HasPrefix(action, base+".") {
				return true
			}
		} else if action == t {
			return true
		}
	}
	return false
}

// Disable moves the subscription to DISABLED as of the project sequence of
// its disable event. It reports false, and changes nothing, when it already
// is.
func (s *WebhookSubscription) Disable(now time.Time, sequence uint64) bool {
	if s.State == WebhookSubscriptionDisabled {
		return false
	}
	s.State = WebhookSubscriptionDisabled
	s.DisabledAt = &now
	s.DisabledSequence = sequence
	return true
}

// WebhookDeliveryState is the lifecycle state of a delivery:
//
//	PENDING -> DELIVERING -> DELIVERED
//	                      \-> RETRYING -> DELIVERING
//	                      \-> DEAD_LETTERED -> PENDING (explicit redrive)
//	PENDING, RETRYING -> PAUSED -> PENDING (destination disabled, enabled)
//	PENDING, RETRYING, PAUSED -> CANCELLED (destination deleted)
//	                                        \-> SKIPPED (explicit skip)
type WebhookDeliveryState string

// The delivery states.
const (
	WebhookDeliveryPending      WebhookDeliveryState = "PENDING"
	WebhookDeliveryDelivering   WebhookDeliveryState = "DELIVERING"
	WebhookDeliveryDelivered    WebhookDeliveryState = "DELIVERED"
	WebhookDeliveryRetrying     WebhookDeliveryState = "RETRYING"
	WebhookDeliveryDeadLettered WebhookDeliveryState = "DEAD_LETTERED"
	// WebhookDeliverySkipped ends a dead letter passed over by
	// skipWebhookDelivery, so that an ordered subscription goes on.
	WebhookDeliverySkipped WebhookDeliveryState = "SKIPPED"
)

// Valid reports whether s is a defined delivery state.
func (s WebhookDeliveryState) Valid() bool {
	switch s {
	case WebhookDeliveryPending, WebhookDeliveryDelivering, WebhookDeliveryDelivered,
		WebhookDeliveryRetrying, WebhookDeliveryDeadLettered, WebhookDeliveryPaused, WebhookDeliveryCancelled,
		WebhookDeliverySkipped:
		return true
	}
	return false
}

// WebhookAttemptOutcome is what became of one attempt.
type WebhookAttemptOutcome string

// The attempt outcomes. DELIVERING is an attempt whose request is (or was)
// under way; a DELIVERING attempt found after its worker is gone becomes
// UNKNOWN: the receiver may or may not have it.
const (
	WebhookAttemptDelivering WebhookAttemptOutcome = "DELIVERING"
	WebhookAttemptSucceeded  WebhookAttemptOutcome = "SUCCEEDED"
	WebhookAttemptFailed     WebhookAttemptOutcome = "FAILED"
	WebhookAttemptUnknown    WebhookAttemptOutcome = "UNKNOWN"
)

// WebhookDelivery is one audit event on its way to one subscription's
// destination.
type WebhookDelivery struct {
	ID             uuid.UUID
	TenantID       string
	ProjectID      string
	SubscriptionID uuid.UUID
	DestinationID  uuid.UUID
	EventID        uuid.UUID
	EventSequence  uint64
	EventType      string
	// IdempotencyKey is sent as webhook-id on every attempt, retry and
	// redrive.
	IdempotencyKey string
	State          WebhookDeliveryState
	// AttemptCount counts the attempts started so far.
	AttemptCount int
	// MaxAttempts is the attempt number after whose failure the delivery is
	// dead-lettered.
	MaxAttempts    int
	NextAttemptAt  *time.Time
	CreatedAt      time.Time
	UpdatedAt      time.Time
	DeliveredAt    *time.Time
	DeadLetteredAt *time.Time
	// LastError describes the last failed attempt.
	LastError string
	// Attempts are filled by queries that ask for them, oldest first.
	Attempts []WebhookDeliveryAttempt
	// Succeeded is, for a DELIVERED delivery read from the store, the
	// attempt that delivered it when the delivery's own row keeps it (no
	// attempt row is written for a succeeded attempt: it is always the
	// last); nil otherwise, and for a delivery delivered before rows kept
	// it, whose succeeded attempt has a row of its own. Queries that fill
	// Attempts list it there too.
	Succeeded *WebhookDeliveryAttempt
	// ReplayOf is, for a delivery created by a replay, the id of that
	// replay's audit event (webhook.events.replayed); nil otherwise.
	ReplayOf *uuid.UUID
	// Ordered tells that the delivery belongs to a SEQUENCE subscription:
	// it is sent only after the subscription's earlier deliveries.
	Ordered bool
}

// WebhookDeliveryIdempotencyKey is the stable webhook-id of a delivery:
// "msg_" and the id's 32 lower-case hex digits, built in one allocation.
func WebhookDeliveryIdempotencyKey(deliveryID uuid.UUID) string {
	var b [len(idempotencyKeyPrefix) + 2*len(uuid.UUID{})]byte
	copy(b[:], idempotencyKeyPrefix)
	hex.Encode(b[len(idempotencyKeyPrefix):], deliveryID[:])
	return string(b[:])
}

// idempotencyKeyPrefix starts every webhook-id.
const idempotencyKeyPrefix = "msg_"

// StartAttempt moves a PENDING or RETRYING delivery to DELIVERING and
// returns the new attempt's number.
func (d *WebhookDelivery) StartAttempt(now time.Time) (int, error) {
	if d.State != WebhookDeliveryPending && d.State != WebhookDeliveryRetrying {
		return 0, fmt.Errorf("webhook delivery %s: cannot start an attempt in state %s", d.ID, d.State)
	}
	d.State = WebhookDeliveryDelivering
	d.AttemptCount++
	d.NextAttemptAt = nil
	d.UpdatedAt = now
	return d.AttemptCount, nil
}

// AttemptUnderWay returns the attempt a DELIVERING delivery has under way:
// its number is AttemptCount and it started at UpdatedAt (StartAttempt set
// both, and nothing else moves a DELIVERING delivery). ok is false in any
// other state. The attempt's own evidence row is written when it ends.
func (d WebhookDelivery) AttemptUnderWay() (a WebhookDeliveryAttempt, ok bool) {
	if d.State != WebhookDeliveryDelivering || d.AttemptCount < 1 {
		return a, false
	}
	return WebhookDeliveryAttempt{Number: d.AttemptCount, Outcome: WebhookAttemptDelivering, StartedAt: d.UpdatedAt}, true
}

// Succeed moves a DELIVERING delivery to DELIVERED.
func (d *WebhookDelivery) Succeed(now time.Time) error {
	if d.State != WebhookDeliveryDelivering {
		return fmt.Errorf("webhook delivery %s: cannot succeed in state %s", d.ID, d.State)
	}
	d.State = WebhookDeliveryDelivered
	d.DeliveredAt = &now
	d.LastError = ""
	d.UpdatedAt = now
	return nil
}

// Fail records a failed (or unknown) attempt of a DELIVERING delivery: it
// retries at next when attempts remain, and is dead-lettered otherwise. It
// reports whether a retry is due.
func (d *WebhookDelivery) Fail(now, next time.Time, reason string) (bool, error) {
	if d.State != WebhookDeliveryDelivering {
		return false, fmt.Errorf("webhook delivery %s: cannot fail in state %s", d.ID, d.State)
	}
	d.LastError = reason
	d.UpdatedAt = now
	if d.AttemptCount >= d.MaxAttempts {
		d.State = WebhookDeliveryDeadLettered
		d.DeadLetteredAt = &now
		d.NextAttemptAt = nil
		return false, nil
	}
	d.State = WebhookDeliveryRetrying
	d.NextAttemptAt = &next
	return true, nil
}

// ErrWebhookDeliveryNotDeadLettered is returned by Redrive for a delivery
// that is not DEAD_LETTERED.
var ErrWebhookDeliveryNotDeadLettered = fmt.Errorf("only a dead-lettered delivery can be redriven")

// Redrive moves a DEAD_LETTERED delivery back to PENDING with a fresh budget
// of attempts, keeping its idempotency key and its attempt history.
func (d *WebhookDelivery) Redrive(now time.Time, attempts int) error {
	if d.State != WebhookDeliveryDeadLettered {
		return ErrWebhookDeliveryNotDeadLettered
	}
	d.State = WebhookDeliveryPending
	d.MaxAttempts = d.AttemptCount + attempts
	d.DeadLetteredAt = nil
	d.NextAttemptAt = &now
	d.UpdatedAt = now
	return nil
}

// WebhookDeliveryAttempt is the evidence of one attempt.
type WebhookDeliveryAttempt struct {
	Number     int
	Outcome    WebhookAttemptOutcome
	StartedAt  time.Time
	FinishedAt *time.Time
	// StatusCode is the receiver's HTTP status; nil without a response.
	StatusCode *int
	Latency    time.Duration
	// ErrorClass names the kind of failure (e.g. http_status, timeout,
	// ssrf_blocked); empty on success.
	ErrorClass string
	Error      string
	// ResponseBody holds at most 4 KiB of the receiver's response.
	ResponseBody string
}

// RetrySchedule is the delays between a delivery's attempts: a schedule of
// N delays allows at most N+1 attempts.
type RetrySchedule []time.Duration

// DefaultRetrySchedule is 5s, 1m, 5m, 30m, 2h, 6h, 12h, 24h: nine attempts
// over about 45 hours.
var DefaultRetrySchedule = RetrySchedule{
	5 * time.Second, time.Minute, 5 * time.Minute, 30 * time.Minute,
	2 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour,
}

// MaxRetryDelay bounds one delay of a schedule, and a receiver's Retry-After.
const MaxRetryDelay = 7 * 24 * time.Hour

// ParseRetrySchedule reads a comma-separated list of Go durations such as
// "200ms,400ms,800ms". Each must be positive and at most MaxRetryDelay; at
// most 20 entries. An empty string gives the DefaultRetrySchedule.
func ParseRetrySchedule(s string) (RetrySchedule, error) {
	if strings.TrimSpace(s) == "" {
		return DefaultRetrySchedule, nil
	}
	parts := strings.Split(s, ",")
	if len(parts) > 20 {
		return nil, fmt.Errorf("retry schedule: at most 20 delays, got %d", len(parts))
	}
	out := make(RetrySchedule, len(parts))
	for i, p := range parts {
		d, err := time.ParseDuration(strings.TrimSpace(p))
		if err != nil {
			return nil, fmt.Errorf("retry schedule: delay %d: %w", i+1, err)
		}
		if d <= 0 || d > MaxRetryDelay {
			return nil, fmt.Errorf("retry schedule: delay %d must be positive and at most %s", i+1, MaxRetryDelay)
		}
		out[i] = d
	}
	return out, nil
}

// MaxAttempts is the number of attempts the schedule allows.
func (s RetrySchedule) MaxAttempts() int { return len(s) + 1 }

// Delay returns the wait after failed attempt number attempt (1-based), with
// ±20% jitter, at least retryAfter when the receiver asked for it (bounded by
// MaxRetryDelay). Past the end of the schedule it repeats the last delay.
func (s RetrySchedule) Delay(attempt int, retryAfter time.Duration) time.Duration {
	if len(s) == 0 {
		return 0
	}
	base := s[min(max(attempt, 1), len(s))-1]
	d := time.Duration(float64(base) * (0.8 + 0.4*rand.Float64()))
	if retryAfter > d {
		d = min(retryAfter, MaxRetryDelay)
	}
	return d
}

// SealedWebhookSecret is a destination's signing secret as stored: sealed
// under the master key (see package secrets), never in plaintext.
type SealedWebhookSecret struct {
	ID        uuid.UUID
	Sealed    []byte
	CreatedAt time.Time
	// ExpiresAt is nil for the current secret.
	ExpiresAt *time.Time
}

// AuditEventRef is what the webhook fan-out needs of an audit event.
type AuditEventRef struct {
	ID       uuid.UUID
	Sequence uint64
	Action   string
	// RecordedAt is when the event was recorded: the time of the ids of
	// its fan-out deliveries (FanoutDeliveryID).
	RecordedAt time.Time
	// AboutDestination is, for an operational webhook event (the service's
	// own), the destination it is about; uuid.Nil otherwise.
	AboutDestination uuid.UUID
}

// WebhookDeliveryFilter selects deliveries of a project; zero fields match
// all.
type WebhookDeliveryFilter struct {
	SubscriptionID uuid.UUID
	EventID        uuid.UUID
	State          WebhookDeliveryState
}

// WebhookDeliveryChange is a delivery's transition as the domain computed
// it, from the state it was read in, with the attempt it starts or ends.
type WebhookDeliveryChange struct {
	PrevState    WebhookDeliveryState
	PrevAttempts int
	Delivery     WebhookDelivery
	Attempt      WebhookDeliveryAttempt
}

// WebhookBatchSendContext is what first attempts of several deliveries to
// one destination need, read together.
type WebhookBatchSendContext struct {
	Destination WebhookDestination
	Secrets     []SealedWebhookSecret
	Deliveries  []WebhookDelivery
	Events      map[uuid.UUID]*AuditEvent
}
