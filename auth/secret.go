package auth

import (
	"fmt"

	"github.com/aetheriot/aether-audit/secrets"
)

// LoadOrCreateSecret returns the HS256 secret kept hex-encoded in the file
// at path, creating the file with MinSecretLen random bytes first if it does
// not exist; see secrets.LoadOrCreateKeyFile for the file's format and the
// atomic creation that makes racing processes agree on one secret.
func LoadOrCreateSecret(path string) ([]byte, error) {
	secret, err := secrets.LoadOrCreateKeyFile(path, "JWT secret", MinSecretLen)
	if err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	return secret, nil
}

// ParseSecret returns the HS256 secret given as s, typically the value of
// the AETHER_JWT_SECRET environment variable. The bytes of s are the secret
// as they are: no decoding and no trimming takes place. s must be at least
// MinSecretLen bytes long; the error for a shorter s does not include it.
func ParseSecret(s string) ([]byte, error) {
	if len(s) < MinSecretLen {
		return nil, fmt.Errorf("auth: JWT secret is %d bytes, want at least %d", len(s), MinSecretLen)
	}
	return []byte(s), nil
}
