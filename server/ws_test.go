package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/server"
)

// wsClient speaks graphql-transport-ws to the test server.
type wsClient struct {
	t    *testing.T
	conn *websocket.Conn
}

// dialWS opens a graphql-transport-ws connection and, when token is not
// empty, initialises it with the token in the connection_init payload.
func (b *testBundle) dialWS(t *testing.T, token string) *wsClient {
	t.Helper()
	d := websocket.Dialer{Subprotocols: []string{"graphql-transport-ws"}, HandshakeTimeout: 10 * time.Second}
	conn, resp, err := d.Dial("ws"+strings.TrimPrefix(b.url, "http")+"/graphql", nil)
	require.NoError(t, err)
	resp.Body.Close()
	t.Cleanup(func() { conn.Close() })
	c := &wsClient{t: t, conn: conn}
	if token != "" {
		c.send(map[string]any{"type": "connection_init", "payload": map[string]any{"Authorization": "Bearer " + token}})
		require.Equal(t, "connection_ack", c.read()["type"])
	}
	return c
}

func (c *wsClient) send(msg map[string]any) {
	c.t.Helper()
	require.NoError(c.t, c.conn.WriteJSON(msg))
}

// read returns the next message that is not a ping (answering pings).
func (c *wsClient) read() map[string]any {
	c.t.Helper()
	for {
		require.NoError(c.t, c.conn.SetReadDeadline(time.Now().Add(30*time.Second)))
		var msg map[string]any
		require.NoError(c.t, c.conn.ReadJSON(&msg))
		if msg["type"] == "ping" {
			c.send(map[string]any{"type": "pong"})
			continue
		}
		return msg
	}
}

// closeCode reads until the server closes the connection and returns the code.
func (c *wsClient) closeCode() int {
	c.t.Helper()
	require.NoError(c.t, c.conn.SetReadDeadline(time.Now().Add(30*time.Second)))
	for {
		_, _, err := c.conn.ReadMessage()
		if err != nil {
			var ce *websocket.CloseError
			require.ErrorAs(c.t, err, &ce)
			return ce.Code
		}
	}
}

const subscribeQuery = `subscription($p: ID!, $after: Uint64, $f: AuditEventFilter) {
  auditEventRecorded(projectId: $p, afterSequence: $after, filter: $f) { sequence action }
}`

func (c *wsClient) subscribe(id string, vars map[string]any) {
	c.t.Helper()
	c.send(map[string]any{"id": id, "type": "subscribe", "payload": map[string]any{"query": subscribeQuery, "variables": vars}})
}

// sequences reads n "next" messages of operation id and returns their sequences.
func (c *wsClient) sequences(id string, n int) []uint64 {
	c.t.Helper()
	var out []uint64
	for len(out) < n {
		msg := c.read()
		require.Equal(c.t, "next", msg["type"], "%v", msg)
		require.Equal(c.t, id, msg["id"])
		raw, err := json.Marshal(msg["payload"])
		require.NoError(c.t, err)
		var p struct {
			Data struct {
				AuditEventRecorded struct {
					Sequence string `json:"sequence"`
				} `json:"auditEventRecorded"`
			} `json:"data"`
		}
		require.NoError(c.t, json.Unmarshal(raw, &p))
		seq, err := strconv.ParseUint(p.Data.AuditEventRecorded.Sequence, 10, 64)
		require.NoError(c.t, err)
		out = append(out, seq)
	}
	return out
}

func seqRange(from, to uint64) []uint64 {
	var out []uint64
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}

