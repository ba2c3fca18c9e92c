package export

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

var (
	testCapKey    = []byte("0123456789abcdef0123456789abcdef")
	testCapExport = uuid.MustParse("6f1c2b3a-4d5e-4f60-8a9b-0c1d2e3f4a5b")
	testCapExpiry = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	// testCapNow is before testCapExpiry.
	testCapNow = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
)

func TestCapabilityRoundTrip(t *testing.T) {
	t.Parallel()
	for _, tenant := range []string{"acme", "", "t/ü %", strings.Repeat("x", MaxCapabilityTenantLen)} {
		token := SignDownload(testCapKey, testCapExport, tenant, testCapExpiry.Add(999*time.Millisecond))
		require.NotContains(t, token, "=")
		require.Equal(t, token, strings.Map(func(r rune) rune {
			if r == '-' || r == '_' || r == '.' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' {
				return r
			}
			return '!'
		}, token), "token is URL-safe")

		id, gotTenant, exp, err := VerifyDownload(testCapKey, token, testCapNow)
		require.NoError(t, err)
		require.Equal(t, testCapExport, id)
		require.Equal(t, tenant, gotTenant)
		require.Equal(t, testCapExpiry, exp, "expiry is whole seconds, rounded down")
	}
}

func TestCapabilityExpiry(t *testing.T) {
	t.Parallel()
	token := SignDownload(testCapKey, testCapExport, "acme", testCapExpiry)

	_, _, _, err := VerifyDownload(testCapKey, token, testCapExpiry.Add(-time.Nanosecond))
	require.NoError(t, err)

	for _, now := range []time.Time{testCapExpiry, testCapExpiry.Add(time.Hour)} {
		id, tenant, exp, err := VerifyDownload(testCapKey, token, now)
		require.ErrorIs(t, err, ErrCapabilityExpired)
		require.False(t, errors.Is(err, ErrCapabilityInvalid))
		require.Equal(t, testCapExport, id)
		require.Equal(t, "acme", tenant)
		require.Equal(t, testCapExpiry, exp)
	}
}

func TestCapabilityRejectsForgeries(t *testing.T) {
	t.Parallel()
	token := SignDownload(testCapKey, testCapExport, "acme", testCapExpiry)
	payloadPart, macPart, _ := strings.Cut(token, ".")
	payload, err := base64.RawURLEncoding.DecodeString(payloadPart)
	require.NoError(t, err)

	flip := func(b []byte, i int) []byte {
		c := append([]byte{}, b...)
		c[i] ^= 1
		return c
	}
	enc := base64.RawURLEncoding.EncodeToString
	mac, err := base64.RawURLEncoding.DecodeString(macPart)
	require.NoError(t, err)
	otherTenant := SignDownload(testCapKey, testCapExport, "evil", testCapExpiry)
	_, otherMAC, _ := strings.Cut(otherTenant, ".")

	cases := map[string]string{
		"empty":                "",
		"garbage":              "not a token",
		"no MAC":               payloadPart,
		"empty MAC":            payloadPart + ".",
		"empty payload":        "." + macPart,
		"dot only":             ".",
		"extra part":           token + ".x",
		"version flipped":      enc(flip(payload, 0)) + "." + macPart,
		"export id flipped":    enc(flip(payload, 5)) + "." + macPart,
		"expiry flipped":       enc(flip(payload, 20)) + "." + macPart,
		"tenant flipped":       enc(flip(payload, len(payload)-1)) + "." + macPart,
		"tenant extended":      enc(append(append([]byte{}, payload...), 'x')) + "." + macPart,
		"MAC flipped":          payloadPart + "." + enc(flip(mac, 31)),
		"MAC truncated":        payloadPart + "." + enc(mac[:31]),
		"MAC of other token":   payloadPart + "." + otherMAC,
		"token truncated":      token[:len(token)-1],
		"padded":               token + "==",
		"standard base64":      strings.NewReplacer("-", "+", "_", "/").Replace(token) + "+",
		"line break":           payloadPart + "\n." + macPart,
		"short payload signed": signedRaw(testCapKey, payload[:10]),
		"unknown version":      signedRaw(testCapKey, flip(payload, 0)),
		"too long":             strings.Repeat("A", 5000) + "." + macPart,
	}
	for name, forged := range cases {
		id, tenant, exp, err := VerifyDownload(testCapKey, forged, testCapNow)
		require.ErrorIs(t, err, ErrCapabilityInvalid, name)
		require.Equal(t, uuid.Nil, id, name)
		require.Empty(t, tenant, name)
		require.True(t, exp.IsZero(), name)
	}

	otherKey := []byte("fedcba9876543210fedcba9876543210")
	_, _, _, err = VerifyDownload(otherKey, token, testCapNow)
	require.ErrorIs(t, err, ErrCapabilityInvalid)
	_, _, _, err = VerifyDownload(testCapKey[:31], token, testCapNow)
	require.ErrorIs(t, err, ErrCapabilityInvalid)
}

// signedRaw returns a token whose MAC is genuine for an arbitrary payload,
// to check that VerifyDownload still validates the payload's layout.
func signedRaw(key, payload []byte) string {
	return base64.RawURLEncoding.EncodeToString(payload) + "." + base64.RawURLEncoding.EncodeToString(capabilityMAC(key, payload))
}

func TestSignDownloadPanicsOnMisuse(t *testing.T) {
	t.Parallel()
	require.Panics(t, func() { SignDownload(testCapKey[:31], testCapExport, "acme", testCapExpiry) })
	require.Panics(t, func() {
		SignDownload(testCapKey, testCapExport, strings.Repeat("x", MaxCapabilityTenantLen+1), testCapExpiry)
	})
}

// FuzzVerifyDownload feeds arbitrary tokens to VerifyDownload: it must
// never panic, must fail with one of its two errors or succeed, and must
// accept a token only in the exact spelling SignDownload gives it. The seed
// corpus is in testdata/fuzz/FuzzVerifyDownload.
func FuzzVerifyDownload(f *testing.F) {
	f.Add(SignDownload(testCapKey, testCapExport, "acme", testCapExpiry))
	f.Fuzz(func(t *testing.T, token string) {
		id, tenant, exp, err := VerifyDownload(testCapKey, token, testCapNow)
		switch {
		case err == nil, errors.Is(err, ErrCapabilityExpired):
			require.Equal(t, token, SignDownload(testCapKey, id, tenant, exp))
		case errors.Is(err, ErrCapabilityInvalid):
			require.Equal(t, uuid.Nil, id)
		default:
			t.Fatalf("unexpected error %v", err)
		}
	})
}
