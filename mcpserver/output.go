package mcpserver

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/aetheriot/aether-audit/client"
)

// The tools' results are in the shape of the GraphQL API: the same field
// names, uint64 values as decimal strings, times in RFC 3339, absent values
// null. AppBackend builds them from the use cases' results; GraphQLBackend
// decodes them from the API's answers.

// Event is one audit event in the public JSON shape (JSON), with its
// sequence.
type Event struct {
	Sequence uint64
	JSON     json.RawMessage
}

// MarshalJSON writes the event's JSON as is.
func (e Event) MarshalJSON() ([]byte, error) { return e.JSON, nil }

// UnmarshalJSON keeps an event's JSON and reads its sequence.
func (e *Event) UnmarshalJSON(b []byte) error {
	var head struct {
		Sequence string `json:"sequence"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return err
	}
	seq, err := strconv.ParseUint(head.Sequence, 10, 64)
	if err != nil {
		return fmt.Errorf("audit event sequence %q: %w", head.Sequence, err)
	}
	e.Sequence, e.JSON = seq, append(json.RawMessage(nil), b...)
	return nil
}

// EventPage is one page of search_audit_events.
type EventPage struct {
	Events      []Event `json:"events"`
	HasNextPage bool    `json:"hasNextPage"`
	// EndCursor reads the next page (after); null for an empty page.
	EndCursor *string `json:"endCursor"`
}

// ChainVerification is the result of verify_audit_chain, the verdict of
// GraphQL's auditChainVerification: always complete (the whole range was
// verified, or something failed), so resumeToken is null; both are kept
// in the shape of GraphQL's AuditChainVerification.
type ChainVerification struct {
	Valid                          bool    `json:"valid"`
	Complete                       bool    `json:"complete"`
	ResumeToken                    *string `json:"resumeToken"`
	CheckedCount                   string  `json:"checkedCount"`
	SequenceReached                string  `json:"sequenceReached"`
	EventsPerSecond                float64 `json:"eventsPerSecond"`
	FirstInvalidSequence           *string `json:"firstInvalidSequence"`
	HeadSequence                   string  `json:"headSequence"`
	HeadHash                       string  `json:"headHash"`
	PurgedThroughSequence          string  `json:"purgedThroughSequence"`
	CheckpointsChecked             string  `json:"checkpointsChecked"`
	FirstInvalidCheckpointSequence *string `json:"firstInvalidCheckpointSequence"`
}

// WebhookDelivery is GraphQL's WebhookDelivery with its attempts: the Go
// client's shape, which marshals as the API answers.
type WebhookDelivery = client.WebhookDelivery

// WebhookDeliveryAttempt is GraphQL's WebhookDeliveryAttempt.
type WebhookDeliveryAttempt = client.WebhookDeliveryAttempt

// WebhookDeliveryPage is one page of list_webhook_deliveries, newest first.
type WebhookDeliveryPage struct {
	Deliveries  []WebhookDelivery `json:"deliveries"`
	HasNextPage bool              `json:"hasNextPage"`
	EndCursor   *string           `json:"endCursor"`
}

// DataExport is GraphQL's DataExport (never its bytes): the Go client's
// shape, which marshals as the API answers.
type DataExport = client.DataExport

// DataExportPage is one page of list_data_exports, newest first.
type DataExportPage struct {
	Exports     []DataExport `json:"exports"`
	HasNextPage bool         `json:"hasNextPage"`
	EndCursor   *string      `json:"endCursor"`
}
