package wsgraphql

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/99designs/gqlgen/graphql"
)

// envelope is a client message of either protocol. Pointers tell absent
// fields from empty ones.
type envelope struct {
	ID      *string         `json:"id"`
	Type    *string         `json:"type"`
	Payload json.RawMessage `json:"payload"`
}

// subscribePayload is the payload of subscribe (start in the legacy
// protocol).
type subscribePayload struct {
	Query         *string        `json:"query"`
	OperationName *string        `json:"operationName"`
	Variables     map[string]any `json:"variables"`
	Extensions    map[string]any `json:"extensions"`
}

// Message types of graphql-transport-ws.
const (
	tConnectionInit = "connection_init"
	tConnectionAck  = "connection_ack"
	tPing           = "ping"
	tPong           = "pong"
	tSubscribe      = "subscribe"
	tNext           = "next"
	tError          = "error"
	tComplete       = "complete"
)

// Message types of the legacy graphql-ws protocol that graphql-transport-ws
// does not share.
const (
	tLegacyStart           = "start"
	tLegacyStop            = "stop"
	tLegacyData            = "data"
	tLegacyConnectionError = "connection_error"
	tLegacyTerminate       = "connection_terminate"
)

// handleTransportWS handles one graphql-transport-ws message, as
// PROTOCOL.md of the graphql-ws library specifies.
func (c *conn) handleTransportWS(data []byte, start time.Time) {
	var m envelope
	if err := json.Unmarshal(data, &m); err != nil || m.Type == nil {
		c.closeWith(CloseBadRequest, "Invalid message received")
		return
	}
	switch typ := *m.Type; typ {
	case tConnectionInit:
		payload, ok := decodeObject(m.Payload)
		if !ok {
			c.closeWith(CloseBadRequest, "Invalid message received: connection_init payload must be an object")
			return
		}
		c.handleInit(payload)
	case tPing:
		payload, ok := decodeObject(m.Payload)
		if !ok {
			c.closeWith(CloseBadRequest, "Invalid message received: ping payload must be an object")
			return
		}
		// The payload is echoed re-encoded, so that what is written is
		// valid UTF-8 whatever the client sent.
		var echo []byte
		if payload != nil {
			echo, _ = json.Marshal(payload)
		}
		c.enqueue(frame("", tPong, echo), nil)
	case tPong:
		if !isObjectOrAbsent(m.Payload) {
			c.closeWith(CloseBadRequest, "Invalid message received: pong payload must be an object")
		}
	case tSubscribe:
		c.startFrom(&m, "subscribe", "an object with a string query", true, start)
	case tComplete:
		c.stopFrom(&m, "complete")
	default:
		c.closeWith(CloseBadRequest, fmt.Sprintf("Invalid message received: unexpected type %q", typ))
	}
}

// handleLegacy handles one message of the legacy graphql-ws protocol
// (subscriptions-transport-ws). Its rules for the connection (init timeout,
// single init, ack before start, authentication, message validity) are
// those of graphql-transport-ws, with the same close codes; a start reusing
// the id of a running operation replaces that operation, as
// subscriptions-transport-ws does.
func (c *conn) handleLegacy(data []byte, start time.Time) {
	var m envelope
	if err := json.Unmarshal(data, &m); err != nil || m.Type == nil {
		c.closeWith(CloseBadRequest, "Invalid message received")
		return
	}
	switch typ := *m.Type; typ {
	case tConnectionInit:
		payload, ok := decodeObject(m.Payload)
		if !ok {
			c.closeWith(CloseBadRequest, "Invalid message received: connection_init payload must be an object",
				connectionError("connection_init payload must be an object"))
			return
		}
		c.handleInit(payload)
	case tLegacyStart:
		c.startFrom(&m, "start", "an object", false, start)
	case tLegacyStop:
		c.stopFrom(&m, "stop")
	case tLegacyTerminate:
		c.closeWith(CloseNormalClosure, reasonNormal)
	default:
		c.closeWith(CloseBadRequest, fmt.Sprintf("Invalid message received: unexpected type %q", typ))
	}
}

// handleInit authenticates the connection with the connection_init payload
// and acknowledges it.
func (c *conn) handleInit(payload map[string]any) {
	if c.initReceived.Swap(true) {
		c.closeWith(CloseTooManyInitialisationRequests, reasonTooManyInits)
		return
	}
	if c.initTimer != nil {
		c.initTimer.Stop()
	}

	ctx, expiry, err := c.authenticate(payload)
	switch {
	case errors.Is(err, errPanicked):
		c.closeWith(CloseInternalServerError, reasonInternal, c.connectionError(reasonInternal)...)
		return
	case err != nil:
		c.log.Info("websocket authentication refused", "err", err)
		c.closeWith(CloseForbidden, reasonForbidden, c.connectionError(reasonForbidden)...)
		return
	case c.isClosing():
		return
	}
	if !expiry.IsZero() {
		d := time.Until(expiry)
		if d <= 0 {
			c.closeWith(CloseForbidden, reasonForbidden, c.connectionError(reasonForbidden)...)
			return
		}
		c.expiryTimer = time.AfterFunc(d, func() { c.closeWith(CloseForbidden, reasonForbidden) })
	}

	if c.cfg.OnConnect != nil {
		release, err := c.onConnect(ctx)
		switch {
		case errors.Is(err, errPanicked):
			c.closeWith(CloseInternalServerError, reasonInternal, c.connectionError(reasonInternal)...)
			return
		case err != nil:
			c.log.Info("websocket connection refused", "err", err)
			c.closeWith(CloseTooManyConnections, reasonTooManyConns, c.connectionError(reasonTooManyConns)...)
			return
		}
		c.release = release
	}

	c.opsCtx, c.opsCancel = context.WithCancel(ctx)
	// Operations end with the connection even if Authenticate returned a
	// context not derived from the one it was given.
	c.stopOpsLink = context.AfterFunc(c.ctx, c.opsCancel)
	c.acked.Store(true)
	c.enqueue(frame("", tConnectionAck, nil), nil)
	if c.legacy {
		c.enqueue(msgKeepAlive, nil)
	}
}

