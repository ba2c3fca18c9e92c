package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
)

// rateFlag is a token bucket written RATE:BURST (RATE per second, BURST at
// once), RATE alone (a burst of twice the rate), or 0 (no limit).
type rateFlag app.RateLimit

// UnmarshalText parses a rateFlag.
func (r *rateFlag) UnmarshalText(b []byte) error {
	s := strings.TrimSpace(string(b))
	rateText, burstText, hasBurst := strings.Cut(s, ":")
	rate, err := strconv.ParseFloat(strings.TrimSuffix(rateText, "/s"), 64)
	if err != nil || !(rate >= 0 && rate <= 1e6) {
		return fmt.Errorf("rate limit %q: want RATE[:BURST] with RATE per second between 0 and 1e6", s)
	}
	burst := max(1, int(2*rate))
	if hasBurst {
		burst, err = strconv.Atoi(burstText)
		if err != nil || burst < 1 || burst > 1e7 {
			return fmt.Errorf("rate limit %q: BURST must be a whole number from 1 to 1e7", s)
		}
	}
	if rate == 0 {
		burst = 0
	}
	*r = rateFlag{Rate: rate, Burst: burst}
	return nil
}

// limitFlags bound how fast identities and tenants may run mutations and
// start subscriptions, and how long an append may wait.
type limitFlags struct {
	RateCommands            rateFlag      `name:"rate-commands" env:"AETHER_RATE_COMMANDS" default:"1000:2000" help:"Mutations one identity (tenant and subject) may run, as RATE:BURST per second (a batch of events counts once); 0 turns the limit off. Over it: RATE_LIMITED with a retry hint."`
	RateTenantCommands      rateFlag      `name:"rate-tenant-commands" env:"AETHER_RATE_TENANT_COMMANDS" default:"5000:10000" help:"Mutations one tenant (all its identities) may run, as RATE:BURST per second; 0 turns the limit off."`
	RateSubscriptions       rateFlag      `name:"rate-subscriptions" env:"AETHER_RATE_SUBSCRIPTIONS" default:"50:200" help:"Subscription starts (GraphQL over WebSocket or SSE, live REST streams) one identity may make, as RATE:BURST per second; 0 turns the limit off."`
	RateTenantEvents        rateFlag      `name:"rate-tenant-events" env:"AETHER_RATE_TENANT_EVENTS" default:"10000:50000" help:"Audit events one tenant may record, as RATE:BURST per second, a batch counting its events (BURST must hold the largest batch, 1,000); 0 turns the limit off."`
	RateVerifications       rateFlag      `name:"rate-verifications" env:"AETHER_RATE_VERIFICATIONS" default:"1:10" help:"verifyAuditChain calls one identity may make, as RATE:BURST per second (each re-reads and re-hashes up to a million events); 0 turns the limit off."`
	RateTenantSubscriptions rateFlag      `name:"rate-tenant-subscriptions" env:"AETHER_RATE_TENANT_SUBSCRIPTIONS" default:"200:1000" help:"Subscription starts one tenant may make, as RATE:BURST per second; 0 turns the limit off."`
	AppendTimeout           time.Duration `name:"append-timeout" env:"AETHER_APPEND_TIMEOUT" default:"1m" help:"How long an append of audit events waits, from its arrival, for its project's head (locked by another transaction) before it fails with UNAVAILABLE and a retry hint, nothing recorded; PostgreSQL ends the lock wait itself (lock_timeout)."`
}

// config returns the app's rate limits.
func (f limitFlags) config() app.RateLimitConfig {
	return app.RateLimitConfig{
		CommandsPerIdentity:      app.RateLimit(f.RateCommands),
		CommandsPerTenant:        app.RateLimit(f.RateTenantCommands),
		SubscriptionsPerIdentity: app.RateLimit(f.RateSubscriptions),
		SubscriptionsPerTenant:   app.RateLimit(f.RateTenantSubscriptions),
		EventsPerTenant:          app.RateLimit(f.RateTenantEvents),
		VerificationsPerIdentity: app.RateLimit(f.RateVerifications),
	}
}

// daysFlag is a whole number of days, written N or Nd.
type daysFlag int

