package checkpoint

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"

	jose "github.com/go-jose/go-jose/v4"
)

// JWKS returns the ring's public keys, the signing key's first, as a JSON
// Web Key Set:
//
//	{"keys":[{"use":"sig","kty":"OKP","kid":…,"crv":"Ed25519","alg":"EdDSA","x":…}]}
//
// what GET /.well-known/aether/checkpoint-keys serves and ParseJWKS reads.
func (r *KeyRing) JWKS() []byte {
	set := jose.JSONWebKeySet{Keys: make([]jose.JSONWebKey, 0, len(r.order))}
	for _, id := range r.order {
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: r.keys[id], KeyID: id, Use: "sig", Algorithm: string(jose.EdDSA)})
	}
	b, err := json.Marshal(set)
	if err != nil {
		panic(fmt.Sprintf("checkpoint: encoding JWKS: %v", err)) // Ed25519 public keys always encode
	}
	return b
}

// ParseJWKS reads the Ed25519 public keys of a JSON Web Key Set. Every key
// must be an OKP Ed25519 public key; a kid, when present, must be KeyID of
// the key.
func ParseJWKS(data []byte) ([]ed25519.PublicKey, error) {
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, fmt.Errorf("checkpoint JWKS: %w", err)
	}
	if len(set.Keys) == 0 {
		return nil, errors.New("checkpoint JWKS: no keys")
	}
	out := make([]ed25519.PublicKey, 0, len(set.Keys))
	for _, k := range set.Keys {
		pub, ok := k.Key.(ed25519.PublicKey)
		if !ok {
			return nil, fmt.Errorf("checkpoint JWKS: key %q is not an Ed25519 public key", k.KeyID)
		}
		if k.KeyID != "" && k.KeyID != KeyID(pub) {
			return nil, fmt.Errorf("checkpoint JWKS: key %q: kid is not the key's id %s", k.KeyID, KeyID(pub))
		}
		out = append(out, pub)
	}
	return out, nil
}
