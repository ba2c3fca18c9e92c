package wsgraphql

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// operation is one running subscribe (start). It is in conn.ops from the
// subscribe until it ends or the client stops it. It is served either by
// a Source of Config.FastPath, pulled by the connection's writer (src is
// set), or by the executor in a goroutine of its own (cancel is set).
type operation struct {
	id   string
	head []byte          // start of its result messages (resultHead)
	ctx  context.Context // the connection's operations context (fast path)

	// params waits for the writer to offer the operation to the fast
	// path (which may read the database: the reader does not wait for it).
	params *graphql.RawParams
	// src (fast path) or cancel (executor) are set under conn.mu once the
	// operation started; the writer reads src without it.
	src    Source
	cancel context.CancelFunc

	// registered is set once the operation is in conn.ops with its source:
	// the writer pulls it only then.
	registered atomic.Bool
	// ready is set while the operation is on the writer's ready list
	// (guarded by conn.smu).
	ready bool
	// stopped is set when the client completed (stopped) the operation;
	// from then on no message of the operation is written.
	stopped atomic.Bool
}

// closeOp releases what op holds: its source, or its context.
func (c *conn) closeOp(op *operation) {
	c.mu.Lock()
	src, cancel := op.src, op.cancel
	c.mu.Unlock()
	if src != nil {
		src.Close()
	}
	if cancel != nil {
		cancel()
	}
}

// handleSubscribe registers operation id and starts it: offered to
// Config.FastPath first (no goroutine: the writer pulls its results), else
// in a goroutine of its own that runs the executor. An id still running
// closes a graphql-transport-ws connection with
// CloseSubscriberAlreadyExists, and replaces the running operation in the
// legacy protocol; an operation over Config.MaxOperations is refused with a
// CodeQuotaExceeded error.
func (c *conn) handleSubscribe(id string, params *graphql.RawParams) {
	params.Headers = c.req.Header

	c.mu.Lock()
	var replaced *operation
	if old := c.ops[id]; old != nil {
		if !c.legacy {
			c.mu.Unlock()
			c.closeWith(CloseSubscriberAlreadyExists, "Subscriber for "+id+" already exists")
			return
		}
		delete(c.ops, id)
		old.stopped.Store(true)
		replaced = old
	}
	full := len(c.ops) >= c.cfg.MaxOperations
	c.mu.Unlock()
	if replaced != nil {
		c.closeOp(replaced)
	}
	if full {
		c.refuse(id, &gqlerror.Error{
			Message:    fmt.Sprintf("too many operations on this connection (limit %d); complete one first", c.cfg.MaxOperations),
			Extensions: map[string]any{"code": CodeQuotaExceeded},
		})
		return
	}

	op := &operation{id: id, head: c.resultHead(id), ctx: c.opsCtx}
	if c.cfg.FastPath != nil {
		// The writer offers it to the fast path (start), then pulls what
		// is at hand already (a replay, say).
		op.params = params
		c.mu.Lock()
		c.ops[id] = op
		c.mu.Unlock()
		op.registered.Store(true)
		c.markReady(op)
		return
	}
	ctx, cancel := context.WithCancel(c.opsCtx)
	op.cancel = cancel
	c.mu.Lock()
	c.ops[id] = op
	c.wg.Add(1)
	c.mu.Unlock()
	op.registered.Store(true)
	go c.run(ctx, op, params)
}

// start runs on the writer: it offers op to Config.FastPath, or else runs
// it with the executor in a goroutine of its own. It reports whether op
// has a source to pull.
func (c *conn) start(op *operation) bool {
	params := op.params
	op.params = nil
	if params == nil {
		return false // with the executor already
	}
	if src, ok := c.openFastPath(op, params); ok {
		c.mu.Lock()
		if op.stopped.Load() || c.ops[op.id] != op {
			c.mu.Unlock()
			src.Close()
			return false
		}
		op.src = src
		c.mu.Unlock()
		return true
	}
	ctx, cancel := context.WithCancel(c.opsCtx)
	c.mu.Lock()
	if op.stopped.Load() || c.ops[op.id] != op {
		c.mu.Unlock()
		cancel()
		return false
	}
	op.cancel = cancel
	c.wg.Add(1)
	c.mu.Unlock()
	go c.run(ctx, op, params)
	return false
}

// openFastPath offers op to Config.FastPath; a panic there leaves the
// operation to the executor.
func (c *conn) openFastPath(op *operation, params *graphql.RawParams) (src Source, ok bool) {
	defer func() {
		if v := recover(); v != nil {
			c.log.Error("websocket fast path panicked", "id", op.id, "panic", v)
			src, ok = nil, false
		}
	}()
	src, ok = c.cfg.FastPath(op.ctx, params, func() { c.markReady(op) })
	if ok && src == nil {
		return nil, false
	}
	return src, ok
}

