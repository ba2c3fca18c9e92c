package streamsink

// The Splunk and Datadog bodies are checked against each vendor's published
// example requests (testdata/, from Splunk's "HTTP Event Collector
// examples" and "Format events for HTTP Event Collector", and Datadog's
// "Send logs" API reference): a reader that accepts what the vendor
// documents must accept the examples and our bodies alike.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/domain"
)

// readHEC reads a body of Splunk's /services/collector/event endpoint as
// the HEC event format documents it: JSON objects one after the other, each
// with an event (a string or an object); time a number of epoch seconds;
// host, source, sourcetype and index strings; fields an object of strings
// or arrays of strings. Other top-level members are allowed in the
// batching example and ignored by Splunk.
func readHEC(body []byte) ([]map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var out []map[string]any
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); err == io.EOF {
			break
		} else if err != nil {
			return nil, err
		}
		ev, ok := obj["event"]
		if !ok {
			return nil, fmt.Errorf("object %d has no event", len(out))
		}
		switch ev.(type) {
		case string, map[string]any:
		default:
			return nil, fmt.Errorf("object %d: event is neither a string nor an object", len(out))
		}
		if t, ok := obj["time"]; ok {
			if _, ok := t.(json.Number); !ok {
				return nil, fmt.Errorf("object %d: time is not a number", len(out))
			}
		}
		for _, k := range []string{"host", "source", "sourcetype", "index"} {
			if v, ok := obj[k]; ok {
				if _, ok := v.(string); !ok {
					return nil, fmt.Errorf("object %d: %s is not a string", len(out), k)
				}
			}
		}
		if f, ok := obj["fields"]; ok {
			fields, ok := f.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("object %d: fields is not an object", len(out))
			}
			for k, v := range fields {
				switch v := v.(type) {
				case string:
				case []any:
					for _, item := range v {
						if _, ok := item.(string); !ok {
							return nil, fmt.Errorf("object %d: field %s holds a non-string", len(out), k)
						}
					}
				default:
					return nil, fmt.Errorf("object %d: field %s is not a string", len(out), k)
				}
			}
		}
		out = append(out, obj)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no event")
	}
	return out, nil
}

// readDatadogLogs reads a body of Datadog's /api/v2/logs as its reference
// documents it: a JSON array of at most 1,000 log objects whose reserved
// attributes (ddsource, ddtags, hostname, message, service, status) are
// strings; any other member is an attribute.
func readDatadogLogs(body []byte) ([]map[string]any, error) {
	var logs []map[string]any
	if err := json.Unmarshal(body, &logs); err != nil {
		return nil, err
	}
	if len(logs) == 0 || len(logs) > 1000 {
		return nil, fmt.Errorf("%d logs: 1 to 1000 per request", len(logs))
	}
	if len(body) > 5<<20 {
		return nil, fmt.Errorf("payload over 5 MB")
	}
	for i, l := range logs {
		for _, k := range []string{"ddsource", "ddtags", "hostname", "message", "service", "status"} {
			if v, ok := l[k]; ok {
				if _, ok := v.(string); !ok {
					return nil, fmt.Errorf("log %d: %s is not a string", i, k)
				}
			}
		}
	}
	return logs, nil
}

// testBatch returns a finished batch of n events in format f, and its
// events.
func testBatch(t *testing.T, f Format, n int) (*Batch, []domain.AuditEvent) {
	b := NewBatch(f, "t,1", "p1")
	at := time.Date(2026, 12, 2, 1, 2, 3, 456_000_000, time.UTC)
	var events []domain.AuditEvent
	for i := 1; i <= n; i++ {
		outcome := domain.OutcomeSuccess
		if i%2 == 0 {
			outcome = domain.OutcomeDenied
		}
		events = append(events, domain.AuditEvent{ID: uuid.New(), TenantID: "t,1", ProjectID: "p1", Sequence: uint64(i),
			Action: "door.opened", OccurredAt: at, RecordedAt: at, Subject: domain.Subject{Type: domain.SubjectUser, ID: "u1"},
			Resource: domain.Resource{Type: "door", ID: "d1"}, Outcome: outcome, Details: json.RawMessage(`{}`), ChainVersion: 2, ChainHash: [32]byte{byte(i), byte(i >> 8)}})
		require.NoError(t, b.Append(&events[i-1]))
	}
	require.NoError(t, b.Finish())
	return b, events
}

