package wsgraphql

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"
)

const tws = SubprotocolGraphQLTransportWS

func TestSubscriptionHappyPath(t *testing.T) {
	e := newEnv(t, Config{})
	c := dial(t, e.url, tws)
	require.Equal(t, tws, c.ws.Subprotocol())
	c.init()

	c.subscribe("1", "subscription { name }")
	for range 3 {
		e.srv.SendNextSubscriptionMessage()
		m := c.expect("next", "1")
		require.Equal(t, map[string]any{"name": "test"}, data(t, m))
	}

	// The client completes: the server sends nothing more for "1".
	c.send(msg{ID: "1", Type: "complete"})
	c.roundTrip()

	// The id is free again; this time the server ends the operation.
	c.subscribe("1", "subscription { name }")
	e.srv.SendNextSubscriptionMessage()
	c.expect("next", "1")
	e.srv.SendCompleteSubscriptionMessage()
	c.expect("complete", "1")
	c.roundTrip()
}

func TestQueryAndMutation(t *testing.T) {
	e := newEnv(t, Config{})
	c := dial(t, e.url, tws)
	c.init()

	c.subscribe("q", "query { name }")
	require.Equal(t, map[string]any{"name": "test"}, data(t, c.expect("next", "q")))
	c.expect("complete", "q")

	// The testserver's mutation resolves to an execution error: a next with
	// errors, then complete (not an error message: execution had started).
	c.subscribe("m", "mutation { name }")
	m := c.expect("next", "m")
	require.Contains(t, string(m.Payload), "mutations are not supported")
	c.expect("complete", "m")
}

func TestValidationErrorIsErrorMessage(t *testing.T) {
	e := newEnv(t, Config{})
	c := dial(t, e.url, tws)
	c.init()

	c.subscribe("1", "subscription { nope }")
	m := c.expect("error", "1")
	var errs []struct {
		Message    string         `json:"message"`
		Extensions map[string]any `json:"extensions"`
	}
	require.NoError(t, json.Unmarshal(m.Payload, &errs), string(m.Payload))
	require.Len(t, errs, 1)
	require.Contains(t, errs[0].Message, "nope")
	require.Equal(t, "GRAPHQL_VALIDATION_FAILED", errs[0].Extensions["code"])

	// The error ended the operation: no complete follows, the id is free.
	c.roundTrip()
	c.subscribe("1", "query { name }")
	c.expect("next", "1")
	c.expect("complete", "1")
}

func TestPingPong(t *testing.T) {
	e := newEnv(t, Config{})
	c := dial(t, e.url, tws)

	// Ping is allowed before connection_init; the payload is echoed.
	c.sendRaw(`{"type":"ping","payload":{"n":1}}`)
	m := c.expect("pong", "")
	require.JSONEq(t, `{"n":1}`, string(m.Payload))

	c.init()
	c.sendRaw(`{"type":"ping"}`)
	m = c.expect("pong", "")
	require.Empty(t, m.Payload)
	c.sendRaw(`{"type":"pong"}`) // an unsolicited pong is ignored
	c.roundTrip()
}

func TestServerPings(t *testing.T) {
	e := newEnv(t, Config{PingInterval: 20 * time.Millisecond, PongWait: waitFor})
	c := dial(t, e.url, tws)
	var controlPings atomic.Int32
	c.ws.SetPingHandler(func(string) error {
		controlPings.Add(1)
		return c.ws.WriteControl(websocket.PongMessage, nil, time.Now().Add(time.Second))
	})
	c.init()
	for range 2 {
		c.expect("ping", "")
		c.sendRaw(`{"type":"pong"}`)
	}
	require.Positive(t, controlPings.Load())
}

func TestKeepAliveTimeout(t *testing.T) {
	e := newEnv(t, Config{PingInterval: 20 * time.Millisecond, PongWait: 200 * time.Millisecond})
	c := dial(t, e.url, tws)
	// An unresponsive client: it answers neither ping frames nor pings.
	c.ws.SetPingHandler(func(string) error { return nil })
	c.init()
	c.requireClose(CloseGoingAway, "keep-alive timeout")
}

