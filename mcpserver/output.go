package mcpserver

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
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

// ChainVerification is the result of verify_audit_chain, GraphQL's
// AuditChainVerification.
type ChainVerification struct {
	Valid                          bool    `json:"valid"`
	Complete                       bool    `json:"complete"`
	ResumeToken                    *string `json:"resumeToken"`
	CheckedCount                   string  `json:"checkedCount"`
	FirstInvalidSequence           *string `json:"firstInvalidSequence"`
	HeadSequence                   string  `json:"headSequence"`
	HeadHash                       string  `json:"headHash"`
	PurgedThroughSequence          string  `json:"purgedThroughSequence"`
	CheckpointsChecked             string  `json:"checkpointsChecked"`
	FirstInvalidCheckpointSequence *string `json:"firstInvalidCheckpointSequence"`
}

// WebhookDelivery is GraphQL's WebhookDelivery with its attempts.
type WebhookDelivery struct {
	ID             string                   `json:"id"`
	ProjectID      string                   `json:"projectId"`
	SubscriptionID string                   `json:"subscriptionId"`
	DestinationID  string                   `json:"destinationId"`
	EventID        string                   `json:"eventId"`
	EventSequence  string                   `json:"eventSequence"`
	EventType      string                   `json:"eventType"`
	IdempotencyKey string                   `json:"idempotencyKey"`
	State          string                   `json:"state"`
	AttemptCount   int                      `json:"attemptCount"`
	MaxAttempts    int                      `json:"maxAttempts"`
	NextAttemptAt  *time.Time               `json:"nextAttemptAt"`
	CreatedAt      time.Time                `json:"createdAt"`
	UpdatedAt      time.Time                `json:"updatedAt"`
	DeliveredAt    *time.Time               `json:"deliveredAt"`
	DeadLetteredAt *time.Time               `json:"deadLetteredAt"`
	LastError      string                   `json:"lastError"`
	Attempts       []WebhookDeliveryAttempt `json:"attempts"`
}

// WebhookDeliveryAttempt is GraphQL's WebhookDeliveryAttempt.
type WebhookDeliveryAttempt struct {
	Number       int        `json:"number"`
	Outcome      string     `json:"outcome"`
	StartedAt    time.Time  `json:"startedAt"`
	FinishedAt   *time.Time `json:"finishedAt"`
	StatusCode   *int       `json:"statusCode"`
	LatencyMs    *float64   `json:"latencyMs"`
	ErrorClass   string     `json:"errorClass"`
	Error        string     `json:"error"`
	ResponseBody string     `json:"responseBody"`
}

// WebhookDeliveryPage is one page of list_webhook_deliveries, newest first.
type WebhookDeliveryPage struct {
	Deliveries  []WebhookDelivery `json:"deliveries"`
	HasNextPage bool              `json:"hasNextPage"`
	EndCursor   *string           `json:"endCursor"`
}

// DataExport is GraphQL's DataExport (never its bytes).
type DataExport struct {
	ID            string     `json:"id"`
	ProjectID     string     `json:"projectId"`
	Kind          string     `json:"kind"`
	Format        string     `json:"format"`
	Compression   string     `json:"compression"`
	From          *time.Time `json:"from"`
	To            *time.Time `json:"to"`
	State         string     `json:"state"`
	RequestedAt   time.Time  `json:"requestedAt"`
	StartedAt     *time.Time `json:"startedAt"`
	ProgressRows  string     `json:"progressRows"`
	ProgressBytes string     `json:"progressBytes"`
	ObjectRef     *string    `json:"objectRef"`
	ContentDigest *string    `json:"contentDigest"`
	ByteLength    *string    `json:"byteLength"`
	RowCount      *string    `json:"rowCount"`
	ReadyAt       *time.Time `json:"readyAt"`
	ExpiresAt     *time.Time `json:"expiresAt"`
	FailedAt      *time.Time `json:"failedAt"`
	FailureReason *string    `json:"failureReason"`
	ExpiredAt     *time.Time `json:"expiredAt"`
}

// DataExportPage is one page of list_data_exports, newest first.
type DataExportPage struct {
	Exports     []DataExport `json:"exports"`
	HasNextPage bool         `json:"hasNextPage"`
	EndCursor   *string      `json:"endCursor"`
}
