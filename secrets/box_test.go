package secrets

import (
	"encoding/base64"
	"encoding/hex"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

func testKey(b byte) []byte {
	k := make([]byte, KeySize)
	for i := range k {
		k[i] = b
	}
	return k
}

func TestBoxRoundTripAndBinding(t *testing.T) {
	box, err := NewBox(testKey(1))
	require.NoError(t, err)
	sealed, err := box.Seal([]byte("whsec_plain"), []byte("dest/1"))
	require.NoError(t, err)
	require.NotContains(t, string(sealed), "whsec_plain")

	got, err := box.Open(sealed, []byte("dest/1"))
	require.NoError(t, err)
	require.Equal(t, "whsec_plain", string(got))

	again, err := box.Seal([]byte("whsec_plain"), []byte("dest/1"))
	require.NoError(t, err)
	require.NotEqual(t, sealed, again, "a fresh nonce per seal")

	_, err = box.Open(sealed, []byte("dest/2"))
	require.ErrorIs(t, err, ErrOpen, "bound to its associated data")

	other, err := NewBox(testKey(2))
	require.NoError(t, err)
	_, err = other.Open(sealed, []byte("dest/1"))
	require.ErrorIs(t, err, ErrOpen, "another key does not open it")

	tampered := append([]byte(nil), sealed...)
	tampered[len(tampered)-1] ^= 1
	_, err = box.Open(tampered, []byte("dest/1"))
	require.ErrorIs(t, err, ErrOpen)
	_, err = box.Open(sealed[:5], []byte("dest/1"))
	require.ErrorIs(t, err, ErrOpen)
}

func TestNewBoxRejectsShortKey(t *testing.T) {
	_, err := NewBox(make([]byte, 16))
	require.ErrorContains(t, err, "want 32")
}

func TestParseKey(t *testing.T) {
	k := testKey(7)
	got, err := ParseKey(hex.EncodeToString(k))
	require.NoError(t, err)
	require.Equal(t, k, got)
	got, err = ParseKey(base64.StdEncoding.EncodeToString(k) + "\n")
	require.NoError(t, err)
	require.Equal(t, k, got)
	_, err = ParseKey("c2hvcnQ=")
	require.Error(t, err)
	require.NotContains(t, err.Error(), "c2hvcnQ=")
}

func TestLoadOrCreateKeyFileConcurrent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "master-key")
	keys := make([][]byte, 8)
	var wg sync.WaitGroup
	for i := range keys {
		wg.Go(func() {
			k, err := LoadOrCreateKeyFile(path, "master key", KeySize)
			require.NoError(t, err)
			keys[i] = k
		})
	}
	wg.Wait()
	for _, k := range keys {
		require.Equal(t, keys[0], k, "racing creators agree on one key")
	}
	info, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())

	require.NoError(t, os.WriteFile(path, []byte("zz\n"), 0o600))
	_, err = LoadOrCreateKeyFile(path, "master key", KeySize)
	require.ErrorContains(t, err, "master key file")
}
