package webhook

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// SecretPrefix starts every encoded signing secret. It marks the string as a
// webhook secret for humans and secret scanners and is not part of the key.
const SecretPrefix = "whsec_"

// Key length bounds for secrets accepted by [ParseSecret], following the
// Standard Webhooks recommendation of 24 to 64 bytes.
const (
	minSecretBytes = 24
	maxSecretBytes = 64

	// newSecretBytes is the raw key length produced by NewSecret.
	newSecretBytes = 32
)

// NewSecret returns a fresh signing secret: encoded is [SecretPrefix]
// followed by the standard (padded) base64 encoding of 32 bytes from
// crypto/rand, and raw is those 32 bytes. Show encoded to the user once;
// store raw (or encoded) as a secret. It fails only if the system random
// source fails.
func NewSecret() (encoded string, raw []byte, err error) {
	raw = make([]byte, newSecretBytes)
	if _, err := rand.Read(raw); err != nil {
		return "", nil, fmt.Errorf("webhook: generate secret: %w", err)
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(raw), raw, nil
}

// ParseSecret decodes an encoded secret of the form "whsec_<base64>" into its
// raw key bytes. The prefix must be exactly [SecretPrefix] and the remainder
// must be standard, padded base64 decoding to 24..64 bytes. The error never
// contains the secret itself.
func ParseSecret(s string) ([]byte, error) {
	enc, ok := strings.CutPrefix(s, SecretPrefix)
	if !ok {
		return nil, fmt.Errorf("webhook: parse secret: missing %q prefix", SecretPrefix)
	}
	if enc == "" {
		return nil, errors.New("webhook: parse secret: empty key")
	}
	raw, err := base64.StdEncoding.Strict().DecodeString(enc)
	if err != nil {
		return nil, errors.New("webhook: parse secret: key is not valid standard base64")
	}
	if len(raw) < minSecretBytes || len(raw) > maxSecretBytes {
		return nil, fmt.Errorf("webhook: parse secret: key is %d bytes, want %d to %d", len(raw), minSecretBytes, maxSecretBytes)
	}
	return raw, nil
}
