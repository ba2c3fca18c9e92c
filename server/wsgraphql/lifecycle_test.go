package wsgraphql

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/testserver"
	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"
	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"go.uber.org/goleak"
)

// TestNoGoroutineOutlivesItsConnection opens and closes 50 connections in
// every way a connection can end (client close frame, dropped TCP, server
// close), several of them mid-subscription, and checks that the goroutine
// set returns to what it was.
func TestNoGoroutineOutlivesItsConnection(t *testing.T) {
	e := newEnv(t, Config{})
	baseline := goleak.IgnoreCurrent()

	for i := range 50 {
		proto := tws
		if i%5 == 4 {
			proto = legacy
		}
		c := dial(t, e.url, proto)
		if proto == legacy {
			legacyInit(c)
			legacyStart(c, "1", "subscription { name }")
		} else {
			c.init()
			if i%2 == 0 {
				c.subscribe("1", "subscription { name }")
				c.subscribe("2", "subscription { name }")
				c.roundTrip() // both operations are running
			}
		}
		switch i % 3 {
		case 0: // graceful close by the client
			require.NoError(t, c.ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(CloseNormalClosure, "bye")))
			code, _ := c.awaitClose()
			require.Equal(t, CloseNormalClosure, code)
		case 1: // the client vanishes
			require.NoError(t, c.ws.Close())
		case 2: // the server closes (protocol violation)
			c.sendRaw(`{"type":"bogus"}`)
			code, _ := c.awaitClose()
			require.Equal(t, CloseBadRequest, code)
		}
		_ = c.ws.Close()
	}

	awaitCond(t, "all connections closed", func() bool { return e.tr.Connections() == 0 })
	goleak.VerifyNone(t, baseline)
}

// bigStream is an executable schema whose subscription emits payloadSize
// bytes per event as fast as it is read; stopped is closed when a
// subscription's context ends.
func bigStream(payloadSize int, stopped chan<- struct{}) graphql.ExecutableSchema {
	schema := gqlparser.MustLoadSchema(&ast.Source{Input: `
		type Query { name: String! }
		type Subscription { big: String! }
	`})
	event := []byte(`{"big":"` + strings.Repeat("x", payloadSize) + `"}`)
	return &graphql.ExecutableSchemaMock{
		ExecFunc: func(ctx context.Context) graphql.ResponseHandler {
			if graphql.GetOperationContext(ctx).Operation.Operation != ast.Subscription {
				return graphql.OneShot(&graphql.Response{Data: []byte(`{"name":"test"}`)})
			}
			context.AfterFunc(ctx, func() { close(stopped) })
			return func(context.Context) *graphql.Response {
				return &graphql.Response{Data: event}
			}
		},
		SchemaFunc: func() *ast.Schema { return schema },
		ComplexityFunc: func(context.Context, string, string, int, map[string]any) (int, bool) {
			return 0, false
		},
	}
}

// TestSlowConsumer: a client that stops reading while its subscription
// produces fast holds back only its own subscription (which waits for
// room in the queue), is disconnected once a write passes WriteTimeout, and
// the server keeps serving other clients meanwhile.
func TestSlowConsumer(t *testing.T) {
	stopped := make(chan struct{})
	srv := handler.New(bigStream(64<<10, stopped))
	tr := New(Config{SendQueueSize: 16, WriteTimeout: 300 * time.Millisecond})
	srv.AddTransport(tr)
	url := serve(t, srv, tr)

	slow := dial(t, url, tws)
	slow.init()
	slow.subscribe("1", "subscription { big }")

	fast := dial(t, url, tws)
	fast.init()
	fast.subscribe("q", "{ name }")
	require.Equal(t, map[string]any{"name": "test"}, data(t, fast.expect("next", "q")))
	fast.expect("complete", "q")

	// slow reads nothing: socket buffers fill, a write passes its deadline,
	// and the server drops the connection, which stops the subscription.
	select {
	case <-stopped:
	case <-time.After(waitFor):
		t.Fatal("the slow client's subscription was not stopped")
	}
	awaitCond(t, "slow connection gone", func() bool { return tr.Connections() == 1 })
}

