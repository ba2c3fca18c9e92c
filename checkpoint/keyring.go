package checkpoint

import (
	"crypto/ed25519"
	"errors"
	"fmt"
)

// KeyRing holds the key that signs new checkpoints and the retired public
// keys that still verify old ones. It is safe for concurrent use.
type KeyRing struct {
	signer   ed25519.PrivateKey
	signerID string
	// keys are every public key by id, the signer's included; order lists
	// the ids with the signer's first.
	keys  map[string]ed25519.PublicKey
	order []string
}

// NewKeyRing returns a ring that signs with current and verifies with it
// and with retired. A retired key equal to current is ignored; two distinct
// keys with one id are an error.
func NewKeyRing(current ed25519.PrivateKey, retired ...ed25519.PublicKey) (*KeyRing, error) {
	if len(current) != ed25519.PrivateKeySize {
		return nil, errors.New("checkpoint key: not an Ed25519 private key")
	}
	pub := current.Public().(ed25519.PublicKey)
	r := &KeyRing{signer: current, signerID: KeyID(pub), keys: map[string]ed25519.PublicKey{}}
	r.add(pub)
	for _, k := range retired {
		if len(k) != ed25519.PublicKeySize {
			return nil, errors.New("retired checkpoint key: not an Ed25519 public key")
		}
		id := KeyID(k)
		if have, ok := r.keys[id]; ok {
			if !have.Equal(k) {
				return nil, fmt.Errorf("retired checkpoint key %s: two keys with one id", id)
			}
			continue
		}
		r.add(k)
	}
	return r, nil
}

func (r *KeyRing) add(k ed25519.PublicKey) {
	id := KeyID(k)
	r.keys[id] = k
	r.order = append(r.order, id)
}

// KeyID is the id of the signing key.
func (r *KeyRing) KeyID() string { return r.signerID }

// PublicKey returns the public key with id kid, current or retired.
func (r *KeyRing) PublicKey(kid string) (ed25519.PublicKey, bool) {
	k, ok := r.keys[kid]
	return k, ok
}

// PublicKeys returns every public key, the signing key's first.
func (r *KeyRing) PublicKeys() []ed25519.PublicKey {
	out := make([]ed25519.PublicKey, len(r.order))
	for i, id := range r.order {
		out[i] = r.keys[id]
	}
	return out
}
