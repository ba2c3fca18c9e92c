package wsgraphql

import (
	"context"
	"github.com/99designs/gqlgen/graphql"
	"log/slog"
	"net/http"
	"time"
)

// Subprotocol names, as sent in the Sec-WebSocket-Protocol header.
const (
	// SubprotocolGraphQLTransportWS is the protocol of the npm graphql-ws
	// library (https://github.com/enisdenjo/graphql-ws/blob/master/PROTOCOL.md).
	SubprotocolGraphQLTransportWS = "graphql-transport-ws"

	// SubprotocolGraphQLWS is the legacy protocol of the npm
	// subscriptions-transport-ws library. Despite its name it is not the
	// protocol of the graphql-ws library.
	SubprotocolGraphQLWS = "graphql-ws"
)

// CodeQuotaExceeded is the extensions.code of the GraphQL error sent for an
// operation refused because the connection already runs
// [Config.MaxOperations] operations. The connection stays open; the client
// should complete an operation it no longer needs, or open another
// connection, before retrying.
const CodeQuotaExceeded = "QUOTA_EXCEEDED"

// Close codes sent in the WebSocket close frame. Codes 4400 to 4429 and
// 4500 have the meaning the graphql-transport-ws protocol gives them; the
// legacy graphql-ws protocol defines no close codes, and uses the same ones.
//
// Reconnection advice assumes the graphql-ws client library: it retries
// (with back-off) after 1000, 1001, 1013, 4403 and 4408, and gives up after
// 1009, 4400, 4401, 4409, 4429 and 4500, which signal a bug or a condition a
// blind retry would not fix.
const (
	// CloseNormalClosure (1000) answers the client's own close frame (the
	// client's code is echoed) and, in the legacy protocol, a
	// connection_terminate message. Nothing to do: the client asked for it.
	CloseNormalClosure = 1000

	// CloseGoingAway (1001, reason "Going Away") is sent when the server
	// shuts down, and (reason "keep-alive timeout") when nothing was
	// received from the client for [Config.PongWait]. The client should
	// reconnect after a short, jittered delay (another instance will serve
	// it) and resubscribe, resuming from the last sequence it saw.
	CloseGoingAway = 1001

	// CloseMessageTooBig (1009, reason "Message too big") is sent when a
	// client message exceeds [Config.ReadLimit]. The client has a bug or
	// sends oversized variables; it should not retry the same message, but
	// send smaller operations (for example paginate, or use POST for large
	// mutations).
	CloseMessageTooBig = 1009

	// CloseTryAgainLater (1013, reason "client too slow; resubscribe with
	// afterSequence") is sent when the client did not read its messages and
	// a protocol message (pong, error, complete) found the send queue full.
	// (Operation results never overflow: they wait for the client, and a
	// client that reads nothing for [Config.WriteTimeout] is disconnected.)
	// The client should reconnect and resubscribe with afterSequence set to
	// the last sequence it processed, so the server replays what it missed
	// from the store.
	CloseTryAgainLater = 1013

	// CloseBadRequest (4400, reason describing the problem) is sent for a
	// message that is not JSON, has an unknown type, lacks a required id, or
	// has an invalid payload, and for a message type the client must not
	// send (next, error, connection_ack, ...). The client has a bug; it
	// should not reconnect blindly.
	CloseBadRequest = 4400

	// CloseUnauthorized (4401, reason "Unauthorized") is sent when the
	// client subscribes before the server acknowledged its connection_init.
	// The client must send connection_init and wait for connection_ack
	// before subscribing.
	CloseUnauthorized = 4401

	// CloseForbidden (4403, reason "Forbidden") is sent when
	// [Config.Authenticate] rejects the connection_init payload, and when the
	// expiry it returned (the token's) passes. The client should obtain a
	// fresh token, reconnect with it in the connection_init payload
	// ("Authorization": "Bearer ..."), and resubscribe with afterSequence.
	CloseForbidden = 4403

	// CloseConnectionInitialisationTimeout (4408, reason "Connection
	// initialisation timeout") is sent when no connection_init arrived within
	// [Config.InitTimeout] of the upgrade. The client should send
	// connection_init right after the socket opens, then reconnect.
	CloseConnectionInitialisationTimeout = 4408

	// CloseSubscriberAlreadyExists (4409, reason "Subscriber for <id>
	// already exists") is sent for a subscribe whose id belongs to an
	// operation still running on the connection. The client must use a
	// fresh id per operation (ids may be reused only after the operation's
	// complete or error was received or sent).
	CloseSubscriberAlreadyExists = 4409

	// CloseTooManyInitialisationRequests (4429, reason "Too many
	// initialisation requests") is sent for a second connection_init on the
	// same connection. The client has a bug: it must send connection_init
	// exactly once per socket.
	CloseTooManyInitialisationRequests = 4429

	// CloseTooManyConnections (4429, reason "too many connections") is sent
	// when [Config.OnConnect] refuses the connection, typically because the
	// identity already holds its share of connections. The client should
	// multiplex its operations over the connections it already has, close
	// unused ones, and reconnect only after a back-off.
	CloseTooManyConnections = 4429

	// CloseInternalServerError (4500, reason "Internal server error") is
	// sent when a hook ([Config.Authenticate], [Config.OnConnect]) panicked.
	// The client may reconnect after a back-off; the server logged the
	// panic.
	CloseInternalServerError = 4500
)

