package streamsink

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/eventjson"
	"github.com/aetheriot/aether-audit/webhook"
)

// The Splunk HEC metadata of every event.
const (
	SplunkSource     = "aether-audit"
	SplunkSourcetype = "aether:audit_event"
)

// SplunkHEC delivers each batch as one request to a Splunk HTTP Event
// Collector's event endpoint (https://host:8088/services/collector/event,
// or a proxy), with the collector's token in "Authorization: Splunk
// <token>". The body is one HEC event object per audit event, one after
// the other as in Splunk's batching example; appendSplunkEvent gives the mapping.
// A 2xx acknowledges the batch.
type SplunkHEC struct {
	Sender   Sender
	URL      string
	StreamID string
	Token    string
}

// Format implements Sink.
func (s *SplunkHEC) Format() Format { return FormatSplunkHEC }

// Deliver implements Sink.
func (s *SplunkHEC) Deliver(ctx context.Context, b *Batch) error {
	if b.Events == 0 {
		return nil
	}
	return send(ctx, s.Sender, webhook.Request{
		URL: s.URL, ID: b.id(s.StreamID), Body: b.Body(), Unsigned: true,
		Header: http.Header{"Authorization": {"Splunk " + s.Token}},
	})
}

// Close implements Sink.
func (s *SplunkHEC) Close() error { return nil }

// appendSplunkEvent appends the HEC event object of e (a batch's body is
// these objects one after the other, with no separator):
//
//	time        occurredAt, epoch seconds with milliseconds (1700000000.123)
//	source      "aether-audit"
//	sourcetype  "aether:audit_event"
//	event       the event in the API's shape (the NDJSON line of HTTPS)
//	fields      indexed fields, strings: tenantId, projectId, sequence,
//	            action, outcome
func appendSplunkEvent(out []byte, e *domain.AuditEvent) ([]byte, error) {
	out = append(out, `{"time":`...)
	out = append(out, formatEpochMillis(e.OccurredAt.UnixMilli())...)
	out = append(out, `,"source":"`+SplunkSource+`","sourcetype":"`+SplunkSourcetype+`","event":`...)
	out, err := eventjson.Append(out, e)
	if err != nil {
		return out, fmt.Errorf("encoding event %d: %w", e.Sequence, err)
	}
	fields, err := json.Marshal(map[string]string{
		"tenantId": e.TenantID, "projectId": e.ProjectID, "sequence": strconv.FormatUint(e.Sequence, 10),
		"action": e.Action, "outcome": string(e.Outcome),
	})
	if err != nil {
		return out, err
	}
	out = append(out, `,"fields":`...)
	out = append(out, fields...)
	return append(out, '}'), nil
}

// formatEpochMillis writes ms milliseconds since the epoch as seconds with
// three decimals.
func formatEpochMillis(ms int64) string {
	sign := ""
	if ms < 0 {
		sign, ms = "-", -ms
	}
	return fmt.Sprintf("%s%d.%03d", sign, ms/1000, ms%1000)
}
