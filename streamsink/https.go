package streamsink

import (
	"context"
	"net/http"
	"strconv"

	"github.com/aetheriot/aether-audit/webhook"
)

// Sender sends one request; *webhook.Sender implements it with its SSRF
// checks, timeouts and connection reuse.
type Sender interface {
	Send(ctx context.Context, r webhook.Request) webhook.Result
}

// The headers of an HTTPS stream request.
const (
	HeaderStreamID      = "Aether-Stream-Id"
	HeaderProjectID     = "Aether-Project-Id"
	HeaderFirstSequence = "Aether-First-Sequence"
	HeaderLastSequence  = "Aether-Last-Sequence"
)

// NDJSONContentType is the content type of HTTPS stream requests.
const NDJSONContentType = "application/x-ndjson"

// HTTPS delivers each batch as one POST of NDJSON (one event per line, the
// API's event shape), signed like a webhook with the stream's Standard
// Webhooks secret. webhook-id is "<stream>:<first>-<last>:<project>", the
// same for every attempt of a batch. The Aether-* headers name the stream,
// the project and the sequences of the first and last event. A 2xx
// acknowledges the whole batch.
type HTTPS struct {
	Sender   Sender
	URL      string
	StreamID string
	// Keys are the raw signing keys (webhook.ParseSecret of the secret).
	Keys [][]byte
}

// Format implements Sink.
func (h *HTTPS) Format() Format { return FormatNDJSON }

// Deliver implements Sink.
func (h *HTTPS) Deliver(ctx context.Context, b *Batch) error {
	if b.Events == 0 {
		return nil
	}
	first, last := b.First, b.Last
	req := webhook.Request{
		URL:         h.URL,
		ID:          b.id(h.StreamID),
		Body:        b.Body(),
		Keys:        h.Keys,
		ContentType: NDJSONContentType,
		Header: http.Header{
			HeaderStreamID: {h.StreamID}, HeaderProjectID: {b.ProjectID},
			HeaderFirstSequence: {strconv.FormatUint(first, 10)}, HeaderLastSequence: {strconv.FormatUint(last, 10)},
		},
	}
	return send(ctx, h.Sender, req)
}

// Close implements Sink.
func (h *HTTPS) Close() error { return nil }

// send makes one request and turns anything but a 2xx into a
// *DeliveryError.
func send(ctx context.Context, s Sender, req webhook.Request) error {
	res := s.Send(ctx, req)
	if res.Delivered {
		return nil
	}
	msg := res.Error
	if msg == "" {
		msg = "delivery failed"
	}
	if res.ErrorClass != "" {
		msg = string(res.ErrorClass) + ": " + msg
	}
	return &DeliveryError{Message: msg, RetryAfter: res.RetryAfter}
}
