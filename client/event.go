package client

import (
	"encoding/json"
	"time"
)

// SubjectType is who acted: USER, SERVICE or SYSTEM.
type SubjectType string

// The subject types.
const (
	SubjectUser    SubjectType = "USER"
	SubjectService SubjectType = "SERVICE"
	SubjectSystem  SubjectType = "SYSTEM"
)

// Outcome is how the action ended.
type Outcome string

// The outcomes.
const (
	OutcomeSuccess Outcome = "SUCCESS"
	OutcomeFailure Outcome = "FAILURE"
	OutcomeDenied  Outcome = "DENIED"
	OutcomeError   Outcome = "ERROR"
)

// Risk is an event's governance risk: LOW (the default), MEDIUM or HIGH.
type Risk string

// The risks.
const (
	RiskLow    Risk = "LOW"
	RiskMedium Risk = "MEDIUM"
	RiskHigh   Risk = "HIGH"
)

// Subject is who acted.
type Subject struct {
	Type        SubjectType `json:"type"`
	ID          string      `json:"id"`
	DisplayName string      `json:"displayName,omitempty"`
}

// Resource is what was acted on.
type Resource struct {
	Type string `json:"type"`
	ID   string `json:"id"`
}

// Governance is why an action was allowed.
type Governance struct {
	Reason      string `json:"reason,omitempty"`
	Ticket      string `json:"ticket,omitempty"`
	Risk        Risk   `json:"risk,omitempty"`
	ConfirmedBy string `json:"confirmedBy,omitempty"`
}

// Correlation ties an event to a trace, a request and its cause.
type Correlation struct {
	TraceID     string `json:"traceId,omitempty"`
	RequestID   string `json:"requestId,omitempty"`
	CausationID string `json:"causationId,omitempty"`
}

// EvidenceDigest is a digest of evidence kept elsewhere.
type EvidenceDigest struct {
	Algorithm string `json:"algorithm"`
	Value     string `json:"value"`
	Label     string `json:"label,omitempty"`
}

// EventInput is an event to record (RecordAuditEventInput; the rules of
// each field are in docs/api.md, "Recording events").
type EventInput struct {
	// ProjectID is the event's project (required).
	ProjectID string `json:"projectId"`
	// ID is the event's UUID, its idempotency key. Record and RecordBatch
	// fill it with a UUIDv7 when empty.
	ID string `json:"id,omitempty"`
	// Action is a dotted lower-case name, e.g. device.firmware.updated.
	Action          string           `json:"action"`
	OccurredAt      time.Time        `json:"occurredAt"`
	Subject         Subject          `json:"subject"`
	Resource        Resource         `json:"resource"`
	Outcome         Outcome          `json:"outcome"`
	Governance      *Governance      `json:"governance,omitempty"`
	Correlation     *Correlation     `json:"correlation,omitempty"`
	EvidenceDigests []EvidenceDigest `json:"evidenceDigests,omitempty"`
	// Details is a JSON object, sent as it is.
	Details json.RawMessage `json:"details,omitempty"`
}

// Recorder is the verified token that recorded an event.
type Recorder struct {
	Issuer   string `json:"issuer"`
	Subject  string `json:"subject"`
	TokenID  string `json:"tokenId"`
	ClientID string `json:"clientId"`
}

// Event is a recorded audit event.
type Event struct {
	ID        string `json:"id"`
	TenantID  string `json:"tenantId"`
	ProjectID string `json:"projectId"`
	// Sequence is the event's place in its project: 1, 2, 3, ... in
	// commit order, with no gap.
	Sequence        uint64           `json:"sequence,string"`
	Action          string           `json:"action"`
	OccurredAt      time.Time        `json:"occurredAt"`
	RecordedAt      time.Time        `json:"recordedAt"`
	Subject         Subject          `json:"subject"`
	Resource        Resource         `json:"resource"`
	Outcome         Outcome          `json:"outcome"`
	Governance      *Governance      `json:"governance"`
	Correlation     *Correlation     `json:"correlation"`
	EvidenceDigests []EvidenceDigest `json:"evidenceDigests"`
	// Details is the canonical JSON object the chain hash covers.
	Details json.RawMessage `json:"details"`
	// ChainHash is the SHA-256 (hex) over the previous event's hash and
	// this event's canonical bytes.
	ChainHash    string    `json:"chainHash"`
	ChainVersion int       `json:"chainVersion"`
	RecordedBy   *Recorder `json:"recordedBy"`
}

// eventFields selects every field of an AuditEvent.
const eventFields = `id tenantId projectId sequence action occurredAt recordedAt
subject { type id displayName } resource { type id } outcome
governance { reason ticket risk confirmedBy } correlation { traceId requestId causationId }
evidenceDigests { algorithm value label } details chainHash chainVersion
recordedBy { issuer subject tokenId clientId }`
