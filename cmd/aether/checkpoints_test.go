package main

import (
	"crypto/ed25519"
	"encoding/hex"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/checkpoint"
)

// TestServeNeedsCheckpointKey: without --dev, serve refuses to start
// (before it opens the database) without a checkpoint key an operator
// chose, and names what is wrong with a bad one without quoting it.
func TestServeNeedsCheckpointKey(t *testing.T) {
	t.Parallel()
	dir := dataDir(t)
	keyFile := filepath.Join(t.TempDir(), "key.pem")
	require.NoError(t, os.WriteFile(keyFile, []byte("secret-looking-garbage"), 0o600))
	base := []string{"AETHER_DEV=false", "AETHER_JWT_SECRET=0123456789abcdef0123456789abcdef"}
	for _, tc := range []struct {
		name, want string
		env        []string
	}{
		{"no key", "no checkpoint key is configured", nil},
		{"bad key", "AETHER_CHECKPOINT_KEY: checkpoint key: want a PKCS #8 PEM key", []string{"AETHER_CHECKPOINT_KEY=secret-looking-garbage"}},
		{"bad key file", keyFile + ": checkpoint key", []string{"AETHER_CHECKPOINT_KEY_FILE=" + keyFile}},
		{"both", "not both", []string{"AETHER_CHECKPOINT_KEY_FILE=" + keyFile, "AETHER_CHECKPOINT_KEY=x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := append(append([]string{"AETHER_DATA_DIR=" + dir, "DATABASE_URL=postgres://nobody@127.0.0.1:1/none"}, base...), tc.env...)
			stdout, stderr, code := run(t, env, "serve")
			require.NotEqual(t, 0, code)
			require.Empty(t, stdout)
			require.Contains(t, stderr, tc.want)
			require.NotContains(t, stderr, "secret-looking-garbage", "a key is never quoted")
		})
	}
}

// TestCheckpointKeyRing: --dev generates the key into the data dir (0600)
// and reuses it; a key given as a seed and retired keys from a JWKS file
// make one ring.
func TestCheckpointKeyRing(t *testing.T) {
	t.Parallel()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir := dataDirFlags{DataDir: filepath.Join(t.TempDir(), "data")}
	first, err := checkpointFlags{}.keyRing(true, dir, logger)
	require.NoError(t, err)
	info, err := os.Stat(filepath.Join(dir.DataDir, "checkpoint-key"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	again, err := checkpointFlags{}.keyRing(true, dir, logger)
	require.NoError(t, err)
	require.Equal(t, first.KeyID(), again.KeyID(), "the generated key is reused")

	_, err = checkpointFlags{}.keyRing(false, dir, logger)
	require.ErrorIs(t, err, errNoCheckpointKey, "outside --dev the generated key is not used")

	retiredFile := filepath.Join(t.TempDir(), "retired.json")
	require.NoError(t, os.WriteFile(retiredFile, first.JWKS(), 0o644))
	key, err := checkpoint.GenerateKey()
	require.NoError(t, err)
	ring, err := checkpointFlags{CheckpointKey: hex.EncodeToString(key.Seed()), CheckpointRetiredKeys: []string{retiredFile}}.keyRing(false, dir, logger)
	require.NoError(t, err)
	require.Equal(t, checkpoint.KeyID(key.Public().(ed25519.PublicKey)), ring.KeyID())
	_, ok := ring.PublicKey(first.KeyID())
	require.True(t, ok, "the retired key verifies")
	require.Len(t, ring.PublicKeys(), 2)
}
