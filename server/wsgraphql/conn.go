package wsgraphql

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/99designs/gqlgen/graphql"
	"github.com/gorilla/websocket"
)

// outbound is a message waiting for the writer. A message of an operation
// the client has completed is dropped instead of written.
type outbound struct {
	data []byte
	op   *operation // nil for connection-level messages
}

// conn is one WebSocket connection. Three kinds of goroutine touch it: the
// reader (the HTTP handler's goroutine, running serve), the writer
// (writeLoop), and one per operation (run). Fields marked "reader" are
// touched by the reader only.
//
// Messages reach the socket two ways. Protocol messages (acknowledgements,
// pongs, errors, completions) are queued for the writer. An operation's
// results are written by the operation's goroutine itself, under wmu, when
// nothing is queued (sendResults): that spares each result a hand-off to the
// writer goroutine. When something is queued, results are queued too, so
// that every message leaves in the order it was sent.
type conn struct {
	cfg    *Config
	ws     *websocket.Conn
	req    *http.Request
	exec   graphql.GraphExecutor
	legacy bool
	log    *slog.Logger

	// ctx is cancelled when the connection starts closing; it is the
	// context Authenticate gets.
	ctx    context.Context
	cancel context.CancelFunc

	queue chan outbound
	// queued counts the messages queued and not yet written or dropped by
	// the writer; an operation writes a result itself only when it is 0.
	queued atomic.Int64
	// wmu is held while a data message is written to ws (gorilla allows
	// one writer at a time; control frames need no lock).
	wmu sync.Mutex

	closeOnce   sync.Once
	closing     chan struct{} // closed by closeWith
	closeCode   int           // set before closing is closed
	closeReason string
	closeFinal  [][]byte // messages written just before the close frame

	readerDone chan struct{} // closed when the reader stops reading
	writerDone chan struct{} // closed when the writer has exited
	finished   chan struct{} // closed when serve has returned (by Transport.unregister)

	initReceived atomic.Bool
	acked        atomic.Bool

	initTimer   *time.Timer        // reader
	expiryTimer *time.Timer        // reader
	release     func()             // reader
	opsCtx      context.Context    // reader: parent of operations
	opsCancel   context.CancelFunc // reader
	stopOpsLink func() bool        // reader

	mu  sync.Mutex
	ops map[string]*operation // running operations by id
	wg  sync.WaitGroup        // operation goroutines
}

func newConn(t *Transport, ws *websocket.Conn, r *http.Request, exec graphql.GraphExecutor, legacy bool) *conn {
	ctx, cancel := context.WithCancel(r.Context())
	c := &conn{
		cfg:        &t.cfg,
		ws:         ws,
		req:        r,
		exec:       exec,
		legacy:     legacy,
		log:        t.cfg.Logger.With("subprotocol", ws.Subprotocol(), "remote", ws.RemoteAddr().String()),
		ctx:        ctx,
		cancel:     cancel,
		queue:      make(chan outbound, t.cfg.SendQueueSize),
		closing:    make(chan struct{}),
		readerDone: make(chan struct{}),
		writerDone: make(chan struct{}),
		finished:   make(chan struct{}),
		opsCtx:     ctx,
		ops:        map[string]*operation{},
	}
	return c
}

// serve runs the connection to its end: it starts the writer, reads and
// handles messages until the socket fails or closes, then waits for the
// writer and every operation to exit and releases what the connection
// holds.
func (c *conn) serve() {
	go c.writeLoop()
	defer c.cleanup()

	c.ws.SetCloseHandler(func(code int, _ string) error {
		// Echo the client's code (1005, "no status", is echoed as an
		// empty close frame).
		c.closeWith(code, "")
		return nil
	})
	pingHandler := c.ws.PingHandler()
	c.ws.SetPingHandler(func(data string) error {
		c.touch()
		_ = pingHandler(data) // a failed pong surfaces on the next write
		return nil
	})
	c.ws.SetPongHandler(func(string) error {
		c.touch()
		return nil
	})
	c.touch()

	if c.cfg.InitTimeout > 0 {
		c.initTimer = time.AfterFunc(c.cfg.InitTimeout, func() {
			if !c.initReceived.Load() {
				c.closeWith(CloseConnectionInitialisationTimeout, reasonInitTimeout)
			}
		})
	}
	// The request context ends only when the handler returns, unless the
	// server cancels it: treat that as a shutdown.
	stopReqLink := context.AfterFunc(c.req.Context(), func() { c.closeWith(CloseGoingAway, reasonGoingAway) })
	defer stopReqLink()

	c.readLoop()
}

// cleanup runs when the reader has stopped: it waits for the writer and the
// operations, and releases the connection's resources.
func (c *conn) cleanup() {
	if v := recover(); v != nil {
		c.log.Error("websocket connection panicked", "panic", v)
		c.closeWith(CloseInternalServerError, reasonInternal)
	}
	close(c.readerDone)
	c.closeWith(websocket.CloseAbnormalClosure, "") // no-op unless still open
	<-c.writerDone
	c.cancel()
	if c.initTimer != nil {
		c.initTimer.Stop()
	}
	if c.expiryTimer != nil {
		c.expiryTimer.Stop()
	}
	c.wg.Wait()
	if c.opsCancel != nil {
		c.stopOpsLink()
		c.opsCancel()
	}
	if c.release != nil {
		c.release()
	}
	c.log.Debug("websocket connection closed", "code", c.closeCode, "reason", c.closeReason)
}

