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
// the other as in Splunk's batching example; SplunkBody gives the mapping.
// A 2xx acknowledges the batch.
type SplunkHEC struct {
	Sender   Sender
	URL      string
	StreamID string
	Token    string
}

// Deliver implements Sink.
func (s *SplunkHEC) Deliver(ctx context.Context, b *domain.AuditStreamBatch) error {
	if len(b.Events) == 0 {
		return nil
	}
	body, err := SplunkBody(b)
	if err != nil {
		return err
	}
	return send(ctx, s.Sender, webhook.Request{
		URL: s.URL, ID: batchID(s.StreamID, b), Body: body, Unsigned: true,
		Header: http.Header{"Authorization": {"Splunk " + s.Token}},
	})
}

// Close implements Sink.
func (s *SplunkHEC) Close() error { return nil }

// SplunkBody maps each event of b to one HEC event object:
//
//	time        occurredAt, epoch seconds with milliseconds (1700000000.123)
//	source      "aether-audit"
//	sourcetype  "aether:audit_event"
//	event       the event in the API's shape (the NDJSON line of HTTPS)
//	fields      indexed fields, strings: tenantId, projectId, sequence,
//	            action, outcome
//
// and writes the objects one after the other with no separator.
func SplunkBody(b *domain.AuditStreamBatch) ([]byte, error) {
	var out []byte
	for i := range b.Events {
		e := &b.Events[i]
		ms := e.OccurredAt.UnixMilli()
		out = append(out, `{"time":`...)
		out = append(out, formatEpochMillis(ms)...)
		out = append(out, `,"source":"`+SplunkSource+`","sourcetype":"`+SplunkSourcetype+`","event":`...)
		var err error
		if out, err = eventjson.Append(out, e); err != nil {
			return nil, fmt.Errorf("encoding event %d: %w", e.Sequence, err)
		}
		fields, err := json.Marshal(map[string]string{
			"tenantId": e.TenantID, "projectId": e.ProjectID, "sequence": strconv.FormatUint(e.Sequence, 10),
			"action": e.Action, "outcome": string(e.Outcome),
		})
		if err != nil {
			return nil, err
		}
		out = append(out, `,"fields":`...)
		out = append(out, fields...)
		out = append(out, '}')
	}
	return out, nil
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

// batchID is the stable id of a batch's requests (sent as webhook-id
// where the request is signed).
func batchID(streamID string, b *domain.AuditStreamBatch) string {
	return fmt.Sprintf("%s:%d-%d:%s", streamID, b.Events[0].Sequence, b.Events[len(b.Events)-1].Sequence, b.ProjectID)
}
