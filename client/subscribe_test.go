package client_test

import (
	"context"
	"fmt"
	"iter"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/client"
	"github.com/aetheriot/aether-audit/internal/aethertest"
)

// subscriber consumes a subscription in the background.
type subscriber struct {
	mu     sync.Mutex
	events []client.Event
	err    error
	ended  chan struct{}
	cancel context.CancelFunc
}

// subscribe runs c.Subscribe until the test ends.
func subscribe(t *testing.T, c *client.Client, project string, opts client.SubscribeOptions) *subscriber {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &subscriber{ended: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(s.ended)
		for ev, err := range c.Subscribe(ctx, project, opts) {
			s.mu.Lock()
			if err != nil {
				s.err = err
			} else {
				s.events = append(s.events, ev)
			}
			s.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-s.ended
	})
	return s
}

// sequences returns the sequences received so far.
func (s *subscriber) sequences() []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]uint64, len(s.events))
	for i, e := range s.events {
		out[i] = e.Sequence
	}
	return out
}

// awaitSequences waits until the subscriber has received exactly 1..n, in
// order, and fails on anything else.
func (s *subscriber) awaitSequences(t *testing.T, n int) {
	t.Helper()
	aethertest.Await(t, 60*time.Second, fmt.Sprintf("events 1..%d", n), func() bool {
		got := s.sequences()
		for i, seq := range got {
			require.Equal(t, uint64(i+1), seq, "a gap or a duplicate: %v", got)
		}
		require.LessOrEqual(t, len(got), n)
		return len(got) == n
	})
}

// record records n events in project p.
func record(t *testing.T, c *client.Client, p string, n int) {
	t.Helper()
	batch := make([]client.EventInput, n)
	for i := range batch {
		batch[i] = event(p, fmt.Sprint("r", i))
	}
	_, err := c.RecordBatch(context.Background(), batch)
	require.NoError(t, err)
}

func TestSubscribeResumesAcrossServerRestarts(t *testing.T) {
	b := setup(t)
	record(t, b.client, "p", 5)
	s := subscribe(t, b.client, "p", client.SubscribeOptions{})
	s.awaitSequences(t, 5)
	record(t, b.client, "p", 3)
	s.awaitSequences(t, 8)

	// A graceful shutdown closes the socket with 1001.
	b.srv.Stop(t)
	b.srv.Restart(t)
	record(t, b.client, "p", 4)
	s.awaitSequences(t, 12)

	// A crash ends it without a close frame (1006).
	b.srv.Kill(t)
	b.srv.Restart(t)
	record(t, b.client, "p", 4)
	s.awaitSequences(t, 16)
	require.NoError(t, s.err)
}

func TestSubscribeFromNowAndFilter(t *testing.T) {
	b := setup(t)
	record(t, b.client, "p", 3)
	s := subscribe(t, b.client, "p", client.SubscribeOptions{FromNow: true, Filter: &client.Filter{ResourceID: "r1"}})
	// The subscription has started when an event recorded now reaches it.
	aethertest.Await(t, 30*time.Second, "the filtered event", func() bool {
		record(t, b.client, "p", 2) // r0 and r1
		return len(s.sequences()) > 0
	})
	for _, seq := range s.sequences() {
		require.Greater(t, seq, uint64(3), "nothing from before the call")
		require.Equal(t, uint64(1), seq%2, "only r1 events: %v", s.sequences())
	}
}

func TestSubscribeRefusals(t *testing.T) {
	b := setup(t, "AETHER_WS_READ_LIMIT=1024")
	ctx := context.Background()

	// A project outside the token: the operation's NOT_FOUND ends it.
	narrow := b.srv.Token(t, "t1", []string{"p"}, "audit:read", "reader", time.Hour)
	c, err := client.New(b.srv.URL, client.Options{Token: narrow})
	require.NoError(t, err)
	require.Equal(t, client.CodeNotFound, client.ErrorCode(subscribeError(t, c.Subscribe(ctx, "other", client.SubscribeOptions{}))))
	// Without audit:read: FORBIDDEN.
	writer := b.srv.Token(t, "t1", []string{"p"}, "audit:write", "writer", time.Hour)
	c, err = client.New(b.srv.URL, client.Options{Token: writer})
	require.NoError(t, err)
	require.Equal(t, client.CodeForbidden, client.ErrorCode(subscribeError(t, c.Subscribe(ctx, "p", client.SubscribeOptions{}))))
	// A subscribe message over the read limit: 1009, not retried.
	var ae *client.Error
	err = subscribeError(t, b.client.Subscribe(ctx, "p", client.SubscribeOptions{Filter: &client.Filter{SubjectID: strings.Repeat("x", 2000)}}))
	require.ErrorAs(t, err, &ae)
	require.Equal(t, client.CloseMessageTooBig, ae.CloseCode)
	// A token the server refuses: 4403 at connection_init, a few times.
	c, err = client.New(b.srv.URL, client.Options{Token: "not-a-token", MinBackoff: time.Millisecond})
	require.NoError(t, err)
	err = subscribeError(t, c.Subscribe(ctx, "p", client.SubscribeOptions{}))
	require.ErrorAs(t, err, &ae)
	require.Equal(t, client.CloseForbidden, ae.CloseCode)
	require.NotContains(t, err.Error(), "not-a-token")
}

// subscribeError runs a subscription that must end with an error without
// yielding an event, and returns the error.
func subscribeError(t *testing.T, seq iter.Seq2[client.Event, error]) error {
	t.Helper()
	var errs []error
	for ev, err := range seq {
		require.Error(t, err, "an event (%d) instead of the error", ev.Sequence)
		errs = append(errs, err)
	}
	require.Len(t, errs, 1)
	return errs[0]
}

