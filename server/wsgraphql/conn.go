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

// outbound is a protocol message waiting for the writer. A message of an
// operation the client has completed is dropped instead of written.
type outbound struct {
	data []byte
	op   *operation // nil for connection-level messages
}

// conn is one WebSocket connection. At most two goroutines serve it,
// however many operations it runs: the reader (a goroutine Transport.Do
// starts after the upgrade, running serve) and the writer (writeLoop), which runs only
// while there is something to write and exits when there is not, so that
// an idle connection holds one goroutine. Operations served by
// Config.FastPath have no goroutine: their sources call wake, which puts
// them on the ready list, and the writer pulls their results. Only
// operations left to gqlgen's executor, whose response function blocks,
// run in a goroutine of their own (run). Fields marked "reader" are touched
// by the reader only.
//
// Data frames reach the socket under wmu, and whoever holds it first
// writes the queued protocol messages (drainLocked), so that every message
// leaves in the order it was sent.
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

	// wmu is held while a data message is written to ws (gorilla allows
	// one writer at a time; control frames need no lock).
	wmu sync.Mutex

	// smu guards the writer's work: the fields below, and operation.ready.
	smu       sync.Mutex
	queue     []outbound   // protocol messages, at most SendQueueSize; nil when empty
	ready     []*operation // fast-path operations to pull; nil when none
	pingDue   bool         // the ping timer fired
	writing   bool         // a writer runs (for good once the connection is closing)
	pingTimer *time.Timer

	closeOnce   sync.Once
	closing     chan struct{} // closed by closeWith
	closeCode   int           // set before closing is closed
	closeReason string
	closeFinal  [][]byte // messages written just before the close frame

	readerDone chan struct{} // closed when the reader stops reading
	writerDone chan struct{} // closed when the writer has closed the socket
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
	wg  sync.WaitGroup        // operation goroutines (executor operations only)
}

func newConn(t *Transport, ws *websocket.Conn, r *http.Request, exec graphql.GraphExecutor, legacy bool) *conn {
	// The connection outlives the request (Do returns once it is
	// established, and net/http then cancels the request's context): it
	// keeps the request's values but not its cancellation, and ends by
	// closeWith (Transport.Shutdown closes every connection).
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	c := &conn{
		cfg:        &t.cfg,
		ws:         ws,
		req:        r,
		exec:       exec,
		legacy:     legacy,
		log:        t.cfg.Logger.With("subprotocol", ws.Subprotocol(), "remote", ws.RemoteAddr().String()),
		ctx:        ctx,
		cancel:     cancel,
		closing:    make(chan struct{}),
		readerDone: make(chan struct{}),
		writerDone: make(chan struct{}),
		finished:   make(chan struct{}),
		opsCtx:     ctx,
		ops:        map[string]*operation{},
	}
	return c
}

