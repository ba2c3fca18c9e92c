package main

import (
	"io"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/store/storetest"
)

// TestServeDebugAddr serves the runtime's profiles on --debug-addr, apart
// from the service's address (which does not serve them), never the
// command line, and stops them with the service.
func TestServeDebugAddr(t *testing.T) {
	t.Parallel()
	addr, debugAddr := freeAddr(t), freeAddr(t)
	const secret = "0123456789abcdef0123456789abcdef-flag-secret"
	p := start(t, []string{
		"DATABASE_URL=" + storetest.NewDatabase(t),
		"AETHER_ADDR=" + addr,
		"AETHER_DEBUG_ADDR=" + debugAddr,
		"AETHER_DATA_DIR=" + dataDir(t),
		"AETHER_LOG_LEVEL=warn",
	}, "serve", "--jwt-secret", secret)
	awaitReady(t, p, "http://"+addr, 60*time.Second)

	client := &http.Client{Timeout: 30 * time.Second}
	get := func(url string) (int, string) {
		resp, err := client.Get(url)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(body)
	}
	code, body := get("http://" + debugAddr + "/debug/pprof/goroutine?debug=1")
	require.Equal(t, http.StatusOK, code)
	require.Regexp(t, `^goroutine profile: total [1-9][0-9]*\n`, body)
	code, body = get("http://" + debugAddr + "/debug/pprof/heap?gc=1&debug=1")
	require.Equal(t, http.StatusOK, code)
	require.Regexp(t, `(?m)^# HeapAlloc = [1-9][0-9]*$`, body)

	// The command line, which holds secrets passed as flags, is not served.
	code, body = get("http://" + debugAddr + "/debug/pprof/cmdline")
	require.NotEqual(t, http.StatusOK, code)
	require.NotContains(t, body, secret)

	code, _ = get("http://" + addr + "/debug/pprof/goroutine?debug=1")
	require.NotEqual(t, http.StatusOK, code, "the service's own address serves profiles")

	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, 0, p.wait(t, 30*time.Second), "stderr:\n%s", p.stderr.String())
	_, err := (&http.Client{Timeout: 2 * time.Second}).Get("http://" + debugAddr + "/debug/pprof/")
	require.Error(t, err, "still serving profiles after exit")
}