// TestWebSocketSubscriptionResumesWithoutGaps resumes from a sequence while
// events are recorded concurrently: replay then live, dense and in order.
func TestWebSocketSubscriptionResumesWithoutGaps(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	tok := b.token(t, tokenOpts{})
	b.recordN(t, tok, 10, "device.before")

	c := b.dialWS(t, tok)
	c.subscribe("resume", map[string]any{"p": projectA, "after": "4"})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 5 {
				b.recordN(t, tok, 2, "device.during")
			}
		})
	}
	got := c.sequences("resume", 6+40)
	wg.Wait()
	require.Equal(t, seqRange(5, 50), got)

	// Without afterSequence it starts with what commits after it began:
	// record until the first event arrives; it is a new one, not a replay.
	c.send(map[string]any{"id": "resume", "type": "complete"})
	c = b.dialWS(t, tok)
	c.subscribe("now", map[string]any{"p": projectA, "f": map[string]any{"action": "device.after"}})
	stop := make(chan struct{})
	recorder := make(chan struct{})
	go func() {
		defer close(recorder)
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
				b.recordN(t, tok, 1, "device.after")
			}
		}
	}()
	first := c.sequences("now", 1)
	close(stop)
	<-recorder
	require.Greater(t, first[0], uint64(50))
}

// TestWebSocketSubscriptionIsolation: another project is NOT_FOUND, no
// permission is FORBIDDEN, another tenant sees nothing of this one.
func TestWebSocketSubscriptionIsolation(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	tok := b.token(t, tokenOpts{})
	b.recordN(t, tok, 3, "device.a")

	c := b.dialWS(t, tok)
	c.subscribe("other-project", map[string]any{"p": "proj-2", "after": "0"})
	c.requireOperationError("other-project", "NOT_FOUND")

	noRead := b.dialWS(t, b.token(t, tokenOpts{perms: []app.Permission{app.PermissionAuditWrite}}))
	noRead.subscribe("no-read", map[string]any{"p": projectA, "after": "0"})
	noRead.requireOperationError("no-read", "FORBIDDEN")

	otherTenant := b.dialWS(t, b.token(t, tokenOpts{tenant: tenantB}))
	otherTenant.subscribe("t2", map[string]any{"p": projectA, "after": "0"})
	mine := b.dialWS(t, tok)
	mine.subscribe("mine", map[string]any{"p": projectA, "after": "3"})
	b.recordN(t, tok, 1, "device.b")
	require.Equal(t, []uint64{4}, mine.sequences("mine", 1))
	// The other tenant's subscription got nothing: after a ping round trip
	// the next message is the pong.
	otherTenant.send(map[string]any{"type": "ping"})
	require.Equal(t, "pong", otherTenant.read()["type"])
}

// requireOperationError reads the failure of operation id: as graphql-ws
// servers do for a subscription whose source stream cannot be created, a
// "next" carrying the errors followed by "complete" (an "error" message is
// accepted too).
func (c *wsClient) requireOperationError(id, code string) {
	c.t.Helper()
	msg := c.read()
	require.Equal(c.t, id, msg["id"])
	require.Contains(c.t, []any{"next", "error"}, msg["type"])
	require.Contains(c.t, mustJSON(c.t, msg["payload"]), `"code":"`+code+`"`)
	if msg["type"] == "next" {
		require.Equal(c.t, "complete", c.read()["type"])
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	raw, err := json.Marshal(v)
	require.NoError(t, err)
	return string(raw)
}

// TestWebSocketAuthentication: no or bad token closes with 4403; the
// Authorization header of the upgrade also works; an expiring token closes
// the connection with 4403.
func TestWebSocketAuthentication(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)

	bad := b.dialWS(t, "")
	bad.send(map[string]any{"type": "connection_init", "payload": map[string]any{"Authorization": "Bearer nope"}})
	require.Equal(t, 4403, bad.closeCode())

	none := b.dialWS(t, "")
	none.send(map[string]any{"type": "connection_init"})
	require.Equal(t, 4403, none.closeCode())

	tok := b.token(t, tokenOpts{})
	d := websocket.Dialer{Subprotocols: []string{"graphql-transport-ws"}}
	conn, resp, err := d.Dial("ws"+strings.TrimPrefix(b.url, "http")+"/graphql", http.Header{"Authorization": {"Bearer " + tok}})
	require.NoError(t, err)
	resp.Body.Close()
	defer conn.Close()
	require.NoError(t, conn.WriteJSON(map[string]any{"type": "connection_init"}))
	var ack map[string]any
	require.NoError(t, conn.ReadJSON(&ack))
	require.Equal(t, "connection_ack", ack["type"])

	expiring := b.dialWS(t, b.token(t, tokenOpts{ttl: 2 * time.Second, now: time.Now().Truncate(time.Second)}))
	require.Equal(t, 4403, expiring.closeCode())
}

