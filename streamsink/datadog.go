package streamsink

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/eventjson"
	"github.com/aetheriot/aether-audit/webhook"
)

// The Datadog metadata of every log.
const (
	DatadogSource  = "aether-audit"
	DatadogService = "aether-audit"
)

// DatadogLogs delivers each batch as one request to Datadog's logs intake
// (https://http-intake.logs.<site>/api/v2/logs, or a proxy), with the API
// key in DD-API-KEY. The body is a JSON array of one log per event, at most
// MaxBatchEvents; appendDatadogLog gives the mapping. A 2xx (Datadog answers
// 202) acknowledges the batch.
type DatadogLogs struct {
	Sender   Sender
	URL      string
	StreamID string
	APIKey   string
}

// Format implements Sink.
func (d *DatadogLogs) Format() Format { return FormatDatadogLogs }

// Deliver implements Sink.
func (d *DatadogLogs) Deliver(ctx context.Context, b *Batch) error {
	if b.Events == 0 {
		return nil
	}
	return send(ctx, d.Sender, webhook.Request{
		URL: d.URL, ID: b.id(d.StreamID), Body: b.Body(), Unsigned: true,
		Header: http.Header{"Dd-Api-Key": {d.APIKey}},
	})
}

// Close implements Sink.
func (d *DatadogLogs) Close() error { return nil }

// appendDatadogLog appends the log of e in Datadog's intake (a batch's
// body is a JSON array of these):
//
//	ddsource   "aether-audit"
//	service    "aether-audit"
//	ddtags     "tenant_id:<tenant>,project_id:<project>,action:<action>,outcome:<outcome>"
//	           (commas in values become "_")
//	status     "info" for SUCCESS, "warn" otherwise
//	timestamp  occurredAt in epoch milliseconds (a reserved date attribute)
//	message    "<action> <outcome> by <subject type>:<subject id> on <resource type>:<resource id>"
//	aether     the event in the API's shape, as attributes
func appendDatadogLog(out []byte, e *domain.AuditEvent) ([]byte, error) {
	head, err := json.Marshal(struct {
		Source    string `json:"ddsource"`
		Service   string `json:"service"`
		Tags      string `json:"ddtags"`
		Status    string `json:"status"`
		Timestamp int64  `json:"timestamp"`
		Message   string `json:"message"`
	}{
		Source: DatadogSource, Service: DatadogService,
		Tags: "tenant_id:" + tagValue(e.TenantID) + ",project_id:" + tagValue(e.ProjectID) +
			",action:" + tagValue(e.Action) + ",outcome:" + tagValue(string(e.Outcome)),
		Status:    datadogStatus(e.Outcome),
		Timestamp: e.OccurredAt.UnixMilli(),
		Message: fmt.Sprintf("%s %s by %s:%s on %s:%s", e.Action, e.Outcome,
			e.Subject.Type, e.Subject.ID, e.Resource.Type, e.Resource.ID),
	})
	if err != nil {
		return out, err
	}
	out = append(out, head[:len(head)-1]...) // without its closing brace
	out = append(out, `,"aether":`...)
	if out, err = eventjson.Append(out, e); err != nil {
		return out, fmt.Errorf("encoding event %d: %w", e.Sequence, err)
	}
	return append(out, '}'), nil
}

// datadogStatus is the log status of an outcome.
func datadogStatus(o domain.Outcome) string {
	if o == domain.OutcomeSuccess {
		return "info"
	}
	return "warn"
}

// tagValue keeps a tag value from splitting the ddtags list.
func tagValue(s string) string { return strings.ReplaceAll(s, ",", "_") }
