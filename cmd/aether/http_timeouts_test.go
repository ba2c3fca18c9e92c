package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestServeHTTPTimeouts drives the binary with short HTTP timeouts: a
// request without a token is refused before its body is read; a client
// that trickles an authenticated body is disconnected by the read timeout
// while other requests are served at once; a live SSE stream outlives the
// read and write timeouts as long as its client reads.
func TestServeHTTPTimeouts(t *testing.T) {
	t.Parallel()
	s := serveReady(t, "AETHER_HTTP_READ_TIMEOUT=1s", "AETHER_HTTP_WRITE_TIMEOUT=1s", "AETHER_SSE_HEARTBEAT=200ms")
	dir, addr, base := s.dir, s.addr, s.base
	tok := mintToken(t, dir, "--tenant", "acme", "--project", "plant-1", "--permissions", "audit:read,audit:write")

	// rawPost sends the headers of an 8 MB POST and the first bytes of its
	// body, then stops sending; it returns the connection and a reader of
	// the response.
	rawPost := func(auth string) (net.Conn, *bufio.Reader) {
		conn, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		t.Cleanup(func() { _ = conn.Close() })
		head := "POST /graphql HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\nContent-Length: 8000000\r\n"
		if auth != "" {
			head += "Authorization: Bearer " + auth + "\r\n"
		}
		_, err = io.WriteString(conn, head+"\r\n"+`{"query":"`+strings.Repeat(" ", 100))
		require.NoError(t, err)
		return conn, bufio.NewReader(conn)
	}

	t.Run("no token: 401 before the body", func(t *testing.T) {
		conn, rd := rawPost("")
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
		resp, err := http.ReadResponse(rd, nil)
		require.NoError(t, err, "answered without waiting for the body")
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
		require.True(t, resp.Close, "the connection closes: the body is never read")
	})

	t.Run("a trickled body is cut by the read timeout", func(t *testing.T) {
		conn, rd := rawPost(tok)
		start := time.Now()
		// Other clients are served while this one stalls.
		resp, err := http.Get(base + "/healthz")
		require.NoError(t, err)
		_ = resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)

		require.NoError(t, conn.SetReadDeadline(time.Now().Add(20*time.Second)))
		_, err = io.ReadAll(rd) // the server answers (or not) and closes
		require.NoError(t, err, "the server closed the connection")
		require.Less(t, time.Since(start), 15*time.Second)
	})

	t.Run("a live stream outlives the timeouts", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/audit/events/stream?follow=true&projectId=plant-1", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)

		// Heartbeats every 200 ms: 15 of them span three seconds, beyond
		// both one-second timeouts.
		sc := bufio.NewScanner(resp.Body)
		start := time.Now()
		for beats := 0; beats < 15; {
			require.True(t, sc.Scan(), "stream ended after %s: %v", time.Since(start), sc.Err())
			if strings.HasPrefix(sc.Text(), ":") {
				beats++
			}
		}
		require.Greater(t, time.Since(start), 2*time.Second)

		data, errs := postGraphQL(t, base, tok, `mutation($in: RecordAuditEventInput!) { recordAuditEvent(input: $in) { event { sequence } } }`,
			map[string]any{"in": map[string]any{
				"projectId": "plant-1", "action": "device.rebooted", "occurredAt": time.Now().UTC().Format(time.RFC3339Nano),
				"subject": map[string]any{"type": "SERVICE", "id": "s"}, "resource": map[string]any{"type": "device", "id": "d"}, "outcome": "SUCCESS",
			}})
		require.Empty(t, errs, "%s", data)
		for {
			require.True(t, sc.Scan(), "stream ended: %v", sc.Err())
			if line := sc.Text(); strings.HasPrefix(line, "data: ") {
				require.Contains(t, line, `"action":"device.rebooted"`, fmt.Sprint(line))
				return
			}
		}
	})
}