// serve runs the connection to its end: it reads and handles messages
// until the socket fails or closes, then waits for the writer and every
// operation to exit and releases what the connection holds.
func (c *conn) serve() {
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

	if c.cfg.PingInterval > 0 {
		c.smu.Lock()
		c.pingTimer = time.AfterFunc(c.cfg.PingInterval, c.pingTick)
		c.smu.Unlock()
	}
	if c.cfg.InitTimeout > 0 {
		c.initTimer = time.AfterFunc(c.cfg.InitTimeout, func() {
			if !c.initReceived.Load() {
				c.closeWith(CloseConnectionInitialisationTimeout, reasonInitTimeout)
			}
		})
	}
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
	c.smu.Lock()
	if c.pingTimer != nil {
		c.pingTimer.Stop()
	}
	c.smu.Unlock()
	// The writer has exited for good: end the operations, releasing the
	// fast path's sources (executor operations end with their context).
	c.mu.Lock()
	ops := c.ops
	c.ops = nil
	c.mu.Unlock()
	for _, op := range ops {
		op.stopped.Store(true)
		c.closeOp(op)
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
		c.smu.Lock()
		c.kickLocked() // the writer writes the close frame
		c.smu.Unlock()
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
// message was queued.
func (c *conn) enqueue(data []byte, op *operation) bool {
	if c.isClosing() {
		return false
	}
	c.smu.Lock()
	if n := len(c.queue); n >= c.cfg.SendQueueSize {
		c.smu.Unlock()
		c.log.Info("websocket client too slow; closing", "queued", n)
		c.closeWith(CloseTryAgainLater, reasonTooSlow)
		return false
	}
	c.queue = append(c.queue, outbound{data: data, op: op})
	c.kickLocked()
	c.smu.Unlock()
	return true
}

// markReady schedules a pull of the fast-path operation op by the writer.
// It never blocks: it is the wake function of op's source, called by the
// live hub.
func (c *conn) markReady(op *operation) {
	c.smu.Lock()
	if !op.ready {
		op.ready = true
		c.ready = append(c.ready, op)
		c.kickLocked()
	}
	c.smu.Unlock()
}

// kickLocked starts the writer unless one runs; the caller holds smu.
func (c *conn) kickLocked() {
	if !c.writing {
		c.writing = true
		go c.writeLoop()
	}
}

// pingTick runs when the ping timer fires: it rearms it and has the writer
// send a ping, running the writer on the timer's goroutine if none runs.
func (c *conn) pingTick() {
	c.smu.Lock()
	if c.isClosing() {
		c.smu.Unlock()
		return
	}
	c.pingTimer.Reset(c.cfg.PingInterval)
	c.pingDue = true
	if c.writing {
		c.smu.Unlock()
		return
	}
	c.writing = true
	c.smu.Unlock()
	c.writeLoop()
}

// writeLoop is the connection's only writer goroutine, started when there
// is something to write (kickLocked) and exiting when there is nothing
// left: queued protocol messages, pulls of ready fast-path operations,
// pings and keep-alives, and finally the close frame. An idle connection
// has no writer.
func (c *conn) writeLoop() {
	for {
		c.smu.Lock()
		// Closing takes precedence over everything else. writing stays
		// set: no writer starts after this one.
		if c.isClosing() {
			c.smu.Unlock()
			c.finish()
			close(c.writerDone)
			return
		}
		ping, ready := c.pingDue, c.ready
		if !ping && len(ready) == 0 && len(c.queue) == 0 {
			c.writing = false
			c.smu.Unlock()
			return
		}
		c.pingDue, c.ready = false, nil
		for _, op := range ready {
			op.ready = false // a wake from now on schedules another pull
		}
		c.smu.Unlock()

		if ping {
			c.ping()
		}
		c.wmu.Lock()
		err := c.drainLocked()
		c.wmu.Unlock()
		if err != nil {
			c.writeFailed(err)
			continue
		}
		for _, op := range ready {
			if c.isClosing() {
				break
			}
			c.pull(op)
		}
	}
}

// ping sends a WebSocket ping and, once acknowledged, a protocol ping (ka
// in the legacy protocol).
func (c *conn) ping() {
	if err := c.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(c.cfg.WriteTimeout)); err != nil {
		c.writeFailed(err)
		return
	}
	if !c.acked.Load() {
		return
	}
	msg := msgPing
	if c.legacy {
		msg = msgKeepAlive
	}
	c.wmu.Lock()
	err := c.drainLocked()
	if err == nil {
		err = c.writeLocked(msg)
	}
	c.wmu.Unlock()
	if err != nil {
		c.writeFailed(err)
	}
}

// pull writes the results of fast-path operation op that are at hand,
// at most maxBatch of them (or maxBatchBytes), in one write; it schedules
// another pull when it stopped at the bound, and completes the operation
// when its source ended. A client that does not read holds the writer in
// that write (up to WriteTimeout): the source is not pulled meanwhile, so
// it falls behind and later catches up; nothing is lost.
func (c *conn) pull(op *operation) {
	if !op.registered.Load() || op.stopped.Load() {
		return
	}
	if op.src == nil && !c.start(op) {
		return
	}
	bp := messageBuffers.Get().(*[]byte)
	b := (*bp)[:0]
	n, ended := 0, false
	defer func() {
		if cap(b) <= maxPooledMessage {
			*bp = b[:0]
			messageBuffers.Put(bp)
		}
		if v := recover(); v != nil {
			c.log.Error("websocket operation panicked", "id", op.id, "panic", v)
			c.finishOperation(op, c.presentPanic(op.ctx, nil, v))
		}
	}()
	for n < maxBatch && len(b) < maxBatchBytes {
		payload, more := op.src.Next(op.ctx)
		if !more {
			ended = true
			break
		}
		if payload == nil {
			break
		}
		b = appendFrameHeader(b, len(op.head)+len(payload)+1)
		b = append(append(append(b, op.head...), payload...), '}')
		n++
	}
	if n > 0 {
		c.wmu.Lock()
		err := c.drainLocked()
		if err == nil && !op.stopped.Load() && !c.isClosing() {
			err = c.flushLocked(b)
		}
		c.wmu.Unlock()
		if err != nil {
			c.writeFailed(err)
			return
		}
	}
	switch {
	case ended:
		c.finishOperation(op, nil)
	case n == maxBatch || len(b) >= maxBatchBytes:
		c.markReady(op) // more may be at hand: after the others' turn
	}
}

// drainLocked writes the queued protocol messages, in one write; the
// caller holds wmu. Messages of operations the client has completed are
// dropped.
func (c *conn) drainLocked() error {
	for {
		c.smu.Lock()
		q := c.queue
		c.queue = nil
		c.smu.Unlock()
		if len(q) == 0 {
			return nil
		}
		bp := messageBuffers.Get().(*[]byte)
		b := (*bp)[:0]
		for _, m := range q {
			if m.op == nil || !m.op.stopped.Load() {
				b = append(appendFrameHeader(b, len(m.data)), m.data...)
			}
		}
		var err error
		if len(b) > 0 {
			err = c.flushLocked(b)
		}
		if cap(b) <= maxPooledMessage {
			*bp = b[:0]
			messageBuffers.Put(bp)
		}
		if err != nil {
			return err
		}
	}
}

// sendResults sends results of an executor operation op, each the message
// head (see resultHead), a payload and the closing brace, in one write to
// the socket after the queued protocol messages, waiting for a slow client
// (a client that stops reading fails the write after WriteTimeout, which
// drops the connection). It reports false when the operation or the
// connection ended first.
func (c *conn) sendResults(ctx context.Context, op *operation, head []byte, payloads [][]byte) bool {
	c.wmu.Lock()
	if c.isClosing() || op.stopped.Load() || ctx.Err() != nil {
		c.wmu.Unlock()
		return false
	}
	err := c.drainLocked()
	bp := messageBuffers.Get().(*[]byte)
	b := (*bp)[:0]
	if err == nil {
		for _, p := range payloads {
			b = appendFrameHeader(b, len(head)+len(p)+1)
			b = append(append(append(b, head...), p...), '}')
		}
		err = c.flushLocked(b)
	}
	c.wmu.Unlock()
	if cap(b) <= maxPooledMessage {
		*bp = b[:0]
		messageBuffers.Put(bp)
	}
	if err != nil {
		c.writeFailed(err)
		return false
	}
	return true
}

// messageBuffers holds the buffers messages are assembled in before a
// write, taken only while writing; buffers grown over maxPooledMessage are
// left to the collector.
var messageBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

const maxPooledMessage = 64 << 10

// resultHead returns the start of a result message of operation id:
// everything before the payload.
func (c *conn) resultHead(id string) []byte {
	b := frame(id, c.nextType(), []byte("{}"))
	return b[:len(b)-3] // drop the payload and the closing brace
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