// Close reasons, as sent with the close codes.
const (
	reasonGoingAway        = "Going Away"
	reasonKeepAliveTimeout = "keep-alive timeout"
	reasonMessageTooBig    = "Message too big"
	reasonTooSlow          = "client too slow; resubscribe with afterSequence"
	reasonUnauthorized     = "Unauthorized"
	reasonForbidden        = "Forbidden"
	reasonInitTimeout      = "Connection initialisation timeout"
	reasonTooManyInits     = "Too many initialisation requests"
	reasonTooManyConns     = "too many connections"
	reasonInternal         = "Internal server error"
	reasonNormal           = "Normal Closure"
)

// Defaults applied by [New] to zero Config fields.
const (
	// DefaultInitTimeout is the default [Config.InitTimeout].
	DefaultInitTimeout = 3 * time.Second
	// DefaultPingInterval is the default [Config.PingInterval].
	DefaultPingInterval = 15 * time.Second
	// DefaultWriteTimeout is the default [Config.WriteTimeout].
	DefaultWriteTimeout = 10 * time.Second
	// DefaultReadLimit is the default [Config.ReadLimit], in bytes.
	DefaultReadLimit = 64 << 10
	// DefaultMaxOperations is the default [Config.MaxOperations].
	DefaultMaxOperations = 100
	// DefaultSendQueueSize is the default [Config.SendQueueSize], in
	// messages.
	DefaultSendQueueSize = 32
)

// closeGracePeriod is how long the server waits, after sending its close
// frame, for the client's close frame before it drops the TCP connection.
const closeGracePeriod = time.Second

