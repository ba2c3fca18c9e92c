package checkpoint

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aetheriot/aether-audit/domain"
)

// PayloadVersion is the payload's "v".
const PayloadVersion = 1

// Payload is the JSON a checkpoint signs. Its members are in this order:
//
//	{"v":1,"tenantId":…,"projectId":…,"sequence":"<decimal>","chainHash":"<hex64>",
//	 "purgedThroughSequence":"<decimal>","anchorHash":"<hex64>",
//	 "previousCheckpoint":"<hex64>"|null,"issuedAt":"<RFC 3339 UTC>"}
type Payload struct {
	V         int    `json:"v"`
	TenantID  string `json:"tenantId"`
	ProjectID string `json:"projectId"`
	// Sequence is the checkpointed event's sequence, a decimal string.
	Sequence string `json:"sequence"`
	// ChainHash is the chain hash at Sequence, 64 lower-case hex digits.
	ChainHash string `json:"chainHash"`
	// PurgedThroughSequence is the last sequence retention had purged when
	// the checkpoint was signed ("0" when none).
	PurgedThroughSequence string `json:"purgedThroughSequence"`
	// AnchorHash is the chain hash of the last purged event (64 zeros when
	// none).
	AnchorHash string `json:"anchorHash"`
	// PreviousCheckpoint is the SHA-256 (hex) of the compact JWS of the
	// project's checkpoint issued before this one, nil for the first.
	PreviousCheckpoint *string `json:"previousCheckpoint"`
	// IssuedAt is when it was signed, RFC 3339 in UTC.
	IssuedAt string `json:"issuedAt"`
}

// Fields is a checkpoint's content in Go types, from which NewPayload
// builds its Payload.
type Fields struct {
	TenantID, ProjectID string
	Sequence            uint64
	ChainHash           [32]byte
	PurgedThrough       uint64
	AnchorHash          [32]byte
	// Previous is the SHA-256 of the previous checkpoint's JWS; nil for the
	// first.
	Previous *[32]byte
	IssuedAt time.Time
}

// NewPayload encodes f as a Payload.
func NewPayload(f Fields) Payload {
	p := Payload{V: PayloadVersion, TenantID: f.TenantID, ProjectID: f.ProjectID,
		Sequence: strconv.FormatUint(f.Sequence, 10), ChainHash: hex.EncodeToString(f.ChainHash[:]),
		PurgedThroughSequence: strconv.FormatUint(f.PurgedThrough, 10), AnchorHash: hex.EncodeToString(f.AnchorHash[:]),
		IssuedAt: f.IssuedAt.UTC().Format(time.RFC3339Nano)}
	if f.Previous != nil {
		s := hex.EncodeToString(f.Previous[:])
		p.PreviousCheckpoint = &s
	}
	return p
}

// Fields decodes p, checking every member's form.
func (p Payload) Fields() (Fields, error) {
	var f Fields
	if p.V != PayloadVersion {
		return f, fmt.Errorf("checkpoint payload: unknown version %d", p.V)
	}
	var err error
	f.TenantID, f.ProjectID = p.TenantID, p.ProjectID
	if f.Sequence, err = strconv.ParseUint(p.Sequence, 10, 64); err != nil {
		return f, errors.New("checkpoint payload: sequence is not a decimal string")
	}
	if f.PurgedThrough, err = strconv.ParseUint(p.PurgedThroughSequence, 10, 64); err != nil {
		return f, errors.New("checkpoint payload: purgedThroughSequence is not a decimal string")
	}
	if f.ChainHash, err = domain.ParseHash(p.ChainHash); err != nil {
		return f, fmt.Errorf("checkpoint payload: chainHash: %w", err)
	}
	if f.AnchorHash, err = domain.ParseHash(p.AnchorHash); err != nil {
		return f, fmt.Errorf("checkpoint payload: anchorHash: %w", err)
	}
	if p.PreviousCheckpoint != nil {
		h, err := domain.ParseHash(*p.PreviousCheckpoint)
		if err != nil {
			return f, fmt.Errorf("checkpoint payload: previousCheckpoint: %w", err)
		}
		prev := [32]byte(h)
		f.Previous = &prev
	}
	if f.IssuedAt, err = time.Parse(time.RFC3339Nano, p.IssuedAt); err != nil {
		return f, errors.New("checkpoint payload: issuedAt is not RFC 3339")
	}
	return f, nil
}

// marshal is the payload's JSON, its members in the documented order.
func (p Payload) marshal() ([]byte, error) { return json.Marshal(p) }

// Digest is the SHA-256 of a checkpoint's compact JWS text: what the next
// checkpoint's previousCheckpoint holds.
func Digest(jws string) [32]byte { return sha256.Sum256([]byte(jws)) }
