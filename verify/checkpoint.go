package verify

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	jose "github.com/go-jose/go-jose/v4"

	ckpt "github.com/aetheriot/aether-audit/checkpoint"
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
	var p ckpt.Payload
	if err := json.Unmarshal(payload, &p); err != nil {
		return nil, fmt.Errorf("payload is not JSON: %v", err)
	}
	f, err := p.Fields()
	if err != nil {
		return nil, err
	}
	return &checkpoint{KeyID: h.KeyID, TenantID: f.TenantID, ProjectID: f.ProjectID, Sequence: f.Sequence,
		ChainHash: f.ChainHash, PurgedThroughSequence: f.PurgedThrough, AnchorHash: f.AnchorHash,
		PreviousCheckpoint: p.PreviousCheckpoint, IssuedAt: p.IssuedAt}, nil
}