// UnmarshalText parses a daysFlag.
func (d *daysFlag) UnmarshalText(b []byte) error {
	s := strings.TrimSuffix(strings.TrimSpace(string(b)), "d")
	n, err := strconv.Atoi(s)
	if err != nil || n < domain.MinAuditRetentionDays || n > domain.MaxAuditRetentionDays {
		return fmt.Errorf("%q: want a number of days from %d to %d, e.g. 400d", string(b), domain.MinAuditRetentionDays, domain.MaxAuditRetentionDays)
	}
	*d = daysFlag(n)
	return nil
}

// retentionFlags configure audit retention.
type retentionFlags struct {
	AuditRetention           daysFlag      `name:"audit-retention" env:"AETHER_AUDIT_RETENTION" default:"400d" help:"Days audit events are kept (e.g. 400d); older ones are purged by a periodic job, each purge audited. An admin can set a tenant's own window with setAuditRetention."`
	AuditRetentionMin        daysFlag      `name:"audit-retention-min" env:"AETHER_AUDIT_RETENTION_MIN" default:"30d" help:"Shortest window (days, e.g. 30d) a tenant's admin may set with setAuditRetention; shorter ones are refused with BAD_USER_INPUT."`
	RetentionInterval        time.Duration `name:"retention-interval" env:"AETHER_RETENTION_INTERVAL" default:"1h" help:"How often audit events past their retention window are purged."`
	WebhookDeliveryRetention daysFlag      `name:"webhook-delivery-retention" env:"AETHER_WEBHOOK_DELIVERY_RETENTION" default:"90d" help:"Days webhook deliveries and their attempts (dead letters included) are kept (e.g. 90d); each month's partition is dropped once wholly older, the drop audited."`
	HistoryRetention         daysFlag      `name:"history-retention" env:"AETHER_HISTORY_RETENTION" default:"400d" help:"Days alarm and telemetry history is kept (e.g. 400d), by occurredAt; each month's partition is dropped once wholly older, the drop audited."`
}

// partitions returns the configuration of the partitioned history tables.
func (f retentionFlags) partitions() app.PartitionConfig {
	return app.PartitionConfig{WebhookDeliveryRetention: time.Duration(f.WebhookDeliveryRetention) * 24 * time.Hour,
		HistoryRetention: time.Duration(f.HistoryRetention) * 24 * time.Hour}
}

// retention returns the default retention window.
func (f retentionFlags) retention() time.Duration {
	return time.Duration(f.AuditRetention) * 24 * time.Hour
}

// minRetention returns the shortest window a tenant may set.
func (f retentionFlags) minRetention() time.Duration {
	return time.Duration(f.AuditRetentionMin) * 24 * time.Hour
}

// verifyFlags bound chain verifications: the work of one verifyAuditChain
// call (or one step of an auditChainVerification stream), and the streams
// that run at once.
type verifyFlags struct {
	VerifyStepEvents           uint64 `name:"verify-step-events" env:"AETHER_VERIFY_STEP_EVENTS" default:"1000000" help:"Most events one verifyAuditChain call, or one step of an auditChainVerification subscription (a progress item), recomputes (at most 1000000)."`
	VerifyStreamsPerTenant     int    `name:"verify-streams-per-tenant" env:"AETHER_VERIFY_STREAMS_PER_TENANT" default:"4" help:"Most auditChainVerification subscriptions one tenant may run at once; one more is QUOTA_EXCEEDED."`
	VerifyStreamsPerConnection int    `name:"verify-streams-per-connection" env:"AETHER_VERIFY_STREAMS_PER_CONNECTION" default:"2" help:"Most auditChainVerification subscriptions one GraphQL WebSocket connection, or verify_audit_chain calls one MCP session, may run at once; one more is QUOTA_EXCEEDED."`
}

// verifyLimits returns the app's verification limits.
func (f verifyFlags) verifyLimits() app.VerifyLimits {
	return app.VerifyLimits{MaxEvents: f.VerifyStepEvents, StreamsPerTenant: f.VerifyStreamsPerTenant,
		StreamsPerConnection: f.VerifyStreamsPerConnection}
}
