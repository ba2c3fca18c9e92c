package main

// The baseline of the live-fanout scenario: a plain gorilla/websocket
// broadcast server in the design of gorilla's chat example (one reader and
// one writer goroutine per socket, a buffered send channel per socket, a
// registry that a broadcast walks), in process on its own loopback
// listener. It sends the same bytes to every socket (baselineSender: ours'
// delivered message, restamped); it knows no GraphQL, no database and no
// authentication.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/aetheriot/aether-audit/server/wsgraphql"
)

const (
	// broadcastSendBuffer is each socket's send channel capacity, as in
	// gorilla's chat example (256 messages).
	broadcastSendBuffer = 256
	// broadcastPingInterval matches our transport's keep-alive pings.
	broadcastPingInterval = wsgraphql.DefaultPingInterval
	// broadcastWriteTimeout matches our transport's write deadline.
	broadcastWriteTimeout = wsgraphql.DefaultWriteTimeout
	// broadcastReadLimit matches our transport's read limit.
	broadcastReadLimit = wsgraphql.DefaultReadLimit
)

// broadcastServer is the baseline server.
type broadcastServer struct {
	// url is the ws:// address clients dial.
	url string
	srv *http.Server

	mu      sync.Mutex
	clients map[*broadcastClient]struct{}
	closed  bool
	// handlers counts the running socket handlers.
	handlers sync.WaitGroup
}

// broadcastClient is one socket of the baseline.
type broadcastClient struct {
	ws   *websocket.Conn
	send chan []byte
	// done is closed when the reader stops; the writer then exits.
	done chan struct{}
}

// startBroadcastServer serves the baseline on 127.0.0.1; its goroutines
// carry the pprof labels side=baseline, scenario=live-fanout.
func startBroadcastServer() (*broadcastServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b := &broadcastServer{clients: map[*broadcastClient]struct{}{}}
	up := websocket.Upgrader{HandshakeTimeout: broadcastWriteTimeout}
	b.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ws, err := up.Upgrade(w, r, nil)
			if err != nil {
				return // the upgrader has answered
			}
			b.serve(ws)
		}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go pprof.Do(context.Background(), pprof.Labels("side", "baseline", "scenario", "live-fanout"), func(context.Context) {
		_ = b.srv.Serve(ln)
	})
	b.url = "ws://" + ln.Addr().String() + "/"
	return b, nil
}

// serve runs one socket: registers it, starts its writer and reads (and
// discards) until the socket fails or closes.
func (b *broadcastServer) serve(ws *websocket.Conn) {
	c := &broadcastClient{ws: ws, send: make(chan []byte, broadcastSendBuffer), done: make(chan struct{})}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		ws.Close()
		return
	}
	b.clients[c] = struct{}{}
	b.handlers.Add(1)
	b.mu.Unlock()
	defer b.handlers.Done()

	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		c.writeLoop()
	}()
	pongWait := 2 * broadcastPingInterval
	ws.SetReadLimit(broadcastReadLimit)
	_ = ws.SetReadDeadline(time.Now().Add(pongWait))
	ws.SetPongHandler(func(string) error { return ws.SetReadDeadline(time.Now().Add(pongWait)) })
	for {
		if _, _, err := ws.NextReader(); err != nil {
			break
		}
		_ = ws.SetReadDeadline(time.Now().Add(pongWait))
	}
	b.mu.Lock()
	delete(b.clients, c)
	b.mu.Unlock()
	close(c.done)
	<-writerDone
	ws.Close()
}

// writeLoop is the socket's only writer: messages and pings.
func (c *broadcastClient) writeLoop() {
	ticker := time.NewTicker(broadcastPingInterval)
	defer ticker.Stop()
	for {
		select {
		case <-c.done:
			return
		case m := <-c.send:
			_ = c.ws.SetWriteDeadline(time.Now().Add(broadcastWriteTimeout))
			if err := c.ws.WriteMessage(websocket.TextMessage, m); err != nil {
				c.ws.Close() // the reader fails and unregisters
				return
			}
		case <-ticker.C:
			if err := c.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(broadcastWriteTimeout)); err != nil {
				c.ws.Close()
				return
			}
		}
	}
}

// broadcast queues m for every socket; a socket whose queue is full is
// dropped, as the chat example does.
func (b *broadcastServer) broadcast(m []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for c := range b.clients {
		select {
		case c.send <- m:
		default:
			c.ws.Close()
		}
	}
}

// close stops the listener, closes every socket and waits (up to ctx) for
// their handlers.
func (b *broadcastServer) close(ctx context.Context) error {
	_ = b.srv.Close() // the listener; hijacked sockets are ours to close
	b.mu.Lock()
	b.closed = true
	for c := range b.clients {
		c.ws.Close()
	}
	b.mu.Unlock()
	done := make(chan struct{})
	go func() {
		b.handlers.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return errors.New("baseline sockets still open: " + ctx.Err().Error())
	}
}

// baselineSender broadcasts ours' sample delivery with a fresh stamp.
type baselineSender struct {
	b    *broadcastServer
	tmpl []byte
	at   int // offset of the stamp's digits
}

func newBaselineSender(b *broadcastServer, sample string) (*baselineSender, error) {
	i := strings.Index(sample, stampKey)
	if i < 0 || len(sample) < i+len(stampKey)+stampDigits+1 || sample[i+len(stampKey)+stampDigits] != '"' {
		return nil, fmt.Errorf("no send stamp in ours' delivery: %s", truncate([]byte(sample), 300))
	}
	return &baselineSender{b: b, tmpl: []byte(sample), at: i + len(stampKey)}, nil
}

func (s *baselineSender) send(_ context.Context, stamp time.Time) error {
	m := slices.Clone(s.tmpl)
	copy(m[s.at:], formatStamp(stamp))
	s.b.broadcast(m)
	return nil
}
