package wsgraphql

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const legacy = SubprotocolGraphQLWS

// legacyInit sends connection_init and expects connection_ack and the
// first ka.
func legacyInit(c *client) {
	c.t.Helper()
	c.send(msg{Type: "connection_init", Payload: json.RawMessage(`{}`)})
	c.expect("connection_ack", "")
	c.expect("ka", "")
}

func legacyStart(c *client, id, query string) {
	c.t.Helper()
	payload, err := json.Marshal(map[string]any{"query": query, "variables": map[string]any{}})
	require.NoError(c.t, err)
	c.send(msg{ID: id, Type: "start", Payload: payload})
}

func TestLegacySubscription(t *testing.T) {
	e := newEnv(t, Config{})
	c := dial(t, e.url, legacy)
	require.Equal(t, legacy, c.ws.Subprotocol())
	legacyInit(c)

	legacyStart(c, "1", "subscription { name }")
	for range 2 {
		e.srv.SendNextSubscriptionMessage()
		require.Equal(t, map[string]any{"name": "test"}, data(t, c.expect("data", "1")))
	}
	e.srv.SendCompleteSubscriptionMessage()
	c.expect("complete", "1")
}

func TestLegacyStop(t *testing.T) {
	e := newEnv(t, Config{})
	c := dial(t, e.url, legacy)
	legacyInit(c)

	legacyStart(c, "1", "subscription { name }")
	e.srv.SendNextSubscriptionMessage()
	c.expect("data", "1")
	c.send(msg{ID: "1", Type: "stop"})

	// Nothing more arrives for "1": the next messages are those of "2".
	legacyStart(c, "2", "query { name }")
	require.Equal(t, map[string]any{"name": "test"}, data(t, c.expect("data", "2")))
	c.expect("complete", "2")
}

func TestLegacyValidationError(t *testing.T) {
	e := newEnv(t, Config{})
	c := dial(t, e.url, legacy)
	legacyInit(c)
	legacyStart(c, "1", "{ nope }")
	m := c.expect("error", "1")
	var errs []map[string]any
	require.NoError(t, json.Unmarshal(m.Payload, &errs), string(m.Payload))
	require.Len(t, errs, 1)
	c.expect("complete", "1")
}

func TestLegacyKeepAlive(t *testing.T) {
	e := newEnv(t, Config{PingInterval: 20 * time.Millisecond, PongWait: waitFor})
	c := dial(t, e.url, legacy)
	legacyInit(c)
	c.expect("ka", "")
	c.expect("ka", "")
}

func TestLegacyTerminate(t *testing.T) {
	e := newEnv(t, Config{})
	c := dial(t, e.url, legacy)
	legacyInit(c)
	legacyStart(c, "1", "subscription { name }")
	c.send(msg{Type: "connection_terminate"})
	c.requireClose(CloseNormalClosure, "Normal Closure")
	awaitCond(t, "connection gone", func() bool { return e.tr.Connections() == 0 })
}

func TestLegacyConnectionError(t *testing.T) {
	e := newEnv(t, Config{
		Authenticate: func(context.Context, *http.Request, map[string]any) (context.Context, time.Time, error) {
			return nil, time.Time{}, errors.New("nope")
		},
	})
	c := dial(t, e.url, legacy)
	c.send(msg{Type: "connection_init"})
	m := c.expect("connection_error", "")
	require.JSONEq(t, `{"message":"Forbidden"}`, string(m.Payload))
	c.requireClose(CloseForbidden, "Forbidden")
}

func TestLegacyStartBeforeInit(t *testing.T) {
	e := newEnv(t, Config{})
	c := dial(t, e.url, legacy)
	legacyStart(c, "1", "{ name }")
	c.requireClose(CloseUnauthorized, "Unauthorized")
}

func TestLegacyRestartReplacesOperation(t *testing.T) {
	e := newEnv(t, Config{})
	c := dial(t, e.url, legacy)
	legacyInit(c)
	legacyStart(c, "1", "subscription { name }")
	legacyStart(c, "1", "query { name }")
	c.expect("data", "1")
	c.expect("complete", "1")
}
