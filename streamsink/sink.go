// Package streamsink delivers the batches of an audit stream
// (docs/streams.md) to their sink: gzipped NDJSON objects in an
// S3-compatible bucket (S3), signed NDJSON requests (HTTPS), Splunk's HTTP
// Event Collector (SPLUNK_HEC) and Datadog's logs intake (DATADOG_LOGS).
// A sink acknowledges a batch by returning nil from Deliver; only then does
// the stream's cursor move past it. It imports only domain, eventjson and
// webhook of ours: package app builds sinks and drives them.
package streamsink

import (
	"context"
	"time"
)

// Sink delivers batches of one stream.
type Sink interface {
	// Format is the encoding of the sink's batches (NewBatch).
	Format() Format
	// Deliver sends b, a finished batch in the sink's format, and returns
	// nil once the sink acknowledged all of it, else an error (a
	// *DeliveryError when the sink said why or when to retry). A batch may
	// be delivered again after an error or a crash: every event carries
	// its sequence, so the receiver drops what it has. An empty batch is
	// acknowledged at once.
	Deliver(ctx context.Context, b *Batch) error
	// Close releases the sink's resources.
	Close() error
}

// DeliveryError is a delivery the sink did not acknowledge.
type DeliveryError struct {
	// Message says why, for the stream's lastError; it never holds a
	// credential or event data.
	Message string
	// RetryAfter is how long the sink asked to wait, 0 when it did not.
	RetryAfter time.Duration
}

// Error implements error.
func (e *DeliveryError) Error() string { return e.Message }

// MaxBatchEvents bounds the events of one request of the HTTP sinks:
// Datadog's intake takes at most 1,000 logs per request.
const MaxBatchEvents = 1000
