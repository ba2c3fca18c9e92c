package auth_test

import (
	"encoding/hex"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/auth"
)

func TestLoadOrCreateSecretCreates(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state", "aether")
	path := filepath.Join(dir, "jwt-secret")

	secret, err := auth.LoadOrCreateSecret(path)
	require.NoError(t, err)
	require.Len(t, secret, 32)

	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, hex.EncodeToString(secret)+"\n", string(data))

	if runtime.GOOS != "windows" {
		fi, err := os.Stat(path)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
		di, err := os.Stat(dir)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o700), di.Mode().Perm())
	}

	again, err := auth.LoadOrCreateSecret(path)
	require.NoError(t, err)
	require.Equal(t, secret, again)

	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary files are left behind")

	// The secret is usable for minting and verifying.
	_, err = auth.MintHS256(secret, validRequest(), time.Now())
	require.NoError(t, err)
}

func TestLoadOrCreateSecretConcurrent(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "jwt-secret")

	const n = 10
	secrets := make([][]byte, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			secrets[i], errs[i] = auth.LoadOrCreateSecret(path)
		})
	}
	close(start)
	wg.Wait()

	for i := range n {
		require.NoError(t, errs[i])
		require.Equal(t, secrets[0], secrets[i])
	}
	onDisk, err := auth.LoadOrCreateSecret(path)
	require.NoError(t, err)
	require.Equal(t, secrets[0], onDisk)

	entries, err := os.ReadDir(filepath.Join(dir, "sub"))
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary files are left behind")
}

func TestLoadOrCreateSecretReadsExisting(t *testing.T) {
	path := filepath.Join(t.TempDir(), "jwt-secret")
	want := []byte(strings.Repeat("\xab", 48))
	require.NoError(t, os.WriteFile(path, []byte("  "+strings.ToUpper(hex.EncodeToString(want))+"\r\n"), 0o600))

	got, err := auth.LoadOrCreateSecret(path)
	require.NoError(t, err)
	require.Equal(t, want, got)
}

func TestLoadOrCreateSecretRejectsBadFile(t *testing.T) {
	for name, content := range map[string]string{
		"empty":      "",
		"not hex":    "this is not a hex secret, even though it is long enough\n",
		"too short":  hex.EncodeToString([]byte("short")) + "\n",
		"odd length": strings.Repeat("a", 65),
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "jwt-secret")
			require.NoError(t, os.WriteFile(path, []byte(content), 0o600))

			secret, err := auth.LoadOrCreateSecret(path)
			require.Error(t, err)
			require.Nil(t, secret)
			if content != "" {
				require.NotContains(t, err.Error(), strings.TrimSpace(content), "the error does not reveal the file")
			}

			after, err := os.ReadFile(path)
			require.NoError(t, err)
			require.Equal(t, content, string(after), "a bad file is left untouched")
		})
	}
}

func TestLoadOrCreateSecretUnwritableDir(t *testing.T) {
	if runtime.GOOS == "windows" || os.Geteuid() == 0 {
		t.Skip("needs POSIX permissions and a non-root user")
	}
	dir := t.TempDir()
	require.NoError(t, os.Chmod(dir, 0o500))
	t.Cleanup(func() { _ = os.Chmod(dir, 0o700) })

	_, err := auth.LoadOrCreateSecret(filepath.Join(dir, "jwt-secret"))
	require.Error(t, err)
}

func TestParseSecret(t *testing.T) {
	raw := " exactly-32-bytes-with-spaces!! "
	require.Len(t, raw, 32)
	secret, err := auth.ParseSecret(raw)
	require.NoError(t, err)
	require.Equal(t, []byte(raw), secret, "used as-is, not trimmed or decoded")

	long := strings.Repeat("k", 100)
	secret, err = auth.ParseSecret(long)
	require.NoError(t, err)
	require.Equal(t, []byte(long), secret)

	for _, short := range []string{"", "hunter2", strings.Repeat("x", 31)} {
		secret, err := auth.ParseSecret(short)
		require.Error(t, err)
		require.Nil(t, secret)
		require.Contains(t, err.Error(), "at least 32")
		if short != "" {
			require.NotContains(t, err.Error(), short)
		}
	}
}
