package app

import (
	"fmt"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// RateLimit is a token bucket: Rate requests per second on average, up to
// Burst at once. A zero Rate means no limit.
type RateLimit struct {
	Rate  float64
	Burst int
}

// RateLimitConfig bounds how fast identities and tenants may run commands
// (every mutation) and start subscriptions (GraphQL over WebSocket or SSE,
// live REST streams). Each request must pass both its identity's bucket and
// its tenant's. Zero limits are off, which is the default of App; the
// service's defaults are set by `aether serve`.
type RateLimitConfig struct {
	// CommandsPerIdentity and CommandsPerTenant bound mutations.
	CommandsPerIdentity RateLimit
	CommandsPerTenant   RateLimit
	// SubscriptionsPerIdentity and SubscriptionsPerTenant bound subscription
	// starts (not the events they deliver).
	SubscriptionsPerIdentity RateLimit
	SubscriptionsPerTenant   RateLimit
	// EventsPerTenant bounds the audit events a tenant records, a batch
	// counting its events (the command limits count it once); its Burst
	// must hold the largest batch.
	EventsPerTenant RateLimit
	// VerificationsPerIdentity bounds verifyAuditChain calls, each of which
	// re-reads and re-hashes a range of history.
	VerificationsPerIdentity RateLimit
}

// rateLimitIdleTTL is how long an unused bucket is kept; a bucket idle that
// long has refilled anyway, so forgetting it changes nothing.
const rateLimitIdleTTL = 10 * time.Minute

// limiterSet holds the buckets of one kind of request, keyed by identity
// or tenant, and forgets idle ones.
type limiterSet struct {
	limit RateLimit
	mu    sync.Mutex
	byKey map[string]*limiterEntry
	swept time.Time
}

type limiterEntry struct {
	lim  *rate.Limiter
	used time.Time
}

func newLimiterSet(l RateLimit) *limiterSet {
	if l.Rate <= 0 {
		return nil
	}
	if l.Burst < 1 {
		l.Burst = max(1, int(math.Ceil(l.Rate)))
	}
	return &limiterSet{limit: l, byKey: map[string]*limiterEntry{}}
}

// reserve takes n tokens from key's bucket at now. It reports how long
// the caller would have to wait when the bucket holds fewer, in which case
// nothing is taken; cancel gives taken tokens back.
func (s *limiterSet) reserve(key string, now time.Time, n int) (wait time.Duration, cancel func()) {
	if s == nil {
		return 0, func() {}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if now.Sub(s.swept) > rateLimitIdleTTL {
		for k, e := range s.byKey {
			if now.Sub(e.used) > rateLimitIdleTTL {
				delete(s.byKey, k)
			}
		}
		s.swept = now
	}
	e := s.byKey[key]
	if e == nil {
		e = &limiterEntry{lim: rate.NewLimiter(rate.Limit(s.limit.Rate), s.limit.Burst)}
		s.byKey[key] = e
	}
	e.used = now
	r := e.lim.ReserveN(now, n)
	if !r.OK() {
		// More than the burst at once: never within the limit.
		return rateLimitIdleTTL, nil
	}
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return d, nil
	}
	return 0, func() { r.CancelAt(now) }
}

// rateLimiter applies a RateLimitConfig.
type rateLimiter struct {
	commandsIdentity, commandsTenant           *limiterSet
	subscriptionsIdentity, subscriptionsTenant *limiterSet
	eventsTenant, verificationsIdentity        *limiterSet
}

func newRateLimiter(cfg RateLimitConfig) *rateLimiter {
	return &rateLimiter{
		commandsIdentity:      newLimiterSet(cfg.CommandsPerIdentity),
		commandsTenant:        newLimiterSet(cfg.CommandsPerTenant),
		subscriptionsIdentity: newLimiterSet(cfg.SubscriptionsPerIdentity),
		subscriptionsTenant:   newLimiterSet(cfg.SubscriptionsPerTenant),
		eventsTenant:          newLimiterSet(cfg.EventsPerTenant),
		verificationsIdentity: newLimiterSet(cfg.VerificationsPerIdentity),
	}
}

// allow takes a token from the identity's bucket and the tenant's, or
// neither: a request refused by one bucket does not use up the other.
func allow(identity, tenant *limiterSet, id Identity, what string, now time.Time) error {
	return allowN(identity, tenant, id, 1, what, now)
}

// allowN is allow for n tokens at once (a batch of n events).
func allowN(identity, tenant *limiterSet, id Identity, n int, what string, now time.Time) error {
	wait, undo := identity.reserve(id.TenantID+"\x00"+id.Subject, now, n)
	scope := "identity"
	if wait == 0 {
		if wait, _ = tenant.reserve(id.TenantID, now, n); wait > 0 {
			undo()
			scope = "tenant"
		}
	}
	if wait == 0 {
		return nil
	}
	return &Error{
		Code:       CodeRateLimited,
		Message:    fmt.Sprintf("too many %s for this %s: retry after %s", what, scope, retryAfterText(wait)),
		RetryAfter: wait,
	}
}

// retryAfterText is a wait in whole seconds, at least 1, as clients are
// told to wait in Retry-After.
func retryAfterText(d time.Duration) string {
	return fmt.Sprintf("%ds", RetryAfterSeconds(d))
}

// RetryAfterSeconds rounds a wait up to whole seconds, at least 1, for the
// Retry-After header and the retryAfterSeconds error extension.
func RetryAfterSeconds(d time.Duration) int64 {
	return max(1, int64(math.Ceil(d.Seconds())))
}

// authorizeCommand is authorize for a command (a mutation), which once
// authorized is charged to the identity's and the tenant's command limits:
// RATE_LIMITED with a retry hint when either is spent.
func (a *App) authorizeCommand(id Identity, perm Permission, projectID string) error {
	if err := authorize(id, perm, projectID); err != nil {
		return err
	}
	return allow(a.limits.commandsIdentity, a.limits.commandsTenant, id, "commands", a.now())
}

// authorizeSubscription is authorize for a subscription start, charged to
// the subscription limits once authorized.
func (a *App) authorizeSubscription(id Identity, perm Permission, projectID string) error {
	if err := authorize(id, perm, projectID); err != nil {
		return err
	}
	return allow(a.limits.subscriptionsIdentity, a.limits.subscriptionsTenant, id, "subscription starts", a.now())
}