// Config configures a [Transport]. The zero value is usable: every zero
// field takes its documented default.
type Config struct {
	// InitTimeout is how long a client has, after the upgrade, to send
	// connection_init; when it passes first the socket is closed with
	// [CloseConnectionInitialisationTimeout]. Zero means
	// [DefaultInitTimeout] (3s); a negative value disables the timeout (not
	// recommended: idle unauthenticated sockets then last until PongWait).
	InitTimeout time.Duration

	// PingInterval is how often the server sends a WebSocket ping frame,
	// and, once acknowledged, a graphql-transport-ws ping message or a
	// legacy ka message. Zero means [DefaultPingInterval] (15s); a negative
	// value disables server pings and keep-alives.
	PingInterval time.Duration

	// PongWait is how long the server waits for any frame from the client
	// (a message, or a pong answering its ping) before it closes the
	// connection with [CloseGoingAway] ("keep-alive timeout"). Zero means
	// twice PingInterval, or no limit when pings are disabled. A value not
	// greater than PingInterval would drop healthy clients, and is raised to
	// PingInterval plus WriteTimeout. A negative value disables the check.
	PongWait time.Duration

	// WriteTimeout is the deadline for writing one message (or control
	// frame) to the socket; a client that does not read for that long is
	// disconnected. Zero or negative means [DefaultWriteTimeout] (10s).
	WriteTimeout time.Duration

	// ReadLimit is the largest client message, in bytes; a larger one closes
	// the connection with [CloseMessageTooBig]. Zero or negative means
	// [DefaultReadLimit] (64 KiB).
	ReadLimit int64

	// MaxOperations is how many operations one connection may run at once.
	// A subscribe beyond it is answered with an error message for its id,
	// with extensions.code [CodeQuotaExceeded]; the connection stays open.
	// Zero or negative means [DefaultMaxOperations] (100).
	MaxOperations int

	// SendQueueSize is how many protocol messages (acknowledgements,
	// pongs, errors, completions) may wait for the writer of one
	// connection; one that finds the queue full closes the connection with
	// [CloseTryAgainLater]. Operation results are not queued: they are
	// pulled from their source, or written by their operation, only when
	// the socket takes them (backpressure: a slow client slows only its
	// own operations). The queue holds memory only while messages wait.
	// Zero or negative means [DefaultSendQueueSize] (32).
	SendQueueSize int

	// CheckOrigin decides whether an upgrade request's Origin is allowed; a
	// refused request gets HTTP 403 Forbidden. Nil allows requests without
	// an Origin header and requests whose Origin host equals the request's
	// Host (same origin). Allow-lists such as AETHER_ALLOWED_ORIGINS are the
	// caller's to implement here.
	CheckOrigin func(r *http.Request) bool

	// Authenticate is called once per connection, with the connection_init
	// payload (nil when absent), from the goroutine that reads the socket;
	// the connection is not acknowledged until it returns. r is the upgrade
	// request; a credential is usually looked up in the payload first and
	// in r's Authorization header second (see [Authorization]). ctx is
	// cancelled when the connection closes.
	//
	// The returned context (derived from ctx; nil means ctx) is the parent of
	// every operation of the connection, so it carries the principal to the
	// resolvers. A non-zero expiry (the credential's) closes the connection
	// with [CloseForbidden] when it passes. An error closes the connection
	// with [CloseForbidden] at once (legacy clients first receive
	// connection_error); the error is logged, not sent.
	//
	// Nil accepts every connection, with no expiry.
	Authenticate func(ctx context.Context, r *http.Request, initPayload map[string]any) (context.Context, time.Time, error)

	// OnConnect, if set, is called after a successful Authenticate with the
	// context it returned, to enforce per-identity connection limits. An
	// error closes the connection with [CloseTooManyConnections]. The
	// returned release function (which may be nil) is called exactly once,
	// after the connection's goroutines have all finished.
	OnConnect func(ctx context.Context) (release func(), err error)

	// FastPath, if set, is offered every operation before the executor,
	// from the goroutine that reads the socket, with the context operations
	// get (the one Authenticate returned; it ends with the connection). It
	// returns ok=false to leave the operation to the executor. Otherwise
	// the operation runs without a goroutine of its own: the connection's
	// writer pulls src whenever wake has been called (wake may be called
	// from any goroutine, never blocks, and is cheap: it schedules a pull)
	// and sends each payload src returns (a complete GraphQL response, e.g.
	// {"data":…}) as a result message, several in one write when it is
	// behind, until src reports no more; then it completes the operation.
	// The transport pulls once right after FastPath returns. src is closed
	// when the operation ends, however it ends. It serves hot subscriptions
	// without the executor's per-field work; it must answer exactly as the
	// executor would.
	FastPath func(ctx context.Context, params *graphql.RawParams, wake func()) (src Source, ok bool)

	// Logger receives connection closes (debug), refused authentications
	// (info) and panics (error). Nil discards.
	Logger *slog.Logger
}

// withDefaults returns c with its zero fields set to their defaults.
func (c Config) withDefaults() Config {
	if c.InitTimeout == 0 {
		c.InitTimeout = DefaultInitTimeout
	}
	if c.PingInterval == 0 {
		c.PingInterval = DefaultPingInterval
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.PongWait == 0 && c.PingInterval > 0 {
		c.PongWait = 2 * c.PingInterval
	}
	if c.PongWait > 0 && c.PingInterval > 0 && c.PongWait <= c.PingInterval {
		c.PongWait = c.PingInterval + c.WriteTimeout
	}
	if c.ReadLimit <= 0 {
		c.ReadLimit = DefaultReadLimit
	}
	if c.MaxOperations <= 0 {
		c.MaxOperations = DefaultMaxOperations
	}
	if c.SendQueueSize <= 0 {
		c.SendQueueSize = DefaultSendQueueSize
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Source is the results of an operation served by [Config.FastPath],
// pulled by the connection's writer goroutine.
type Source interface {
	// Next returns the next result payload if one is at hand. It must not
	// wait for new results (it may do bounded work, such as a database
	// read of results already committed): when none is at hand it returns
	// a nil payload and more=true, and the source calls its wake function
	// once one may be. more=false ends the operation (complete). ctx ends
	// with the connection.
	Next(ctx context.Context) (payload []byte, more bool)
	// Close releases the source; it may be called concurrently with Next,
	// and more than once.
	Close()
}

// Authorization returns the credential a connection presents: the
// "Authorization" (or "authorization") string of the connection_init
// payload, or else the Authorization header of the upgrade request r.
// Browsers cannot set headers on WebSocket upgrades, so they use the
// payload. It is a helper for [Config.Authenticate] implementations.
func Authorization(r *http.Request, initPayload map[string]any) string {
	for _, k := range []string{"Authorization", "authorization"} {
		if v, ok := initPayload[k].(string); ok && v != "" {
			return v
		}
	}
	if r == nil {
		return ""
	}
	return r.Header.Get("Authorization")
}
