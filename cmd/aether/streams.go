package main

import (
	"context"
	"time"

	"gocloud.dev/blob"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/export"
	"github.com/aetheriot/aether-audit/webhook"
)

// streamFlags configure audit streams (docs/streams.md).
type streamFlags struct {
	StreamWorkers      int           `name:"stream-workers" env:"AETHER_STREAM_WORKERS" default:"4" help:"How many projects' stream cursors this process delivers at once."`
	StreamBatchEvents  int           `name:"stream-batch-events" env:"AETHER_STREAM_BATCH_EVENTS" default:"1000" help:"Most events of one request of an HTTPS, SPLUNK_HEC or DATADOG_LOGS stream (at most 1000)."`
	StreamObjectEvents int           `name:"stream-object-events" env:"AETHER_STREAM_OBJECT_EVENTS" default:"10000" help:"Most events of one object of an S3 stream."`
	StreamObjectMaxAge time.Duration `name:"stream-object-max-age" env:"AETHER_STREAM_OBJECT_MAX_AGE" default:"10s" help:"How long an S3 stream waits for a full object: a smaller one is written once its oldest event is this old (at most half of --stream-lease)."`
	StreamLease        time.Duration `name:"stream-lease" env:"AETHER_STREAM_LEASE" default:"30s" help:"How long a process holds a stream cursor without progress before another process takes it over (the holder died)."`
	StreamMaxBackoff   time.Duration `name:"stream-max-backoff" env:"AETHER_STREAM_MAX_BACKOFF" default:"5m" help:"Longest wait between failed deliveries of a stream (the wait starts at 1 s and doubles)."`
}

// config builds the stream configuration: S3 sinks open their bucket URL
// with export.OpenGuardedBucket (gocloud: s3:// with the AWS credentials
// chain), whose requests go through sender's SSRF-guarded transport, the
// webhooks' own: a tenant's endpoint is checked at every dial, as a
// webhook's URL is.
func (f streamFlags) config(sender *webhook.Sender) app.StreamConfig {
	client := sender.GuardedClient()
	return app.StreamConfig{
		OpenBucket: func(ctx context.Context, rawURL string) (*blob.Bucket, error) {
			return export.OpenGuardedBucket(ctx, rawURL, client)
		},
		Workers: f.StreamWorkers, BatchEvents: f.StreamBatchEvents, ObjectEvents: f.StreamObjectEvents,
		ObjectMaxAge: f.StreamObjectMaxAge, Lease: f.StreamLease, MaxBackoff: f.StreamMaxBackoff,
	}
}