// touch extends the liveness deadline after a sign of life from the client.
// It is called by the reader only (control-frame handlers run within its
// reads).
func (c *conn) touch() {
	if c.cfg.PongWait > 0 {
		_ = c.ws.SetReadDeadline(time.Now().Add(c.cfg.PongWait))
	}
}

// readLoop reads messages until the socket fails or the closing handshake
// ends. Once the connection is closing, messages are read and discarded, so
// that the client's close frame is seen.
func (c *conn) readLoop() {
	limit := c.cfg.ReadLimit
	for {
		_, rd, err := c.ws.NextReader()
		if err != nil {
			c.readFailed(err)
			return
		}
		if c.isClosing() {
			continue // NextReader discards the unread message
		}
		start := graphql.Now()
		data, err := io.ReadAll(io.LimitReader(rd, limit+1))
		if err != nil {
			c.readFailed(err)
			return
		}
		if int64(len(data)) > limit {
			c.closeWith(CloseMessageTooBig, reasonMessageTooBig)
			continue
		}
		c.touch()
		if c.legacy {
			c.handleLegacy(data, start)
		} else {
			c.handleTransportWS(data, start)
		}
	}
}

// readFailed closes the connection after the read error err.
func (c *conn) readFailed(err error) {
	if c.isClosing() {
		return
	}
	var ce *websocket.CloseError
	var ne net.Error
	switch {
	case errors.As(err, &ce):
		c.closeWith(ce.Code, "") // normally done by the close handler already
	case errors.As(err, &ne) && ne.Timeout():
		c.closeWith(CloseGoingAway, reasonKeepAliveTimeout)
	default:
		c.closeWith(websocket.CloseAbnormalClosure, "")
	}
}

// closeWith starts closing the connection, the first time it is called:
// operations are cancelled, queued messages are dropped, and the writer
// writes final (if any) and a close frame with code and reason, then drops
// the socket once the client answered or closeGracePeriod passed. Code
// websocket.CloseAbnormalClosure (1006) means the socket is unusable: no
// close frame is written. closeWith never blocks.
func (c *conn) closeWith(code int, reason string, final ...[]byte) {
	c.closeOnce.Do(func() {
		c.closeCode = code
		c.closeReason = truncateReason(reason)
		c.closeFinal = final
		close(c.closing)
		c.cancel()
	})
}

func (c *conn) isClosing() bool {
	select {
	case <-c.closing:
		return true
	default:
		return false
	}
}

// enqueue queues a protocol message (acknowledgements, pongs, errors,
// completions) for the writer. It never blocks: when the queue is full the
// connection is closed with CloseTryAgainLater. It reports whether the
// message was queued. Operation results use sendResults.
func (c *conn) enqueue(data []byte, op *operation) bool {
	if c.isClosing() {
		return false
	}
	c.queued.Add(1)
	select {
	case c.queue <- outbound{data: data, op: op}:
		return true
	default:
		c.queued.Add(-1)
		c.log.Info("websocket client too slow; closing", "queued", len(c.queue))
		c.closeWith(CloseTryAgainLater, reasonTooSlow)
		return false
	}
}

// enqueueResult queues one result of op, waiting while the queue is full:
// the operation (and the source it reads from) waits for a slow client
// rather than the client being dropped. The live feed is pulled by
// sequence, so a waiting subscription only falls behind and later catches
// up from the store; nothing is lost. A client that stops reading
// altogether is disconnected when a write passes WriteTimeout. It reports
// false when the operation or the connection ended first.
func (c *conn) enqueueResult(ctx context.Context, data []byte, op *operation) bool {
	c.queued.Add(1)
	select {
	case c.queue <- outbound{data: data, op: op}:
		return true
	case <-c.closing:
	case <-ctx.Done():
	}
	c.queued.Add(-1)
	return false
}

// sendResults sends results of op, each the message head (see resultHead),
// a payload and the closing brace. When nothing is queued it writes them
// itself, in one write to the socket, waiting for a slow client as
// enqueueResult does (a client that stops reading fails the write after
// WriteTimeout, which drops the connection); otherwise it queues them
// behind the others. It reports false when the operation or the connection
// ended first.
func (c *conn) sendResults(ctx context.Context, op *operation, head []byte, payloads [][]byte) bool {
	c.wmu.Lock()
	if c.queued.Load() > 0 {
		c.wmu.Unlock()
		for _, p := range payloads {
			msg := make([]byte, 0, len(head)+len(p)+1)
			msg = append(append(append(msg, head...), p...), '}')
			if !c.enqueueResult(ctx, msg, op) {
				return false
			}
		}
		return true
	}
	if c.isClosing() || op.stopped.Load() || ctx.Err() != nil {
		c.wmu.Unlock()
		return false
	}
	bp := messageBuffers.Get().(*[]byte)
	b := (*bp)[:0]
	for _, p := range payloads {
		b = appendFrameHeader(b, len(head)+len(p)+1)
		b = append(append(append(b, head...), p...), '}')
	}
	err := c.flushLocked(b)
	c.wmu.Unlock()
	if cap(b) <= maxPooledMessage {
		*bp = b
		messageBuffers.Put(bp)
	}
	if err != nil {
		c.writeFailed(err)
		return false
	}
	return true
}

