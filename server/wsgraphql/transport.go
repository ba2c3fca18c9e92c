package wsgraphql

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/gorilla/websocket"
)

// Transport is a gqlgen transport serving GraphQL over WebSocket with the
// graphql-transport-ws and legacy graphql-ws subprotocols. Create it with
// [New]; it tracks its connections so that [Transport.Shutdown] can close
// them. It is safe for concurrent use.
type Transport struct {
	cfg Config

	mu     sync.Mutex
	conns  map[*conn]struct{}
	closed bool
}

var _ graphql.Transport = (*Transport)(nil)

// New returns a Transport configured by cfg, its zero fields set to their
// defaults.
func New(cfg Config) *Transport {
	return &Transport{cfg: cfg.withDefaults(), conns: map[*conn]struct{}{}}
}

// Supports reports whether r asks for a WebSocket upgrade: its Upgrade
// header lists the "websocket" token (case-insensitively). It implements
// graphql.Transport.
func (t *Transport) Supports(r *http.Request) bool {
	return headerHasToken(r.Header, "Upgrade", "websocket")
}

// Do upgrades r to a WebSocket connection and returns once the connection
// is established: GraphQL is served on it by a goroutine of its own (the
// reader), started with a shallow stack, so that the HTTP handler's
// goroutine, its stack (grown through the middleware and the upgrade) and
// net/http's per-request buffers go away while the connection lives on. It
// implements graphql.Transport.
//
// The connection therefore outlives the request: it keeps r's values (the
// trace id, for example) but not its cancellation, which net/http signals
// when the handler returns. It ends when the client or the server closes
// it, or at [Transport.Shutdown], which waits for its goroutines; whatever
// must last as long as the connection (a per-identity connection count,
// say) belongs in [Config.OnConnect], whose release function is called
// once its goroutines have all exited. A middleware's work after Do
// returns (a request span, request metrics) covers the upgrade only.
//
// Before upgrading, Do refuses with HTTP 400 a request that offers neither
// supported subprotocol, and with HTTP 503 a request arriving after
// Shutdown; the upgrader refuses a disallowed Origin with HTTP 403.
func (t *Transport) Do(w http.ResponseWriter, r *http.Request, exec graphql.GraphExecutor) {
	proto := negotiate(websocket.Subprotocols(r))
	if proto == "" {
		http.Error(w, "unsupported or missing WebSocket subprotocol: offer "+
			SubprotocolGraphQLTransportWS+" or "+SubprotocolGraphQLWS+" in Sec-WebSocket-Protocol", http.StatusBadRequest)
		return
	}
	if t.isClosed() {
		http.Error(w, "server shutting down", http.StatusServiceUnavailable)
		return
	}
	up := websocket.Upgrader{
		HandshakeTimeout: t.cfg.WriteTimeout,
		Subprotocols:     []string{proto},
		CheckOrigin:      t.cfg.CheckOrigin,
		// The read buffer is gorilla's own, small: reusing net/http's
		// (ReadBufferSize 0) would keep net/http's whole connection
		// reachable through it, with its 4 KiB write buffer and the
		// request's response, after the handler has returned. An idle
		// connection holds no write buffer of gorilla's: data frames are
		// assembled in pooled buffers taken only while writing
		// (messageBuffers), and gorilla's own writer, which the transport
		// does not use, would take one from the pool.
		ReadBufferSize:  readBufferSize,
		WriteBufferPool: writeBufferPool,
	}
	ws, err := up.Upgrade(w, r, nil)
	if err != nil {
		// The upgrader has answered the request.
		t.cfg.Logger.DebugContext(r.Context(), "websocket upgrade refused", "err", err)
		return
	}
	c := newConn(t, ws, r, exec, proto == SubprotocolGraphQLWS)
	if !t.register(c) {
		_ = ws.WriteControl(websocket.CloseMessage,
			websocket.FormatCloseMessage(CloseGoingAway, reasonGoingAway), time.Now().Add(t.cfg.WriteTimeout))
		_ = ws.Close()
		return
	}
	go func() {
		defer t.unregister(c)
		c.serve()
	}()
}

// readBufferSize is the size of a connection's read buffer: client
// messages are small (larger ones are read through it), and a control
// frame (at most 125 bytes of payload) fits.
const readBufferSize = 512

// writeBufferPool lends gorilla/websocket its write buffers while it
// writes (control frames do not need one).
var writeBufferPool = &sync.Pool{}

// Shutdown closes every connection with [CloseGoingAway] and waits until
// their goroutines have exited, or until ctx is done; then the sockets still
// open are dropped without further ceremony and ctx's error is returned.
// Upgrade requests arriving during or after Shutdown are refused with HTTP
// 503. A Transport cannot be restarted.
func (t *Transport) Shutdown(ctx context.Context) error {
	t.mu.Lock()
	t.closed = true
	conns := make([]*conn, 0, len(t.conns))
	for c := range t.conns {
		conns = append(conns, c)
	}
	t.mu.Unlock()

	for _, c := range conns {
		c.closeWith(CloseGoingAway, reasonGoingAway)
	}
	for i, c := range conns {
		select {
		case <-c.finished:
		case <-ctx.Done():
			for _, c := range conns[i:] {
				_ = c.ws.Close()
			}
			return ctx.Err()
		}
	}
	return nil
}

// Connections returns the number of open connections, for metrics.
func (t *Transport) Connections() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.conns)
}

func (t *Transport) isClosed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.closed
}

// register adds c to the tracked connections, unless the transport is shut
// down.
func (t *Transport) register(c *conn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.conns[c] = struct{}{}
	return true
}

// unregister forgets c and marks it finished.
func (t *Transport) unregister(c *conn) {
	t.mu.Lock()
	delete(t.conns, c)
	t.mu.Unlock()
	close(c.finished)
}

// negotiate picks the first of the client's offered subprotocols that is
// supported, or "".
func negotiate(offered []string) string {
	for _, p := range offered {
		if p == SubprotocolGraphQLTransportWS || p == SubprotocolGraphQLWS {
			return p
		}
	}
	return ""
}

// headerHasToken reports whether the comma-separated header name of h lists
// token, case-insensitively.
func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, f := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(f), token) {
				return true
			}
		}
	}
	return false
}
