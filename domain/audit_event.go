package domain

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"time"

	"github.com/google/uuid"
)

// SubjectType says what kind of actor an audit event's subject is.
type SubjectType string

// The subject types.
const (
	SubjectUser    SubjectType = "USER"
	SubjectService SubjectType = "SERVICE"
	SubjectSystem  SubjectType = "SYSTEM"
)

// Valid reports whether t is one of the defined subject types.
func (t SubjectType) Valid() bool {
	return t == SubjectUser || t == SubjectService || t == SubjectSystem
}

// Outcome says how the audited action ended.
type Outcome string

// The outcomes.
const (
	OutcomeSuccess Outcome = "SUCCESS"
	OutcomeFailure Outcome = "FAILURE"
	OutcomeDenied  Outcome = "DENIED"
	OutcomeError   Outcome = "ERROR"
)

// Valid reports whether o is one of the defined outcomes.
func (o Outcome) Valid() bool {
	return o == OutcomeSuccess || o == OutcomeFailure || o == OutcomeDenied || o == OutcomeError
}

// Risk grades how dangerous a governed action is.
type Risk string

// The risk grades.
const (
	RiskLow    Risk = "LOW"
	RiskMedium Risk = "MEDIUM"
	RiskHigh   Risk = "HIGH"
)

// Valid reports whether r is one of the defined risk grades.
func (r Risk) Valid() bool { return r == RiskLow || r == RiskMedium || r == RiskHigh }

// Subject is the actor of an audit event.
type Subject struct {
	Type        SubjectType `json:"type"`
	ID          string      `json:"id"`
	DisplayName string      `json:"displayName"`
}

// Resource is what an audit event acted upon.
type Resource struct {
	Type string `json:"type"`
	ID   string `json:"id"`
}

// Governance records why a sensitive action was allowed.
type Governance struct {
	Reason      string `json:"reason"`
	Ticket      string `json:"ticket"`
	Risk        Risk   `json:"risk"`
	ConfirmedBy string `json:"confirmedBy"`
}

// Correlation ties an audit event to the request and cause that produced it.
type Correlation struct {
	// TraceID is a W3C trace id: 32 lower-case hex digits.
	TraceID     string `json:"traceId"`
	RequestID   string `json:"requestId"`
	CausationID string `json:"causationId"`
}

// Recorder is who recorded an audit event, as its verified token says: the
// issuer ("iss"), subject ("sub"), token id ("jti", or the first 16 hex
// digits of the token's SHA-256 when it has none) and client ("azp" or
// "client_id", when present). Clients cannot set it.
type Recorder struct {
	Issuer   string `json:"issuer"`
	Subject  string `json:"subject"`
	TokenID  string `json:"tokenId"`
	ClientID string `json:"clientId"`
}

// EvidenceDigest is the digest of a piece of evidence kept elsewhere.
type EvidenceDigest struct {
	Algorithm string `json:"algorithm"`
	Value     string `json:"value"`
	Label     string `json:"label"`
}

// Hash is a SHA-256 digest. It encodes as lower-case hex.
type Hash [32]byte

// String returns the lower-case hex form.
func (h Hash) String() string { return hex.EncodeToString(h[:]) }

// ParseHash reads a hash written as String does: 64 hex digits (either
// case).
func ParseHash(s string) (Hash, error) {
	var h Hash
	if len(s) != 2*len(h) {
		return h, errors.New("not 64 hex digits")
	}
	if _, err := hex.Decode(h[:], []byte(s)); err != nil {
		return h, errors.New("not 64 hex digits")
	}
	return h, nil
}

// MarshalText implements encoding.TextMarshaler.
func (h Hash) MarshalText() ([]byte, error) { return []byte(h.String()), nil }

// AuditEvent is one immutable piece of audit evidence of a tenant's project.
// The server assigns Sequence, RecordedAt and ChainHash when it appends the
// event; nothing changes it afterwards. Its JSON encoding is the public event
// shape shared by GraphQL, REST and SSE (sequence as a decimal string).
type AuditEvent struct {
	ID              uuid.UUID        `json:"id"`
	TenantID        string           `json:"tenantId"`
	ProjectID       string           `json:"projectId"`
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
	// Details is a canonical JSON object (see CanonicalJSON).
	Details   json.RawMessage `json:"details"`
	ChainHash Hash            `json:"chainHash"`
	// ChainVersion is the canonical encoding the event was sealed with
	// (ChainVersionOriginal or ChainVersionRecordedBy).
	ChainVersion int `json:"chainVersion"`
	// RecordedBy is who recorded the event, from the verified token; nil
	// for version 1 events, which predate it.
	RecordedBy *Recorder `json:"recordedBy"`
	// InputFingerprint is the Fingerprint of the draft the event was recorded
	// from; a resubmission with the same id must match it. Never published.
	InputFingerprint Hash `json:"-"`
}