// stopOperation handles the client's complete (stop) for id: the operation
// is ended and nothing more is written for it. An unknown id (one that
// already ended, say) is ignored.
func (c *conn) stopOperation(id string) {
	c.mu.Lock()
	op := c.ops[id]
	if op != nil {
		delete(c.ops, id)
		op.stopped.Store(true)
	}
	c.mu.Unlock()
	if op != nil {
		c.closeOp(op)
	}
}

// run executes an operation: it creates the operation context (errors there
// end the operation with an error message), then forwards each response of
// gqlgen's response function as next (data) until the function returns nil
// or the operation is cancelled, and ends with complete.
func (c *conn) run(ctx context.Context, op *operation, params *graphql.RawParams) {
	defer c.wg.Done()
	defer op.cancel()

	var rc *graphql.OperationContext
	defer func() {
		if v := recover(); v != nil {
			c.log.Error("websocket operation panicked", "id", op.id, "panic", v)
			c.finishOperation(op, c.presentPanic(ctx, rc, v))
		}
	}()

	head := op.head
	ctx = graphql.StartOperationTrace(ctx)
	rc, errs := c.exec.CreateOperationContext(ctx, params)
	if errs != nil {
		resp := c.exec.DispatchError(graphql.WithOperationContext(ctx, rc), errs)
		c.finishOperation(op, resp.Errors)
		return
	}

	responses, ctx := c.exec.DispatchOperation(ctx, rc)
	for ctx.Err() == nil {
		resp := responses(ctx)
		if resp == nil {
			break
		}
		payload, err := encodeResponse(resp)
		if err != nil {
			c.log.Error("websocket response not encodable", "id", op.id, "err", err)
			c.finishOperation(op, gqlerror.List{{Message: "internal server error"}})
			return
		}
		if !c.sendResults(ctx, op, head, [][]byte{payload}) {
			return // the operation was stopped or the connection is closing
		}
	}
	c.finishOperation(op, nil)
}

// maxBatch and maxBatchBytes bound how many results, and how many bytes of
// them, one pull of a fast-path operation writes at once.
const (
	maxBatch      = 64
	maxBatchBytes = 64 << 10
)

// finishOperation ends an operation that was not stopped by the client:
// with an error message carrying errs if there are any (followed by
// complete in the legacy protocol), with complete otherwise. The id is free
// for reuse before the message is queued.
func (c *conn) finishOperation(op *operation, errs gqlerror.List) {
	c.mu.Lock()
	mine := c.ops[op.id] == op
	if mine {
		delete(c.ops, op.id)
	}
	c.mu.Unlock()
	if mine {
		c.closeOp(op)
	}
	if !mine || op.stopped.Load() || c.isClosing() {
		return
	}
	if len(errs) == 0 {
		c.enqueue(frame(op.id, tComplete, nil), op)
		return
	}
	c.sendErrors(op.id, op, errs)
}

// refuse answers a subscribe that is not run with an error message.
func (c *conn) refuse(id string, err *gqlerror.Error) {
	c.sendErrors(id, nil, gqlerror.List{err})
}

// sendErrors queues an error message for id (and complete, in the legacy
// protocol).
func (c *conn) sendErrors(id string, op *operation, errs gqlerror.List) {
	payload, err := json.Marshal(errs)
	if err != nil {
		payload = []byte(`[{"message":"internal server error"}]`)
	}
	if !c.enqueue(frame(id, tError, payload), op) {
		return
	}
	if c.legacy {
		c.enqueue(frame(id, tComplete, nil), op)
	}
}

// presentPanic turns a panic of an operation into presented GraphQL errors,
// through the operation's recover function and the error presenter.
func (c *conn) presentPanic(ctx context.Context, rc *graphql.OperationContext, v any) (errs gqlerror.List) {
	defer func() {
		if recover() != nil {
			errs = gqlerror.List{{Message: "internal server error"}}
		}
	}()
	var err error = gqlerror.Errorf("internal server error")
	if rc != nil && rc.RecoverFunc != nil {
		ctx = graphql.WithOperationContext(ctx, rc)
		err = rc.Recover(ctx, v)
	}
	var gqlErr *gqlerror.Error
	if !errors.As(err, &gqlErr) {
		gqlErr = gqlerror.Errorf("internal server error")
	}
	return c.exec.DispatchError(ctx, gqlerror.List{gqlErr}).Errors
}

// encodeResponse encodes a response as the payload of next (data). A
// response of data alone is written without re-encoding its data.
func encodeResponse(resp *graphql.Response) ([]byte, error) {
	if len(resp.Errors) == 0 && len(resp.Extensions) == 0 && resp.Label == "" && resp.Path == nil &&
		resp.HasNext == nil && len(resp.Data) > 0 {
		b := make([]byte, 0, len(resp.Data)+9)
		b = append(b, `{"data":`...)
		b = append(b, resp.Data...)
		return append(b, '}'), nil
	}
	return json.Marshal(resp)
}

// nextType is the message type carrying results in the connection's protocol.
func (c *conn) nextType() string {
	if c.legacy {
		return tLegacyData
	}
	return tNext
}