// TestOperationPanic: a panicking resolver ends its operation with an error
// message; the connection survives.
func TestOperationPanic(t *testing.T) {
	e := newEnv(t, Config{})
	e.srv.SetRecoverFunc(func(_ context.Context, v any) error {
		return gqlerror.Errorf("recovered: %v", v)
	})
	e.srv.AroundFields(func(ctx context.Context, next graphql.Resolver) (any, error) {
		if graphql.GetOperationContext(ctx).Operation.Name == "Boom" {
			panic(errors.New("boom"))
		}
		return next(ctx)
	})
	c := dial(t, e.url, tws)
	c.init()
	c.subscribe("1", "query Boom { name }")
	m := c.expect("error", "1")
	require.Contains(t, string(m.Payload), "recovered: boom")
	c.subscribe("2", "query { name }")
	c.expect("next", "2")
	c.expect("complete", "2")
}

// TestResultsKeepOrderWithProtocolMessages: results an operation writes
// itself and messages queued for the writer (pongs here) interleave
// without reordering: every result arrives once, in order, before the
// operation's complete, and every ping is answered.
func TestResultsKeepOrderWithProtocolMessages(t *testing.T) {
	const results, pings, bursts = 2000, 100, 5
	pad := strings.Repeat("x", 4<<10)
	e := newEnv(t, Config{FastPath: func(context.Context, *graphql.RawParams, func()) (Source, bool) {
		n := 0
		return sourceFunc(func() ([]byte, bool) {
			if n == results {
				return nil, false
			}
			n++
			// Large enough to fill the socket's buffers: the writer
			// then waits in its writes while the pongs queue up.
			return fmt.Appendf(nil, `{"data":{"n":%d,"pad":%q}}`, n-1, pad), true
		}), true
	}})
	c := dial(t, e.url, tws)
	c.init()
	c.subscribe("1", "subscription { name }")
	next, pongs, completed := 0, 0, false
	for !completed || pongs < pings {
		m := c.read()
		switch m.Type {
		case "pong":
			pongs++
		case "next":
			require.False(t, completed, "a result after complete")
			require.Equal(t, "1", m.ID)
			require.Equal(t, float64(next), data(t, m)["n"])
			next++
			if next%(results/bursts) == 0 {
				// Pongs to queue while the results stream (fewer than
				// the queue holds).
				for range pings / bursts {
					c.sendRaw(`{"type":"ping"}`)
				}
			}
		case "complete":
			require.Equal(t, "1", m.ID)
			require.Equal(t, results, next, "complete before every result")
			completed = true
		default:
			t.Fatalf("unexpected message %+v", m)
		}
	}
	c.roundTrip()
}

// sourceFunc is a Source whose results are always at hand.
type sourceFunc func() ([]byte, bool)

func (f sourceFunc) Next(context.Context) ([]byte, bool) { return f() }
func (f sourceFunc) Close()                              {}

// TestConnectionOutlivesDo: Do returns once the connection is established,
// the request's context is cancelled (net/http does so when the handler
// returns), and the connection goes on serving until it is closed;
// values of the request's context stay visible to Authenticate.
func TestConnectionOutlivesDo(t *testing.T) {
	type key struct{}
	returned := make(chan context.Context, 1)
	authCtxs := make(chan context.Context, 1)
	srv := testserver.New()
	tr := New(Config{Authenticate: func(ctx context.Context, _ *http.Request, _ map[string]any) (context.Context, time.Time, error) {
		authCtxs <- ctx
		return ctx, time.Time{}, nil
	}})
	srv.AddTransport(tr)
	url := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r = r.WithContext(context.WithValue(r.Context(), key{}, "kept"))
		srv.ServeHTTP(w, r)
		returned <- r.Context()
	}), tr)

	c := dial(t, url, tws)
	var reqCtx context.Context
	select {
	case reqCtx = <-returned:
	case <-time.After(waitFor):
		t.Fatal("Do did not return once the connection was established")
	}
	// net/http cancels the request's context once the handler has returned.
	awaitCond(t, "the request's context to be cancelled", func() bool { return reqCtx.Err() != nil })

	c.init()
	authCtx := <-authCtxs
	require.Equal(t, "kept", authCtx.Value(key{}))
	require.NoError(t, authCtx.Err())
	c.subscribe("1", "subscription { name }")
	c.roundTrip()
	require.Equal(t, 1, tr.Connections())
	srv.SendNextSubscriptionMessage()
	c.expect("next", "1")

	require.NoError(t, c.ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(CloseNormalClosure, "bye")))
	code, _ := c.awaitClose()
	require.Equal(t, CloseNormalClosure, code)
	awaitCond(t, "the connection to be forgotten", func() bool { return tr.Connections() == 0 })
}
