package webhook

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSignAllocatesLittleBeyondItsHMACs: a signature of one key costs the
// HMAC's own allocations, one buffer and the header value, not a
// conversion per piece of the signed content. Every request signs once.
func TestSignAllocatesLittleBeyondItsHMACs(t *testing.T) {
	_, key, err := NewSecret()
	require.NoError(t, err)
	body := []byte(`{"type":"bench.x","data":{"id":"e1","n":42}}`)
	ts := time.Unix(1614265330, 0)
	keys := [][]byte{key}
	allocs := testing.AllocsPerRun(100, func() { _ = Sign("msg_2Lh9KTrj0XJrXDZyWSvS8Cp1lLm", ts, body, keys) })
	require.LessOrEqual(t, allocs, 8.0)
}
