package checkpoint

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
)

// GenerateKey returns a new random Ed25519 signing key.
func GenerateKey() (ed25519.PrivateKey, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	return priv, err
}

// ParsePrivateKey reads a signing key, as a key file or the
// AETHER_CHECKPOINT_KEY value holds it:
//
//   - PEM "PRIVATE KEY" (PKCS #8), as `openssl genpkey -algorithm ed25519`
//     writes it;
//   - the 32-byte seed as 64 hex digits, or in base64 or base64url (the form
//     a JWK's "d" has);
//   - the 64-byte seed-and-public-key form, hex or base64.
//
// White space around the value is ignored. Errors never quote the key.
func ParsePrivateKey(data []byte) (ed25519.PrivateKey, error) {
	data = bytes.TrimSpace(data)
	if block, _ := pem.Decode(data); block != nil {
		if block.Type != "PRIVATE KEY" {
			return nil, fmt.Errorf("checkpoint key: PEM block %q, want PRIVATE KEY (PKCS #8)", block.Type)
		}
		k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			return nil, errors.New("checkpoint key: not a PKCS #8 private key")
		}
		priv, ok := k.(ed25519.PrivateKey)
		if !ok {
			return nil, errors.New("checkpoint key: not an Ed25519 key")
		}
		return priv, nil
	}
	raw, ok := decodeRaw(string(data))
	switch {
	case ok && len(raw) == ed25519.SeedSize:
		return ed25519.NewKeyFromSeed(raw), nil
	case ok && len(raw) == ed25519.PrivateKeySize:
		priv := ed25519.NewKeyFromSeed(raw[:ed25519.SeedSize])
		if !bytes.Equal(priv[ed25519.SeedSize:], raw[ed25519.SeedSize:]) {
			return nil, errors.New("checkpoint key: the public half does not match the seed")
		}
		return priv, nil
	}
	return nil, errors.New("checkpoint key: want a PKCS #8 PEM key, or a 32-byte Ed25519 seed in hex or base64")
}

// ParsePublicKeys reads the public keys of a retired-keys file: a JWKS
// ({"keys":[…]}, the shape JWKS writes; non-Ed25519 keys are an error), PEM
// blocks ("PUBLIC KEY", PKIX; a "PRIVATE KEY" gives its public key), or one
// raw 32-byte public key in hex or base64.
func ParsePublicKeys(data []byte) ([]ed25519.PublicKey, error) {
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '{' {
		return ParseJWKS(data)
	}
	if bytes.HasPrefix(data, []byte("-----BEGIN")) {
		var out []ed25519.PublicKey
		for rest := data; ; {
			var block *pem.Block
			block, rest = pem.Decode(rest)
			if block == nil {
				break
			}
			switch block.Type {
			case "PUBLIC KEY":
				k, err := x509.ParsePKIXPublicKey(block.Bytes)
				if err != nil {
					return nil, fmt.Errorf("checkpoint public key: %w", err)
				}
				pub, ok := k.(ed25519.PublicKey)
				if !ok {
					return nil, errors.New("checkpoint public key: not an Ed25519 key")
				}
				out = append(out, pub)
			case "PRIVATE KEY":
				priv, err := ParsePrivateKey(pem.EncodeToMemory(block))
				if err != nil {
					return nil, err
				}
				out = append(out, priv.Public().(ed25519.PublicKey))
			default:
				return nil, fmt.Errorf("checkpoint public key: PEM block %q, want PUBLIC KEY", block.Type)
			}
		}
		if len(out) == 0 {
			return nil, errors.New("checkpoint public key: no PEM block")
		}
		return out, nil
	}
	raw, ok := decodeRaw(string(data))
	if !ok || len(raw) != ed25519.PublicKeySize {
		return nil, errors.New("checkpoint public key: want a JWKS, PEM, or a 32-byte key in hex or base64")
	}
	return []ed25519.PublicKey{ed25519.PublicKey(raw)}, nil
}

// decodeRaw decodes hex, base64 or base64url, padded or not.
func decodeRaw(s string) ([]byte, bool) {
	if b, err := hex.DecodeString(s); err == nil {
		return b, true
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return b, true
		}
	}
	return nil, false
}

// MarshalPrivateKey writes a signing key as PEM PKCS #8, the form
// ParsePrivateKey reads first.
func MarshalPrivateKey(priv ed25519.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// MarshalPublicKey writes a public key as PEM PKIX, a form
// ParsePublicKeys reads.
func MarshalPublicKey(pub ed25519.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}
