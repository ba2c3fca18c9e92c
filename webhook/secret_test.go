package webhook

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNewSecretRoundTrip(t *testing.T) {
	t.Parallel()
	encoded, raw, err := NewSecret()
	require.NoError(t, err)
	require.Len(t, raw, 32)
	require.True(t, strings.HasPrefix(encoded, SecretPrefix))
	require.Equal(t, SecretPrefix+base64.StdEncoding.EncodeToString(raw), encoded)

	parsed, err := ParseSecret(encoded)
	require.NoError(t, err)
	require.Equal(t, raw, parsed)

	other, _, err := NewSecret()
	require.NoError(t, err)
	require.NotEqual(t, encoded, other, "secrets must be random")
}

func TestParseSecretAcceptsStandardWebhooksSecret(t *testing.T) {
	t.Parallel()
	// The 24-byte secret used by the Standard Webhooks test suites.
	raw, err := ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	require.NoError(t, err)
	require.Len(t, raw, 24)
}

func TestParseSecretRejectsBadInput(t *testing.T) {
	t.Parallel()
	key32 := base64.StdEncoding.EncodeToString(make([]byte, 32))
	tests := []struct {
		name, in, wantErr string
	}{
		{"empty string", "", "prefix"},
		{"missing prefix", key32, "prefix"},
		{"wrong prefix case", "WHSEC_" + key32, "prefix"},
		{"prefix only", SecretPrefix, "empty key"},
		{"not base64", SecretPrefix + "not*base64!", "base64"},
		{"url-safe alphabet", SecretPrefix + strings.Repeat("-_", 22), "base64"},
		{"missing padding", SecretPrefix + strings.TrimRight(key32, "="), "base64"},
		{"surrounding space", SecretPrefix + " " + key32, "base64"},
		{"too short", SecretPrefix + base64.StdEncoding.EncodeToString(make([]byte, 16)), "16 bytes"},
		{"too long", SecretPrefix + base64.StdEncoding.EncodeToString(make([]byte, 65)), "65 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			raw, err := ParseSecret(tt.in)
			require.ErrorContains(t, err, tt.wantErr)
			require.Nil(t, raw)
		})
	}
}
