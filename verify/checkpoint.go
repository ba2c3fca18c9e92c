package verify

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/aetheriot/aether-audit/domain"
)

// CheckpointType is the JWS "typ" header of a checkpoint. Verifiers need
// only alg and kid; a checkpoint that names another type is refused.
const CheckpointType = "aether-checkpoint+jws"

// checkpoint is a checkpoint's payload, checked and decoded.
type checkpoint struct {
	KeyID                 string
	TenantID, ProjectID   string
	Sequence              uint64
	ChainHash             domain.Hash
	PurgedThroughSequence uint64
	AnchorHash            domain.Hash
	PreviousCheckpoint    *string
	IssuedAt              string
}

// checkpointPayload is the JSON payload of a checkpoint JWS.
type checkpointPayload struct {
	V                     int     `json:"v"`
	TenantID              string  `json:"tenantId"`
	ProjectID             string  `json:"projectId"`
	Sequence              string  `json:"sequence"`
	ChainHash             string  `json:"chainHash"`
	PurgedThroughSequence string  `json:"purgedThroughSequence"`
	AnchorHash            string  `json:"anchorHash"`
	PreviousCheckpoint    *string `json:"previousCheckpoint"`
	IssuedAt              string  `json:"issuedAt"`
}

// verifyCheckpoint checks a compact JWS checkpoint: alg EdDSA, a kid found
// in keys, a signature that verifies with that key, and a payload of
// version 1 with every field well formed. Any failure is an error for the
// report (a verification failure, not bad input).
func verifyCheckpoint(jws []byte, keys keySet) (*checkpoint, error) {
	sig, err := jose.ParseSignedCompact(string(bytes.TrimSpace(jws)), []jose.SignatureAlgorithm{jose.EdDSA})
	if err != nil {
		return nil, fmt.Errorf("not a compact JWS signed with EdDSA: %v", err)
	}
	h := sig.Signatures[0].Protected
	if typ, ok := h.ExtraHeaders[jose.HeaderType]; ok && typ != CheckpointType {
		return nil, fmt.Errorf("JWS type %v is not %s", typ, CheckpointType)
	}
	if h.KeyID == "" {
		return nil, fmt.Errorf("the JWS header has no kid")
	}
	candidates := keys[h.KeyID]
	if len(candidates) == 0 {
		return nil, fmt.Errorf("unknown key id %s: not in the key set", strconv.Quote(h.KeyID))
	}
	var payload []byte
	for _, k := range candidates {
		if payload, err = sig.Verify(k); err == nil {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("the signature does not verify with key %s", h.KeyID)
	}
	var p checkpointPayload
	dec := json.NewDecoder(bytes.NewReader(payload))
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("payload is not JSON: %v", err)
	}
	if p.V != 1 {
		return nil, fmt.Errorf("payload version %d is not 1", p.V)
	}
	c := &checkpoint{KeyID: h.KeyID, TenantID: p.TenantID, ProjectID: p.ProjectID,
		PreviousCheckpoint: p.PreviousCheckpoint, IssuedAt: p.IssuedAt}
	if c.Sequence, err = strconv.ParseUint(p.Sequence, 10, 64); err != nil {
		return nil, fmt.Errorf("payload sequence %q is not a decimal number", p.Sequence)
	}
	if c.PurgedThroughSequence, err = strconv.ParseUint(p.PurgedThroughSequence, 10, 64); err != nil {
		return nil, fmt.Errorf("payload purgedThroughSequence %q is not a decimal number", p.PurgedThroughSequence)
	}
	if c.ChainHash, err = parseHash(p.ChainHash); err != nil {
		return nil, fmt.Errorf("payload chainHash: %v", err)
	}
	if c.AnchorHash, err = parseHash(p.AnchorHash); err != nil {
		return nil, fmt.Errorf("payload anchorHash: %v", err)
	}
	return c, nil
}

// parseHash reads a chain hash written as 64 hex digits.
func parseHash(s string) (domain.Hash, error) {
	var h domain.Hash
	if len(s) != 2*len(h) {
		return h, fmt.Errorf("%q is not 64 hex digits", s)
	}
	if _, err := hex.Decode(h[:], []byte(s)); err != nil {
		return h, fmt.Errorf("%q is not 64 hex digits", s)
	}
	return h, nil
}