// TestWebSocketShutdown: Server.Shutdown closes sockets with 1001.
func TestWebSocketShutdown(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	c := b.dialWS(t, b.token(t, tokenOpts{}))
	c.subscribe("s", map[string]any{"p": projectA})
	go b.server.Shutdown(t.Context())
	require.Equal(t, websocket.CloseGoingAway, c.closeCode())
}

// TestWebSocketSlowConsumerDoesNotDelayOthers: a subscriber that never
// reads does not hold back another one.
func TestWebSocketSlowConsumerDoesNotDelayOthers(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	tok := b.token(t, tokenOpts{})
	slow := b.dialWS(t, tok)
	slow.subscribe("slow", map[string]any{"p": projectA, "after": "0"})
	fast := b.dialWS(t, tok)
	fast.subscribe("fast", map[string]any{"p": projectA, "after": "0"})
	for range 5 {
		b.recordN(t, tok, 100, "device.burst")
	}
	require.Equal(t, seqRange(1, 500), fast.sequences("fast", 500))
}

// TestWebSocketConnectionsPerIdentity: one connection too many of an
// identity closes with 4429; closing one frees a place.
func TestWebSocketConnectionsPerIdentity(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *server.Config) { c.MaxWebSocketsPerIdentity = 2 })
	tok := b.token(t, tokenOpts{})
	first := b.dialWS(t, tok)
	_ = b.dialWS(t, tok)
	third := b.dialWS(t, "")
	third.send(map[string]any{"type": "connection_init", "payload": map[string]any{"Authorization": "Bearer " + tok}})
	require.Equal(t, 4429, third.closeCode())

	// Another identity is counted apart.
	_ = b.dialWS(t, b.token(t, tokenOpts{tenant: tenantB}))

	require.NoError(t, first.conn.Close())
	require.Eventually(t, func() bool {
		c := b.dialWS(t, "")
		c.send(map[string]any{"type": "connection_init", "payload": map[string]any{"Authorization": "Bearer " + tok}})
		require.NoError(t, c.conn.SetReadDeadline(time.Now().Add(10*time.Second)))
		var msg map[string]any
		err := c.conn.ReadJSON(&msg)
		return err == nil && msg["type"] == "connection_ack"
	}, 10*time.Second, 20*time.Millisecond)
}

// TestWebSocketGoroutinesEnd: subscriptions whose connections close leave no
// goroutine behind.
func TestWebSocketGoroutinesEnd(t *testing.T) {
	b := setup(t, nil)
	tok := b.token(t, tokenOpts{})
	// Warm up the pools and the hub's feed so they do not count.
	warm := b.dialWS(t, tok)
	warm.subscribe("w", map[string]any{"p": projectA, "after": "0"})
	b.recordN(t, tok, 1, "device.warm")
	warm.sequences("w", 1)
	before := runtime.NumGoroutine()

	var conns []*wsClient
	for i := range 20 {
		c := b.dialWS(t, tok)
		c.subscribe("s", map[string]any{"p": projectA, "after": "0"})
		c.sequences("s", 1)
		if i%2 == 0 {
			c.send(map[string]any{"id": "s", "type": "complete"})
		}
		conns = append(conns, c)
	}
	require.Greater(t, runtime.NumGoroutine(), before)
	for _, c := range conns {
		require.NoError(t, c.conn.Close())
	}
	require.Eventually(t, func() bool { return runtime.NumGoroutine() <= before+2 }, 20*time.Second, 20*time.Millisecond,
		"goroutines: %d before, %d now", before, runtime.NumGoroutine())
}