// messageBuffers holds the buffers results are assembled in before a
// write; buffers grown over maxPooledMessage are left to the collector.
var messageBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

const maxPooledMessage = 64 << 10

// resultHead returns the start of a result message of operation id:
// everything before the payload.
func (c *conn) resultHead(id string) []byte {
	b := frame(id, c.nextType(), []byte("{}"))
	return b[:len(b)-3] // drop the payload and the closing brace
}

// writeLoop is the connection's only writer: queued messages, pings and
// keep-alives, and finally the close frame.
func (c *conn) writeLoop() {
	defer close(c.writerDone)
	var tick <-chan time.Time
	if c.cfg.PingInterval > 0 {
		ticker := time.NewTicker(c.cfg.PingInterval)
		defer ticker.Stop()
		tick = ticker.C
	}
	for {
		// Closing takes precedence over queued messages.
		select {
		case <-c.closing:
			c.finish()
			return
		default:
		}
		select {
		case <-c.closing:
			c.finish()
			return
		case m := <-c.queue:
			c.wmu.Lock()
			var err error
			if m.op == nil || !m.op.stopped.Load() {
				err = c.writeLocked(m.data)
			}
			c.queued.Add(-1)
			c.wmu.Unlock()
			if err != nil {
				c.writeFailed(err)
				return
			}
		case <-tick:
			if err := c.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(c.cfg.WriteTimeout)); err != nil {
				c.writeFailed(err)
				return
			}
			if !c.acked.Load() {
				continue
			}
			msg := msgPing
			if c.legacy {
				msg = msgKeepAlive
			}
			c.wmu.Lock()
			err := c.writeLocked(msg)
			c.wmu.Unlock()
			if err != nil {
				c.writeFailed(err)
				return
			}
		}
	}
}

var (
	msgPing      = []byte(`{"type":"ping"}`)
	msgKeepAlive = []byte(`{"type":"ka"}`)
)

// writeLocked writes one text message; the caller holds wmu.
func (c *conn) writeLocked(data []byte) error {
	bp := messageBuffers.Get().(*[]byte)
	b := append(appendFrameHeader((*bp)[:0], len(data)), data...)
	err := c.flushLocked(b)
	if cap(b) <= maxPooledMessage {
		*bp = b
		messageBuffers.Put(bp)
	}
	return err
}

// flushLocked writes b, whole WebSocket frames, to the socket in one write;
// the caller holds wmu. Data frames are written here rather than through
// gorilla's writer so that several go out in one write; the control frames
// gorilla writes (pings, pongs, close) are single writes too, and a
// socket's writes never interleave.
func (c *conn) flushLocked(b []byte) error {
	nc := c.ws.NetConn()
	_ = nc.SetWriteDeadline(time.Now().Add(c.cfg.WriteTimeout))
	_, err := nc.Write(b)
	return err
}

// appendFrameHeader appends the header of an unmasked, final text frame of
// n bytes (RFC 6455 section 5.2; a server's frames are not masked).
func appendFrameHeader(b []byte, n int) []byte {
	const finText = 0x80 | websocket.TextMessage
	switch {
	case n <= 125:
		return append(b, finText, byte(n))
	case n <= 0xFFFF:
		return append(b, finText, 126, byte(n>>8), byte(n))
	default:
		return binary.BigEndian.AppendUint64(append(b, finText, 127), uint64(n))
	}
}

// writeFailed drops the socket after a failed write.
func (c *conn) writeFailed(err error) {
	c.log.Debug("websocket write failed", "err", err)
	c.closeWith(websocket.CloseAbnormalClosure, "")
	_ = c.ws.Close()
}

// finish performs the server's side of the closing handshake and drops the
// socket.
func (c *conn) finish() {
	if c.closeCode != websocket.CloseAbnormalClosure {
		// Under wmu: no data frame may follow the close frame.
		c.wmu.Lock()
		for _, m := range c.closeFinal {
			if err := c.writeLocked(m); err != nil {
				break
			}
		}
		msg := websocket.FormatCloseMessage(c.closeCode, c.closeReason)
		err := c.ws.WriteControl(websocket.CloseMessage, msg, time.Now().Add(c.cfg.WriteTimeout))
		c.wmu.Unlock()
		if err == nil {
			grace := time.NewTimer(closeGracePeriod)
			select {
			case <-c.readerDone:
			case <-grace.C:
			}
			grace.Stop()
		}
	}
	_ = c.ws.Close()
}

// truncateReason shortens a close reason to the 123 bytes a close frame
// allows, at a character boundary.
func truncateReason(s string) string {
	const max = 123
	if len(s) <= max {
		return s
	}
	s = s[:max]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}
