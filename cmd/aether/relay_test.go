package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRelayRefusesBadSettings: aether relay documents its settings and
// stops with a message, before touching any database, when one is wrong.
// Its shipping is tested end to end in outbox/crash_test.go.
func TestRelayRefusesBadSettings(t *testing.T) {
	stdout, _, code := run(t, nil, "relay", "--help")
	require.Equal(t, 0, code)
	for _, flag := range []string{"--source-database-url", "--target-url", "--token-file", "--batch-size",
		"--poll-interval", "--[no-]migrate", "--metrics-addr", "AETHER_RELAY_TOKEN_FILE"} {
		require.Contains(t, stdout, flag)
	}

	_, stderr, code := run(t, nil, "relay", "--target-url", "http://127.0.0.1:1")
	require.NotEqual(t, 0, code)
	require.Contains(t, stderr, "--source-database-url")

	missing := filepath.Join(t.TempDir(), "token")
	_, stderr, code = run(t, nil, "relay", "--source-database-url", "postgres://127.0.0.1:1/x",
		"--target-url", "http://127.0.0.1:1", "--token-file", missing)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "--token-file")

	empty := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(empty, []byte("\n"), 0o600))
	_, stderr, code = run(t, nil, "relay", "--source-database-url", "postgres://127.0.0.1:1/x",
		"--target-url", "http://127.0.0.1:1", "--token-file", empty)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "empty")

	_, stderr, code = run(t, nil, "relay", "--source-database-url", "postgres://127.0.0.1:1/x",
		"--target-url", "http://127.0.0.1:1", "--token-file", empty, "--batch-size", "5000")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "--batch-size")
}