func TestSubscribeRenewsAnExpiredToken(t *testing.T) {
	b := setup(t)
	var fetches int
	var mu sync.Mutex
	src := client.NewCachingTokenSource(func(context.Context) (string, time.Time, error) {
		mu.Lock()
		fetches++
		mu.Unlock()
		return b.srv.Token(t, "t1", []string{"p"}, "audit:read", "watcher", 2*time.Second), time.Now().Add(2 * time.Second), nil
	}, time.Second)
	c, err := client.New(b.srv.URL, client.Options{TokenSource: src, MinBackoff: 20 * time.Millisecond})
	require.NoError(t, err)
	record(t, b.client, "p", 2)
	s := subscribe(t, c, "p", client.SubscribeOptions{})
	s.awaitSequences(t, 2)
	// The server closes with 4403 when the token expires; the subscription
	// goes on with a fresh one.
	aethertest.Await(t, 30*time.Second, "a token was renewed", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return fetches >= 3
	})
	record(t, b.client, "p", 3)
	s.awaitSequences(t, 5)
	require.NoError(t, s.err)
}

func TestSubscribeWaitsForAFreeConnection(t *testing.T) {
	b := setup(t, "AETHER_WS_MAX_CONNECTIONS_PER_IDENTITY=1")
	record(t, b.client, "p", 1)
	first := subscribe(t, b.client, "p", client.SubscribeOptions{})
	first.awaitSequences(t, 1)
	// The identity's only connection is taken: 4429 "too many
	// connections", retried with back-off.
	second := subscribe(t, b.client, "p", client.SubscribeOptions{})
	first.cancel()
	<-first.ended
	record(t, b.client, "p", 1)
	second.awaitSequences(t, 2)
}

// closingProxy stands between a client and the real server and closes the
// client's side with a chosen code on demand.
type closingProxy struct {
	srv     *httptest.Server
	mu      sync.Mutex
	clients []*websocket.Conn
}

func newClosingProxy(t *testing.T, target string) *closingProxy {
	t.Helper()
	p := &closingProxy{}
	upgrader := websocket.Upgrader{Subprotocols: []string{"graphql-transport-ws"}}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !websocket.IsWebSocketUpgrade(r) {
			http.Error(w, "websocket only", http.StatusBadRequest)
			return
		}
		up, _, err := (&websocket.Dialer{Subprotocols: []string{"graphql-transport-ws"}}).Dial(
			"ws"+strings.TrimPrefix(target, "http")+"/graphql", nil)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		down, err := upgrader.Upgrade(w, r, nil)
		if err != nil {
			_ = up.Close()
			return
		}
		p.mu.Lock()
		p.clients = append(p.clients, down)
		p.mu.Unlock()
		pump := func(from, to *websocket.Conn) {
			defer from.Close()
			defer to.Close()
			for {
				kind, data, err := from.ReadMessage()
				if err != nil {
					return
				}
				if to.WriteMessage(kind, data) != nil {
					return
				}
			}
		}
		go pump(up, down)
		go pump(down, up)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

// closeAll closes every client connection with code and reason.
func (p *closingProxy) closeAll(code int, reason string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, c := range p.clients {
		if c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason), time.Now().Add(time.Second)) == nil {
			n++
		}
		_ = c.Close()
	}
	p.clients = nil
	return n
}

// TestSubscribeCloseCodes closes a subscription to the real server with
// every close code of docs/live.md: those a reconnect cures resume after
// the last event without a gap or a duplicate, the others end it with the
// code.
func TestSubscribeCloseCodes(t *testing.T) {
	b := setup(t)
	proxy := newClosingProxy(t, b.srv.URL)
	c, err := client.New(proxy.srv.URL, client.Options{Token: b.token, MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond})
	require.NoError(t, err)

	resumed := []struct {
		code   int
		reason string
	}{
		{1000, ""}, {1001, "Going Away"}, {1013, "client too slow; resubscribe with afterSequence"},
		{4403, "Forbidden"}, {4408, "Connection initialisation timeout"}, {4429, "too many connections"},
		{4500, "Internal server error"},
	}
	record(t, b.client, "p", 1)
	s := subscribe(t, c, "p", client.SubscribeOptions{})
	s.awaitSequences(t, 1)
	n := 1
	for _, rc := range resumed {
		aethertest.Await(t, 10*time.Second, "a connection to close", func() bool { return proxy.closeAll(rc.code, rc.reason) > 0 })
		record(t, b.client, "p", 2)
		n += 2
		s.awaitSequences(t, n)
	}
	require.NoError(t, s.err)

	ended := []struct {
		code   int
		reason string
	}{
		{1009, "Message too big"}, {4400, "invalid message"}, {4401, "Unauthorized"},
		{4409, "Subscriber for 1 already exists"}, {4429, "Too many initialisation requests"},
	}
	for _, ec := range ended {
		s := subscribe(t, c, "p", client.SubscribeOptions{AfterSequence: uint64(n)})
		record(t, b.client, "p", 1)
		n++
		aethertest.Await(t, 10*time.Second, "the new event", func() bool { return len(s.sequences()) == 1 })
		aethertest.Await(t, 10*time.Second, "a connection to close", func() bool { return proxy.closeAll(ec.code, ec.reason) > 0 })
		<-s.ended
		var ae *client.Error
		require.ErrorAs(t, s.err, &ae, "close code %d", ec.code)
		require.Equal(t, ec.code, ae.CloseCode)
		require.Equal(t, ec.reason, ae.Message)
	}
}
