package wsgraphql

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler/testserver"
	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// waitFor bounds every wait of the tests; nothing waits for a guessed time.
const waitFor = 5 * time.Second

// env is a test HTTP server with the transport on a gqlgen handler.
type env struct {
	t   *testing.T
	srv *testserver.TestServer
	tr  *Transport
	url string // ws://...
}

// newEnv serves gqlgen's testserver (a Query, a Mutation and a
// Subscription driven by SendNextSubscriptionMessage) over tr.
func newEnv(t *testing.T, cfg Config) *env {
	t.Helper()
	srv := testserver.New()
	tr := New(cfg)
	srv.AddTransport(tr)
	return &env{t: t, srv: srv, tr: tr, url: serve(t, srv, tr)}
}

// serve starts an HTTP server for h, shut down (transport first) when the
// test ends, and returns its ws:// URL.
func serve(t *testing.T, h http.Handler, tr *Transport) string {
	t.Helper()
	ts := httptest.NewServer(h)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		require.NoError(t, tr.Shutdown(ctx))
		ts.Close()
	})
	return "ws" + strings.TrimPrefix(ts.URL, "http")
}

// msg is a protocol message as the client sees it.
type msg struct {
	ID      string          `json:"id,omitempty"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// client is a gorilla WebSocket client speaking raw protocol messages.
type client struct {
	t  *testing.T
	ws *websocket.Conn
}

var dialer = websocket.Dialer{HandshakeTimeout: waitFor}

// dial connects to url offering protocols.
func dial(t *testing.T, url string, protocols ...string) *client {
	t.Helper()
	d := dialer
	d.Subprotocols = protocols
	ws, resp, err := d.Dial(url, nil)
	require.NoError(t, err)
	_ = resp.Body.Close()
	t.Cleanup(func() { _ = ws.Close() })
	return &client{t: t, ws: ws}
}

// dialStatus attempts a connection that must be refused, returning the
// HTTP status.
func dialStatus(t *testing.T, url string, header http.Header, protocols ...string) int {
	t.Helper()
	d := dialer
	d.Subprotocols = protocols
	ws, resp, err := d.Dial(url, header)
	if ws != nil {
		_ = ws.Close()
	}
	require.ErrorIs(t, err, websocket.ErrBadHandshake)
	_ = resp.Body.Close()
	return resp.StatusCode
}

func (c *client) sendRaw(s string) {
	c.t.Helper()
	require.NoError(c.t, c.ws.WriteMessage(websocket.TextMessage, []byte(s)))
}

func (c *client) send(m msg) {
	c.t.Helper()
	b, err := json.Marshal(m)
	require.NoError(c.t, err)
	c.sendRaw(string(b))
}

func (c *client) subscribe(id, query string) {
	c.t.Helper()
	payload, err := json.Marshal(map[string]any{"query": query})
	require.NoError(c.t, err)
	c.send(msg{ID: id, Type: "subscribe", Payload: payload})
}

// read returns the next message.
func (c *client) read() msg {
	c.t.Helper()
	require.NoError(c.t, c.ws.SetReadDeadline(time.Now().Add(waitFor)))
	_, data, err := c.ws.ReadMessage()
	require.NoError(c.t, err)
	var m msg
	require.NoError(c.t, json.Unmarshal(data, &m), string(data))
	return m
}

// expect reads the next message and checks its type and id.
func (c *client) expect(typ, id string) msg {
	c.t.Helper()
	m := c.read()
	require.Equal(c.t, typ, m.Type, "message %+v (payload %s)", m, m.Payload)
	require.Equal(c.t, id, m.ID, "message %+v", m)
	return m
}

// init sends connection_init and expects connection_ack.
func (c *client) init() {
	c.t.Helper()
	c.send(msg{Type: "connection_init"})
	c.expect("connection_ack", "")
}

// roundTrip proves every earlier message was handled: a ping must be
// answered by a pong, with nothing in between.
func (c *client) roundTrip() {
	c.t.Helper()
	c.sendRaw(`{"type":"ping","payload":{"probe":true}}`)
	m := c.expect("pong", "")
	require.JSONEq(c.t, `{"probe":true}`, string(m.Payload))
}

// awaitClose reads (discarding messages) until the server closes the
// connection, and returns the close code and reason.
func (c *client) awaitClose() (int, string) {
	c.t.Helper()
	require.NoError(c.t, c.ws.SetReadDeadline(time.Now().Add(waitFor)))
	for {
		_, _, err := c.ws.ReadMessage()
		if err == nil {
			continue
		}
		var ce *websocket.CloseError
		require.True(c.t, errors.As(err, &ce), "want a close frame, got %v", err)
		return ce.Code, ce.Text
	}
}

// requireClose awaits the close and checks code and reason.
func (c *client) requireClose(code int, reason string) {
	c.t.Helper()
	gotCode, gotReason := c.awaitClose()
	require.Equal(c.t, code, gotCode, "reason %q", gotReason)
	require.Equal(c.t, reason, gotReason)
}

// data decodes the data of a next (data) payload.
func data(t *testing.T, m msg) map[string]any {
	t.Helper()
	var resp struct {
		Data   map[string]any    `json:"data"`
		Errors []json.RawMessage `json:"errors"`
	}
	require.NoError(t, json.Unmarshal(m.Payload, &resp))
	require.Empty(t, resp.Errors, string(m.Payload))
	return resp.Data
}

// awaitCond polls cond until it holds or waitFor passes.
func awaitCond(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// ctxKey carries a test principal.
type ctxKey struct{}

// requirePrincipal is an operation middleware that refuses operations whose
// context lacks the principal Authenticate stored.
func requirePrincipal(want string) func(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
	return func(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
		if got, _ := ctx.Value(ctxKey{}).(string); got != want {
			return graphql.OneShot(graphql.ErrorResponse(ctx, "no principal"))
		}
		return next(ctx)
	}
}