// TestWebSocketGoroutinesDoNotGrowWithSubscriptions: one connection with
// 1, 10 and 30 live subscriptions, each delivered an event, settles at
// most two goroutines above what ran before it (the reader, and the
// writer while it writes): no goroutine per subscription. The counts are
// awaited, not slept for.
func TestWebSocketGoroutinesDoNotGrowWithSubscriptions(t *testing.T) {
	b := setup(t, nil)
	tok := b.token(t, tokenOpts{})
	// Warm up the pools and the hub's feed so they do not count.
	warm := b.dialWS(t, tok)
	warm.subscribe("w", map[string]any{"p": projectA, "after": "0"})
	b.recordN(t, tok, 1, "device.warm")
	warm.sequences("w", 1)
	require.NoError(t, warm.conn.Close())
	require.Eventually(t, func() bool { return b.hub.Subscribers() == 0 }, 20*time.Second, 10*time.Millisecond)

	c := b.dialWS(t, tok)
	c.subscribe("probe", map[string]any{"p": projectA})
	c.send(map[string]any{"id": "probe", "type": "complete"})
	before := runtime.NumGoroutine()
	subscribed := 0
	for _, n := range []int{1, 10, 30} {
		for ; subscribed < n; subscribed++ {
			c.subscribe(fmt.Sprint("s", subscribed), map[string]any{"p": projectA})
		}
		require.Eventually(t, func() bool { return b.hub.Subscribers() == n }, 20*time.Second, 10*time.Millisecond)
		b.recordN(t, tok, 1, "device.fanout")
		seen := map[any]bool{}
		for range n {
			msg := c.read()
			require.Equal(t, "next", msg["type"], "%v", msg)
			require.False(t, seen[msg["id"]], "two results for %v", msg["id"])
			seen[msg["id"]] = true
		}
		require.Eventually(t, func() bool { return runtime.NumGoroutine() <= before+2 }, 20*time.Second, 10*time.Millisecond,
			"%d subscriptions: goroutines %d before them, %d now", n, before, runtime.NumGoroutine())
	}
}

// TestLiveConnectionsPerIdentityCoverEventStreams: live and snapshot SSE
// and graphql-sse streams count with WebSockets against
// MaxWebSocketsPerIdentity; one too
// many gets 429 QUOTA_EXCEEDED (a WebSocket closes with 4429). A graphql-sse
// body that is not JSON is refused before it is streamed.
func TestLiveConnectionsPerIdentityCoverEventStreams(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *server.Config) { c.MaxWebSocketsPerIdentity = 2 })
	tok := b.token(t, tokenOpts{perms: []app.Permission{app.PermissionAuditRead}})
	follow := func() *http.Response {
		return b.getPath(t, tok, "/api/v1/audit/events/stream?follow=true&projectId="+projectA)
	}
	first := follow()
	require.Equal(t, http.StatusOK, first.StatusCode)
	ws := b.dialWS(t, tok)
	requireProblem(t, follow(), http.StatusTooManyRequests, "QUOTA_EXCEEDED")
	// A snapshot stream counts too.
	requireProblem(t, b.getPath(t, tok, "/api/v1/audit/events/stream?projectId="+projectA), http.StatusTooManyRequests, "QUOTA_EXCEEDED")

	sse := func(body string) *gqlResult {
		return b.graphqlRaw(t, tok, []byte(body), "Accept", "text/event-stream")
	}
	res := sse(`{"query":"subscription { auditEventRecorded(projectId: \"` + projectA + `\") { sequence } }"}`)
	require.Equal(t, http.StatusTooManyRequests, res.Status, "%s", res.Raw)
	require.Equal(t, "QUOTA_EXCEEDED", res.code(t))
	res = sse(`{"query": not json`)
	require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Raw)
	require.Equal(t, "BAD_USER_INPUT", res.code(t))

	// Ending a stream frees its place.
	require.NoError(t, ws.conn.Close())
	require.NoError(t, first.Body.Close())
	require.Eventually(t, func() bool {
		resp := follow()
		defer resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 10*time.Second, 20*time.Millisecond)
}
