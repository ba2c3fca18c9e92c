package main

import (
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/secrets"
	"github.com/aetheriot/aether-audit/webhook"
)

// webhookFlags configure webhook destinations and delivery.
type webhookFlags struct {
	MasterKey                string        `name:"master-key" env:"AETHER_MASTER_KEY" help:"AES-256 key (64 hex digits or base64 of 32 bytes) sealing webhook signing secrets at rest. When unset, one is generated into <data-dir>/master-key and reused."`
	WebhookRetrySchedule     string        `name:"webhook-retry-schedule" env:"AETHER_WEBHOOK_RETRY_SCHEDULE" default:"5s,1m,5m,30m,2h,6h,12h,24h" help:"Delays between delivery attempts (±20% jitter); N delays allow N+1 attempts, then the delivery is dead-lettered."`
	WebhookConnectTimeout    time.Duration `name:"webhook-connect-timeout" env:"AETHER_WEBHOOK_CONNECT_TIMEOUT" default:"5s" help:"Bound on connecting to a receiver (TCP and TLS)."`
	WebhookTimeout           time.Duration `name:"webhook-timeout" env:"AETHER_WEBHOOK_TIMEOUT" default:"15s" help:"Bound on one delivery request, start to end."`
	WebhookWorkers           int           `name:"webhook-workers" env:"AETHER_WEBHOOK_WORKERS" default:"100" help:"Concurrent webhook requests of this process."`
	WebhookMaxPerDestination int           `name:"webhook-max-in-flight-per-destination" env:"AETHER_WEBHOOK_MAX_IN_FLIGHT_PER_DESTINATION" default:"8" help:"Concurrent requests of this process to one destination, so a slow receiver cannot take every worker."`
	WebhookBreakerFailures   int           `name:"webhook-breaker-failures" env:"AETHER_WEBHOOK_BREAKER_FAILURES" default:"10" help:"Consecutive failed attempts to a webhook destination (or failed deliveries of an audit stream to its sink) that open its circuit breaker: no requests until a probe after a backoff."`
	WebhookBreakerBackoff    time.Duration `name:"webhook-breaker-backoff" env:"AETHER_WEBHOOK_BREAKER_BACKOFF" default:"30s" help:"Wait of an open circuit breaker before its first probe; doubled after each failed probe, up to --webhook-breaker-max-backoff."`
	WebhookBreakerMaxBackoff time.Duration `name:"webhook-breaker-max-backoff" env:"AETHER_WEBHOOK_BREAKER_MAX_BACKOFF" default:"1h" help:"Longest wait of an open circuit breaker between probes."`
	WebhookAutoDisableAfter  time.Duration `name:"webhook-auto-disable-after" env:"AETHER_WEBHOOK_AUTO_DISABLE_AFTER" default:"120h" help:"A destination whose attempts all failed for this long is AUTO_DISABLED (at once on 410 Gone)."`
	WebhookAllowCIDRs        []string      `name:"webhook-allow-cidrs" env:"AETHER_WEBHOOK_ALLOW_CIDRS" help:"DEVELOPMENT ONLY: address prefixes (e.g. 127.0.0.0/8) webhook destinations may use despite the SSRF defence."`
	WebhookAllowHTTP         bool          `name:"webhook-allow-http" env:"AETHER_WEBHOOK_ALLOW_HTTP" help:"DEVELOPMENT ONLY: allow http:// webhook destinations."`
}

// masterKey returns the master key: --master-key, or the one generated into
// the data dir.
func (f webhookFlags) masterKey(dir dataDirFlags) ([]byte, error) {
	if f.MasterKey != "" {
		return secrets.ParseKey(f.MasterKey)
	}
	if err := os.MkdirAll(dir.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating data dir: %w", err)
	}
	key, err := secrets.LoadOrCreateKeyFile(filepath.Join(dir.DataDir, "master-key"), "master key", secrets.KeySize)
	if err != nil {
		return nil, err
	}
	return key[:secrets.KeySize], nil
}

// config builds the app's webhook configuration: the master key's box, the
// retry schedule and the sender, which it also returns as itself (the audit
// streams' S3 requests share its SSRF-guarded transport).
func (f webhookFlags) config(key []byte, logger *slog.Logger) (app.WebhookConfig, *webhook.Sender, error) {
	box, err := secrets.NewBox(key)
	if err != nil {
		return app.WebhookConfig{}, nil, err
	}
	schedule, err := domain.ParseRetrySchedule(f.WebhookRetrySchedule)
	if err != nil {
		return app.WebhookConfig{}, nil, err
	}
	var prefixes []netip.Prefix
	for _, c := range f.WebhookAllowCIDRs {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			return app.WebhookConfig{}, nil, fmt.Errorf("--webhook-allow-cidrs: %w", err)
		}
		prefixes = append(prefixes, p)
	}
	if len(prefixes) > 0 || f.WebhookAllowHTTP {
		logger.Warn("WEBHOOK SSRF DEFENCE RELAXED: for local development only, never in production",
			"allow_cidrs", f.WebhookAllowCIDRs, "allow_http", f.WebhookAllowHTTP)
	}
	sender := webhook.NewSender(webhook.SenderConfig{
		ConnectTimeout: f.WebhookConnectTimeout,
		Timeout:        f.WebhookTimeout,
		AllowHTTP:      f.WebhookAllowHTTP,
		AllowPrefixes:  prefixes,
	})
	return app.WebhookConfig{
		Box:                       box,
		RetrySchedule:             schedule,
		URLPolicy:                 webhook.URLPolicy{AllowHTTP: f.WebhookAllowHTTP, AllowPrefixes: prefixes},
		Sender:                    sender,
		MaxInFlightPerDestination: f.WebhookMaxPerDestination,
		Breaker: domain.WebhookBreakerPolicy{Failures: f.WebhookBreakerFailures, Backoff: f.WebhookBreakerBackoff,
			MaxBackoff: f.WebhookBreakerMaxBackoff, AutoDisableAfter: f.WebhookAutoDisableAfter},
	}, sender, nil
}
