package checkpoint

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
)

// KeyID is a public key's id, the JWS header's kid: the first 16 hex digits
// of the SHA-256 of the raw 32-byte Ed25519 public key.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:8])
}