func TestInitTimeout(t *testing.T) {
	e := newEnv(t, Config{InitTimeout: 200 * time.Millisecond})
	c := dial(t, e.url, tws)
	start := time.Now()
	c.requireClose(CloseConnectionInitialisationTimeout, "Connection initialisation timeout")
	require.GreaterOrEqual(t, time.Since(start), 150*time.Millisecond)
}

func TestInitTimeoutDoesNotFireAfterInit(t *testing.T) {
	e := newEnv(t, Config{InitTimeout: 50 * time.Millisecond})
	c := dial(t, e.url, tws)
	c.init()
	// Outlive the timeout with work the client is waiting for anyway.
	c.subscribe("1", "subscription { name }")
	time.Sleep(100 * time.Millisecond) // past the init timeout, on purpose
	e.srv.SendNextSubscriptionMessage()
	c.expect("next", "1")
	c.roundTrip()
}

func TestTooManyInitialisationRequests(t *testing.T) {
	e := newEnv(t, Config{})
	c := dial(t, e.url, tws)
	c.init()
	c.send(msg{Type: "connection_init"})
	c.requireClose(CloseTooManyInitialisationRequests, "Too many initialisation requests")
}

func TestSubscribeBeforeAck(t *testing.T) {
	e := newEnv(t, Config{})
	c := dial(t, e.url, tws)
	c.subscribe("1", "subscription { name }")
	c.requireClose(CloseUnauthorized, "Unauthorized")
}

func TestSubscriberAlreadyExists(t *testing.T) {
	e := newEnv(t, Config{})
	c := dial(t, e.url, tws)
	c.init()
	c.subscribe("abc", "subscription { name }")
	c.subscribe("abc", "subscription { name }")
	c.requireClose(CloseSubscriberAlreadyExists, "Subscriber for abc already exists")
}

func TestSubscriberAlreadyExistsLongID(t *testing.T) {
	e := newEnv(t, Config{})
	c := dial(t, e.url, tws)
	c.init()
	id := strings.Repeat("é", 100) // the reason is cut to 123 bytes, whole characters
	c.subscribe(id, "subscription { name }")
	c.subscribe(id, "subscription { name }")
	code, reason := c.awaitClose()
	require.Equal(t, CloseSubscriberAlreadyExists, code)
	require.LessOrEqual(t, len(reason), 123)
	require.True(t, strings.HasPrefix(reason, "Subscriber for éé"))
}

