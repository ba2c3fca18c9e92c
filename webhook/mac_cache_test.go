package webhook

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSignatureWithReusedMACs: the Sender's signatures, from keyed states
// it reuses, are Sign's, key after key and request after request, and they
// do without the allocations of a new HMAC.
func TestSignatureWithReusedMACs(t *testing.T) {
	_, k1, err := NewSecret()
	require.NoError(t, err)
	_, k2, err := NewSecret()
	require.NoError(t, err)
	macs := newMACCache()
	ts := []byte("1614265330")
	for i := range 5 {
		body := []byte(fmt.Sprintf(`{"n":%d}`, i))
		for _, keys := range [][][]byte{{k1}, {k2, k1}, {k1, k2}} {
			want := signature("msg_1", ts, body, keys, nil)
			require.Equal(t, want, signature("msg_1", ts, body, keys, macs))
		}
	}
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	body := []byte(`{"type":"bench.x"}`)
	keys := [][]byte{k1}
	reused := testing.AllocsPerRun(100, func() { _ = signature("msg_1", ts, body, keys, macs) })
	fresh := testing.AllocsPerRun(100, func() { _ = signature("msg_1", ts, body, keys, nil) })
	require.LessOrEqual(t, reused, fresh-4, "a reused keyed state saves a new HMAC's allocations")
}

// TestMACCacheIsBounded: the cache starts over when it holds maxMACKeys keys.
func TestMACCacheIsBounded(t *testing.T) {
	macs := newMACCache()
	for i := range maxMACKeys + 10 {
		_, pool := macs.get([]byte(fmt.Sprintf("key-%d", i)))
		require.NotNil(t, pool)
	}
	require.LessOrEqual(t, len(macs.pools), maxMACKeys)
}
