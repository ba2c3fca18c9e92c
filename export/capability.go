package export

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Errors of VerifyDownload.
var (
	// ErrCapabilityInvalid means the token is malformed, was not signed
	// with the key, or was altered.
	ErrCapabilityInvalid = errors.New("export: invalid download capability")
	// ErrCapabilityExpired means the token is genuine but its expiry has
	// passed.
	ErrCapabilityExpired = errors.New("export: download capability expired")
)

// Limits and layout of a download capability.
const (
	// MinCapabilityKeyLen is the least number of bytes of an HMAC key.
	MinCapabilityKeyLen = 32
	// MaxCapabilityTenantLen is the longest tenant id, in bytes, that a
	// capability can carry.
	MaxCapabilityTenantLen = 1024

	capabilityVersion byte = 1
	// capabilityFixedLen is the version, export id and expiry.
	capabilityFixedLen = 1 + 16 + 8
	// capabilityMACLabel separates these MACs from any other use of the key.
	capabilityMACLabel = "aether-audit export download\x00"
)

// capabilityEncoding is unpadded base64url; Strict rejects non-zero padding
// bits, so each token has exactly one spelling.
var capabilityEncoding = base64.RawURLEncoding.Strict()

// maxCapabilityTokenLen is the length of a token carrying the longest
// tenant id; anything longer is rejected before decoding.
var maxCapabilityTokenLen = capabilityEncoding.EncodedLen(capabilityFixedLen+MaxCapabilityTenantLen) + 1 +
	capabilityEncoding.EncodedLen(sha256.Size)

// SignDownload returns a download capability: an opaque, URL-safe token
// granting download of export exportID of tenant tenantID until expiresAt.
//
// The token is base64url(payload) "." base64url(mac), both unpadded, where
// payload is the version byte 1, the 16 bytes of exportID, expiresAt as
// big-endian signed 64-bit Unix seconds (any fraction of a second dropped)
// and the bytes of tenantID, and mac is HMAC-SHA256 under key of the label
// "aether-audit export download" and a zero byte, followed by payload. The
// token is signed, not encrypted: its holder can read the ids and expiry.
//
// SignDownload panics if key is shorter than MinCapabilityKeyLen bytes or
// tenantID longer than MaxCapabilityTenantLen bytes: both are programming
// errors.
func SignDownload(key []byte, exportID uuid.UUID, tenantID string, expiresAt time.Time) string {
	if len(key) < MinCapabilityKeyLen {
		panic(fmt.Sprintf("export: download capability key has %d bytes, fewer than %d", len(key), MinCapabilityKeyLen))
	}
	if len(tenantID) > MaxCapabilityTenantLen {
		panic(fmt.Sprintf("export: tenant id of %d bytes is longer than %d", len(tenantID), MaxCapabilityTenantLen))
	}
	payload := make([]byte, capabilityFixedLen, capabilityFixedLen+len(tenantID))
	payload[0] = capabilityVersion
	copy(payload[1:17], exportID[:])
	binary.BigEndian.PutUint64(payload[17:25], uint64(expiresAt.Unix()))
	payload = append(payload, tenantID...)
	return capabilityEncoding.EncodeToString(payload) + "." + capabilityEncoding.EncodeToString(capabilityMAC(key, payload))
}

// VerifyDownload checks token against key at time now and returns what it
// grants: the export id, the tenant id and the expiry (UTC, whole seconds).
//
// A token that is malformed, signed with another key or altered in any way
// gives ErrCapabilityInvalid and zero values; so does a key shorter than
// MinCapabilityKeyLen. The MAC is compared in constant time before anything
// else of the payload is looked at. A genuine token whose expiry is not
// after now gives ErrCapabilityExpired together with the values it carries.
// VerifyDownload does not panic, whatever the token.
func VerifyDownload(key []byte, token string, now time.Time) (exportID uuid.UUID, tenantID string, expiresAt time.Time, err error) {
	invalid := func(why string) (uuid.UUID, string, time.Time, error) {
		return uuid.Nil, "", time.Time{}, fmt.Errorf("%w: %s", ErrCapabilityInvalid, why)
	}
	if len(key) < MinCapabilityKeyLen {
		return invalid("verification key too short")
	}
	if len(token) > maxCapabilityTokenLen {
		return invalid("token too long")
	}
	if strings.ContainsAny(token, "\r\n") {
		// The base64 decoder would skip them, giving a token a second
		// spelling.
		return invalid("line break in token")
	}
	encPayload, encMAC, ok := strings.Cut(token, ".")
	if !ok {
		return invalid("no MAC")
	}
	payload, err := capabilityEncoding.DecodeString(encPayload)
	if err != nil {
		return invalid("payload is not base64url")
	}
	mac, err := capabilityEncoding.DecodeString(encMAC)
	if err != nil {
		return invalid("MAC is not base64url")
	}
	if !hmac.Equal(mac, capabilityMAC(key, payload)) {
		return invalid("MAC mismatch")
	}
	if len(payload) < capabilityFixedLen || payload[0] != capabilityVersion {
		return invalid("unknown layout")
	}
	copy(exportID[:], payload[1:17])
	expiresAt = time.Unix(int64(binary.BigEndian.Uint64(payload[17:25])), 0).UTC()
	tenantID = string(payload[capabilityFixedLen:])
	if !now.Before(expiresAt) {
		return exportID, tenantID, expiresAt, fmt.Errorf("%w at %s", ErrCapabilityExpired, expiresAt.Format(time.RFC3339))
	}
	return exportID, tenantID, expiresAt, nil
}

// capabilityMAC returns the HMAC-SHA256 of payload under key, domain
// separated by capabilityMACLabel.
func capabilityMAC(key, payload []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(capabilityMACLabel))
	m.Write(payload)
	return m.Sum(nil)
}