func TestReadersAcceptThePublishedExamples(t *testing.T) {
	for _, name := range []string{"splunk_hec_batching_example.json", "splunk_hec_metadata_example.json"} {
		body, err := os.ReadFile("testdata/" + name)
		require.NoError(t, err)
		_, err = readHEC(body)
		require.NoError(t, err, name)
	}
	body, err := os.ReadFile("testdata/datadog_logs_example.json")
	require.NoError(t, err)
	_, err = readDatadogLogs(body)
	require.NoError(t, err)

	// And they refuse what the formats do not allow.
	for _, bad := range []string{`{"time": 1}`, `{"event": 1}`, `{"event": "x", "time": "soon"}`, `{"event": "x", "fields": {"a": 1}}`, ``} {
		_, err := readHEC([]byte(bad))
		require.Error(t, err, bad)
	}
	for _, bad := range []string{`{}`, `[]`, `[{"message": 1}]`, `[{"ddtags": ["a"]}]`} {
		_, err := readDatadogLogs([]byte(bad))
		require.Error(t, err, bad)
	}
}

func TestSplunkBodyIsHECEventFormat(t *testing.T) {
	b, evs := testBatch(t, FormatSplunkHEC, 3)
	events, err := readHEC(b.Body())
	require.NoError(t, err)
	require.Len(t, events, 3)
	for i, ev := range events {
		require.Equal(t, json.Number("1796173323.456"), ev["time"], "occurredAt in epoch seconds with milliseconds")
		require.Equal(t, SplunkSource, ev["source"])
		require.Equal(t, SplunkSourcetype, ev["sourcetype"])
		inner := ev["event"].(map[string]any)
		require.Equal(t, fmt.Sprint(i+1), inner["sequence"], "the API's event shape, sequence as a decimal string")
		require.Equal(t, "p1", inner["projectId"])
		require.Equal(t, map[string]any{"tenantId": "t,1", "projectId": "p1", "sequence": fmt.Sprint(i + 1),
			"action": "door.opened", "outcome": string(evs[i].Outcome)}, ev["fields"])
	}
	require.Equal(t, "-1.500", formatEpochMillis(-1500))
}

func TestDatadogBodyIsLogsIntakeFormat(t *testing.T) {
	b, evs := testBatch(t, FormatDatadogLogs, MaxBatchEvents)
	logs, err := readDatadogLogs(b.Body())
	require.NoError(t, err)
	require.Len(t, logs, MaxBatchEvents)
	example, err := os.ReadFile("testdata/datadog_logs_example.json")
	require.NoError(t, err)
	var published []map[string]any
	require.NoError(t, json.Unmarshal(example, &published))
	for i, l := range logs[:2] {
		// The reserved attributes of the published example that we set
		// have its types.
		for _, k := range []string{"ddsource", "ddtags", "message", "service", "status"} {
			require.IsType(t, published[0][k], l[k], k)
		}
		require.Equal(t, DatadogSource, l["ddsource"])
		require.Equal(t, DatadogService, l["service"])
		require.Equal(t, "tenant_id:t_1,project_id:p1,action:door.opened,outcome:"+string(evs[i].Outcome), l["ddtags"],
			"a comma in a value would split the tag list")
		require.Equal(t, map[bool]string{true: "info", false: "warn"}[evs[i].Outcome == domain.OutcomeSuccess], l["status"])
		require.Equal(t, float64(evs[i].OccurredAt.UnixMilli()), l["timestamp"])
		require.True(t, strings.HasPrefix(l["message"].(string), "door.opened "+string(evs[i].Outcome)+" by USER:u1 on door:d1"))
		require.Equal(t, fmt.Sprint(i+1), l["aether"].(map[string]any)["sequence"])
	}
}
