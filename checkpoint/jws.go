package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"

	jose "github.com/go-jose/go-jose/v4"
)

// HeaderType is the JWS header's typ.
const HeaderType = "aether-checkpoint+jws"

// Errors of Verify.
var (
	// ErrUnknownKey: the JWS names a kid that is not in the key ring.
	ErrUnknownKey = errors.New("checkpoint: signed with an unknown key")
	// ErrBadSignature: the signature does not verify with the named key
	// (a forged or altered checkpoint).
	ErrBadSignature = errors.New("checkpoint: signature does not verify")
	// ErrMalformed: not a compact EdDSA JWS with a checkpoint payload.
	ErrMalformed = errors.New("checkpoint: malformed")
)

// Sign signs p with the ring's signing key and returns the compact JWS,
// whose protected header is {"alg":"EdDSA","kid":…,"typ":"aether-checkpoint+jws"}.
func (r *KeyRing) Sign(p Payload) (string, error) {
	body, err := p.marshal()
	if err != nil {
		return "", err
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.EdDSA, Key: jose.JSONWebKey{Key: r.signer, KeyID: r.signerID}},
		(&jose.SignerOptions{}).WithType(HeaderType))
	if err != nil {
		return "", fmt.Errorf("checkpoint: %w", err)
	}
	obj, err := signer.Sign(body)
	if err != nil {
		return "", fmt.Errorf("checkpoint: signing: %w", err)
	}
	return obj.CompactSerialize()
}

// Verify checks a compact JWS with the ring's key of its kid (current or
// retired) and returns its payload and kid. It fails with ErrMalformed,
// ErrUnknownKey or ErrBadSignature.
func (r *KeyRing) Verify(jws string) (Payload, string, error) {
	obj, kid, err := parse(jws)
	if err != nil {
		return Payload{}, kid, err
	}
	pub, ok := r.keys[kid]
	if !ok {
		return Payload{}, kid, ErrUnknownKey
	}
	body, err := obj.Verify(pub)
	if err != nil {
		return Payload{}, kid, ErrBadSignature
	}
	p, err := decodePayload(body)
	return p, kid, err
}

// Parse reads a compact JWS's payload and kid WITHOUT verifying it: for
// showing a checkpoint the service itself stored. Use Verify for anything
// else.
func Parse(jws string) (Payload, string, error) {
	obj, kid, err := parse(jws)
	if err != nil {
		return Payload{}, kid, err
	}
	p, err := decodePayload(obj.UnsafePayloadWithoutVerification())
	return p, kid, err
}

func parse(jws string) (*jose.JSONWebSignature, string, error) {
	obj, err := jose.ParseSignedCompact(jws, []jose.SignatureAlgorithm{jose.EdDSA})
	if err != nil || len(obj.Signatures) != 1 {
		return nil, "", ErrMalformed
	}
	return obj, obj.Signatures[0].Protected.KeyID, nil
}

func decodePayload(body []byte) (Payload, error) {
	var p Payload
	if err := json.Unmarshal(body, &p); err != nil {
		return p, ErrMalformed
	}
	if _, err := p.Fields(); err != nil {
		return p, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return p, nil
}