// errPanicked stands for the error of a hook that panicked.
var errPanicked = errors.New("hook panicked")

// authenticate calls Config.Authenticate, turning a panic into errPanicked.
func (c *conn) authenticate(payload map[string]any) (ctx context.Context, expiry time.Time, err error) {
	if c.cfg.Authenticate == nil {
		return c.ctx, time.Time{}, nil
	}
	defer func() {
		if v := recover(); v != nil {
			c.log.Error("websocket Authenticate panicked", "panic", v)
			ctx, expiry, err = nil, time.Time{}, errPanicked
		}
	}()
	ctx, expiry, err = c.cfg.Authenticate(c.ctx, c.req, payload)
	if ctx == nil {
		ctx = c.ctx
	}
	return ctx, expiry, err
}

// onConnect calls Config.OnConnect, turning a panic into errPanicked.
func (c *conn) onConnect(ctx context.Context) (release func(), err error) {
	defer func() {
		if v := recover(); v != nil {
			c.log.Error("websocket OnConnect panicked", "panic", v)
			release, err = nil, errPanicked
		}
	}()
	return c.cfg.OnConnect(ctx)
}

// connectionError returns, for a legacy connection, the connection_error
// message to send before closing; graphql-transport-ws has none.
func (c *conn) connectionError(message string) [][]byte {
	if !c.legacy {
		return nil
	}
	return [][]byte{connectionError(message)}
}

func connectionError(message string) []byte {
	payload, _ := json.Marshal(map[string]string{"message": message})
	return frame("", tLegacyConnectionError, payload)
}

// frame encodes a server message. payload must be valid JSON, or nil for
// none.
func frame(id, typ string, payload []byte) []byte {
	b := make([]byte, 0, 32+len(id)+len(payload))
	b = append(b, '{')
	if id != "" {
		quoted, _ := json.Marshal(id)
		b = append(b, `"id":`...)
		b = append(b, quoted...)
		b = append(b, ',')
	}
	b = append(b, `"type":"`...)
	b = append(b, typ...)
	b = append(b, '"')
	if len(payload) > 0 {
		b = append(b, `,"payload":`...)
		b = append(b, payload...)
	}
	return append(b, '}')
}

// requireID returns the message id, if present and not empty.
func requireID(id *string) (string, bool) {
	if id == nil || *id == "" {
		return "", false
	}
	return *id, true
}

// isAbsent reports whether a raw payload is missing or null.
func isAbsent(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

// isObjectOrAbsent reports whether a raw payload is missing, null or an
// object (Unmarshal has already checked that it is valid JSON).
func isObjectOrAbsent(raw json.RawMessage) bool {
	return isAbsent(raw) || bytes.TrimSpace(raw)[0] == '{'
}

// decodeObject decodes a payload that must be missing, null or an object.
func decodeObject(raw json.RawMessage) (map[string]any, bool) {
	if isAbsent(raw) {
		return nil, true
	}
	if !isObjectOrAbsent(raw) {
		return nil, false
	}
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		return nil, false
	}
	return m, true
}

// decodeSubscribe decodes a subscribe (start) payload into gqlgen's
// parameters; numbers in variables stay json.Number, as gqlgen expects.
// strict requires the query to be present, as graphql-transport-ws does.
func decodeSubscribe(raw json.RawMessage, strict bool) (*graphql.RawParams, bool) {
	if isAbsent(raw) || !isObjectOrAbsent(raw) {
		return nil, false
	}
	var p subscribePayload
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&p); err != nil {
		return nil, false
	}
	if strict && p.Query == nil {
		return nil, false
	}
	params := &graphql.RawParams{Variables: p.Variables, Extensions: p.Extensions}
	if p.Query != nil {
		params.Query = *p.Query
	}
	if p.OperationName != nil {
		params.OperationName = *p.OperationName
	}
	return params, true
}

// startFrom handles a message starting an operation (subscribe, or start in
// the legacy protocol) in either protocol: a non-empty id, a valid payload
// (what describes it; strict requires a string query), an acknowledged
// connection; then the operation runs.
func (c *conn) startFrom(m *envelope, verb, payloadShape string, strict bool, start time.Time) {
	id, ok := requireID(m.ID)
	if !ok {
		c.closeWith(CloseBadRequest, "Invalid message received: "+verb+" requires a non-empty id")
		return
	}
	params, ok := decodeSubscribe(m.Payload, strict)
	if !ok {
		c.closeWith(CloseBadRequest, "Invalid message received: "+verb+" payload must be "+payloadShape)
		return
	}
	if !c.acked.Load() {
		c.closeWith(CloseUnauthorized, reasonUnauthorized)
		return
	}
	params.ReadTime = graphql.TraceTiming{Start: start, End: graphql.Now()}
	c.handleSubscribe(id, params)
}

// stopFrom handles a message stopping an operation (complete, or stop in
// the legacy protocol).
func (c *conn) stopFrom(m *envelope, verb string) {
	id, ok := requireID(m.ID)
	if !ok {
		c.closeWith(CloseBadRequest, "Invalid message received: "+verb+" requires a non-empty id")
		return
	}
	c.stopOperation(id)
}