func TestBadRequest(t *testing.T) {
	e := newEnv(t, Config{})
	for _, tc := range []struct {
		name, message string
		beforeInit    bool
	}{
		{"garbage JSON", `{nope`, false},
		{"not an object", `[1,2]`, false},
		{"missing type", `{"id":"1"}`, false},
		{"unknown type", `{"type":"bogus"}`, false},
		{"server-only type", `{"id":"1","type":"next","payload":{}}`, false},
		{"subscribe without id", `{"type":"subscribe","payload":{"query":"{ name }"}}`, false},
		{"subscribe with empty id", `{"id":"","type":"subscribe","payload":{"query":"{ name }"}}`, false},
		{"subscribe with numeric id", `{"id":1,"type":"subscribe","payload":{"query":"{ name }"}}`, false},
		{"subscribe without query", `{"id":"1","type":"subscribe","payload":{}}`, false},
		{"subscribe with bad variables", `{"id":"1","type":"subscribe","payload":{"query":"{ name }","variables":[1]}}`, false},
		{"complete without id", `{"type":"complete"}`, false},
		{"ping with array payload", `{"type":"ping","payload":[1]}`, false},
		{"init with array payload", `{"type":"connection_init","payload":[1]}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, e.url, tws)
			if !tc.beforeInit {
				c.init()
			}
			c.sendRaw(tc.message)
			code, reason := c.awaitClose()
			require.Equal(t, CloseBadRequest, code, reason)
			require.True(t, strings.HasPrefix(reason, "Invalid message received"), reason)
		})
	}
}

func TestMessageTooBig(t *testing.T) {
	e := newEnv(t, Config{})
	c := dial(t, e.url, tws)
	c.init()
	query := `{ name }` + strings.Repeat(" ", DefaultReadLimit)
	c.subscribe("1", query)
	c.requireClose(CloseMessageTooBig, "Message too big")
}

func TestAuthentication(t *testing.T) {
	var gotPayload map[string]any
	var gotAuth string
	e := newEnv(t, Config{
		Authenticate: func(ctx context.Context, r *http.Request, payload map[string]any) (context.Context, time.Time, error) {
			gotPayload, gotAuth = payload, Authorization(r, payload)
			if gotAuth != "Bearer good" {
				return nil, time.Time{}, errors.New("bad token")
			}
			return context.WithValue(ctx, ctxKey{}, "alice"), time.Time{}, nil
		},
	})
	e.srv.AroundOperations(requirePrincipal("alice"))

	t.Run("refused", func(t *testing.T) {
		c := dial(t, e.url, tws)
		c.sendRaw(`{"type":"connection_init","payload":{"Authorization":"Bearer bad"}}`)
		c.requireClose(CloseForbidden, "Forbidden")
		require.Equal(t, map[string]any{"Authorization": "Bearer bad"}, gotPayload)
	})
	t.Run("accepted, principal reaches operations", func(t *testing.T) {
		c := dial(t, e.url, tws)
		c.sendRaw(`{"type":"connection_init","payload":{"authorization":"Bearer good"}}`)
		c.expect("connection_ack", "")
		c.subscribe("1", "{ name }")
		require.Equal(t, map[string]any{"name": "test"}, data(t, c.expect("next", "1")))
		c.expect("complete", "1")
	})
	t.Run("header fallback", func(t *testing.T) {
		d := dialer
		d.Subprotocols = []string{tws}
		ws, resp, err := d.Dial(e.url, http.Header{"Authorization": {"Bearer good"}})
		require.NoError(t, err)
		_ = resp.Body.Close()
		defer ws.Close()
		c := &client{t: t, ws: ws}
		c.init()
		require.Nil(t, gotPayload)
		require.Equal(t, "Bearer good", gotAuth)
	})
}

func TestTokenExpiry(t *testing.T) {
	e := newEnv(t, Config{
		Authenticate: func(ctx context.Context, _ *http.Request, _ map[string]any) (context.Context, time.Time, error) {
			return ctx, time.Now().Add(300 * time.Millisecond), nil
		},
	})
	c := dial(t, e.url, tws)
	c.init()
	c.subscribe("1", "subscription { name }")
	c.roundTrip()
	c.requireClose(CloseForbidden, "Forbidden")
	awaitCond(t, "connection gone", func() bool { return e.tr.Connections() == 0 })
}

func TestOnConnect(t *testing.T) {
	var held, released atomic.Int32
	e := newEnv(t, Config{
		OnConnect: func(ctx context.Context) (func(), error) {
			if held.Load() >= 1 {
				return nil, errors.New("limit reached")
			}
			held.Add(1)
			return func() { held.Add(-1); released.Add(1) }, nil
		},
	})
	first := dial(t, e.url, tws)
	first.init()

	second := dial(t, e.url, tws)
	second.send(msg{Type: "connection_init"})
	second.requireClose(CloseTooManyConnections, "too many connections")

	// Closing the first connection releases its slot.
	require.NoError(t, first.ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(CloseNormalClosure, "")))
	code, _ := first.awaitClose()
	require.Equal(t, CloseNormalClosure, code) // echoed
	awaitCond(t, "release", func() bool { return released.Load() == 1 })

	third := dial(t, e.url, tws)
	third.init()
}

func TestHookPanic(t *testing.T) {
	e := newEnv(t, Config{
		Authenticate: func(context.Context, *http.Request, map[string]any) (context.Context, time.Time, error) {
			panic("boom")
		},
	})
	c := dial(t, e.url, tws)
	c.send(msg{Type: "connection_init"})
	c.requireClose(CloseInternalServerError, "Internal server error")
}

func TestQuotaExceeded(t *testing.T) {
	e := newEnv(t, Config{MaxOperations: 2})
	c := dial(t, e.url, tws)
	c.init()
	c.subscribe("1", "subscription { name }")
	c.subscribe("2", "subscription { name }")
	c.subscribe("3", "subscription { name }")
	m := c.expect("error", "3")
	var errs []struct {
		Extensions map[string]any `json:"extensions"`
	}
	require.NoError(t, json.Unmarshal(m.Payload, &errs))
	require.Len(t, errs, 1)
	require.Equal(t, CodeQuotaExceeded, errs[0].Extensions["code"])

	// The connection stays usable, and a completed operation frees a slot.
	c.send(msg{ID: "1", Type: "complete"})
	c.subscribe("3", "query { name }")
	c.expect("next", "3")
	c.expect("complete", "3")
}

func TestShutdown(t *testing.T) {
	e := newEnv(t, Config{})
	c := dial(t, e.url, tws)
	c.init()
	c.subscribe("1", "subscription { name }")
	c.roundTrip()
	idle := dial(t, e.url, tws) // not even initialised

	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		done <- e.tr.Shutdown(ctx)
	}()
	c.requireClose(CloseGoingAway, "Going Away")
	idle.requireClose(CloseGoingAway, "Going Away")
	require.NoError(t, <-done)
	require.Zero(t, e.tr.Connections())

	require.Equal(t, http.StatusServiceUnavailable, dialStatus(t, e.url, nil, tws))
}

func TestSubprotocolNegotiation(t *testing.T) {
	e := newEnv(t, Config{})
	require.Equal(t, http.StatusBadRequest, dialStatus(t, e.url, nil))
	require.Equal(t, http.StatusBadRequest, dialStatus(t, e.url, nil, "graphql-sse", "mqtt"))

	c := dial(t, e.url, "mqtt", SubprotocolGraphQLWS, tws)
	require.Equal(t, SubprotocolGraphQLWS, c.ws.Subprotocol(), "the client's first supported choice wins")
	c = dial(t, e.url, tws, SubprotocolGraphQLWS)
	require.Equal(t, tws, c.ws.Subprotocol())
}

func TestCheckOrigin(t *testing.T) {
	e := newEnv(t, Config{})
	require.Equal(t, http.StatusForbidden, dialStatus(t, e.url, http.Header{"Origin": {"https://evil.example"}}, tws))

	allowed := newEnv(t, Config{CheckOrigin: func(r *http.Request) bool {
		return r.Header.Get("Origin") == "https://app.example"
	}})
	d := dialer
	d.Subprotocols = []string{tws}
	ws, resp, err := d.Dial(allowed.url, http.Header{"Origin": {"https://app.example"}})
	require.NoError(t, err)
	_ = resp.Body.Close()
	_ = ws.Close()
}

func TestSupports(t *testing.T) {
	tr := New(Config{})
	r, _ := http.NewRequest(http.MethodGet, "/graphql", nil)
	require.False(t, tr.Supports(r))
	r.Header.Set("Upgrade", "WebSocket")
	require.True(t, tr.Supports(r))
	r.Header.Set("Upgrade", "h2c")
	require.False(t, tr.Supports(r))
}

func TestAuthorization(t *testing.T) {
	r, _ := http.NewRequest(http.MethodGet, "/graphql", nil)
	r.Header.Set("Authorization", "Bearer header")
	require.Equal(t, "Bearer header", Authorization(r, nil))
	require.Equal(t, "Bearer a", Authorization(r, map[string]any{"Authorization": "Bearer a"}))
	require.Equal(t, "Bearer b", Authorization(r, map[string]any{"authorization": "Bearer b"}))
	require.Equal(t, "Bearer header", Authorization(r, map[string]any{"authorization": 7}))
	require.Empty(t, Authorization(nil, nil))
}
