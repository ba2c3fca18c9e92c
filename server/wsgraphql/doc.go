// Package wsgraphql serves GraphQL over WebSocket as a gqlgen transport
// (graphql.Transport), using github.com/gorilla/websocket. Add it to a
// gqlgen handler.Server like any transport (gqlgen's GET transport leaves
// upgrade requests alone, so the order does not matter for it):
//
//	ws := wsgraphql.New(wsgraphql.Config{Authenticate: authenticate})
//	srv.AddTransport(ws)
//
//	// net/http does not track hijacked connections: close them on shutdown.
//	httpServer.RegisterOnShutdown(func() {
//		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
//		defer cancel()
//		_ = ws.Shutdown(ctx)
//	})
//
// # Subprotocols
//
// A client names the protocol it speaks in the Sec-WebSocket-Protocol
// header of the upgrade request. Two are supported:
//
//   - graphql-transport-ws ([SubprotocolGraphQLTransportWS]), the protocol
//     of the npm graphql-ws library, implemented as its PROTOCOL.md
//     specifies it.
//   - graphql-ws ([SubprotocolGraphQLWS]), the legacy protocol of the npm
//     subscriptions-transport-ws library, kept for older clients.
//
// When the client offers both, the first one in the client's list wins. An
// upgrade request that offers neither (or offers none at all) is refused
// before the upgrade with HTTP 400 Bad Request: no socket is opened, so no
// goroutine or connection slot is spent on a client that could not be
// understood, and non-browser clients get a readable error. Browsers report
// the refusal as a failed connection (close code 1006).
//
// # Connection lifecycle
//
// After the upgrade the client must send connection_init within
// [Config.InitTimeout], or the socket is closed with
// [CloseConnectionInitialisationTimeout]. The init payload (a JSON object,
// or absent) is handed to [Config.Authenticate]; the context it returns is
// the parent of every operation the connection runs, and the expiry it
// returns bounds the connection's life ([CloseForbidden] when it passes).
// [Config.OnConnect] may then refuse the connection
// ([CloseTooManyConnections]). Only then is connection_ack sent and may the
// client start operations.
//
// An operation (subscribe, or start in the legacy protocol) is offered to
// [Config.FastPath] first: one it serves has no goroutine of its own; its
// [Source] calls a wake function when results may be at hand and the
// connection's writer pulls them. Any other operation runs in its own
// goroutine that reads gqlgen's response function (which blocks) until it
// returns nil. Either way each response is forwarded as next (data),
// followed by complete. When the client completes (stops) an operation,
// its source is closed or its context cancelled, the transport stops
// reading its results, and no further message for its id is written, not
// even one already queued. Errors found before execution
// (parse and validation errors, or any other error from creating the
// operation context) are sent as one error message carrying an array of
// GraphQL errors; in graphql-transport-ws that message ends the operation,
// in the legacy protocol a complete follows it. An operation over the
// per-connection limit ([Config.MaxOperations]) is refused the same way,
// with an error whose extensions.code is [CodeQuotaExceeded]; the
// connection stays open.
//
// # Liveness
//
// The server sends a WebSocket ping control frame every
// [Config.PingInterval]; browsers and WebSocket libraries answer those
// without application code. Once acknowledged, a graphql-transport-ws
// connection also receives a {"type":"ping"} message (so that browser
// clients can see the server is alive) and a legacy connection a
// {"type":"ka"} keep-alive message at the same interval. Any frame from the
// client (message, ping or pong) counts as a sign of life; a connection
// silent for [Config.PongWait] is closed with [CloseGoingAway].
//
// # Flow control
//
// Protocol messages (acknowledgements, pongs, errors, completions) pass
// through a bounded per-connection queue. Results are not queued: the
// writer pulls a fast-path operation's results only when it is about to
// write them (up to 64 at once, in one write to the socket when the
// subscriber is behind by several), and an executor operation writes its
// own; whoever writes first writes the queued messages, so that messages
// leave in order. Data frames are framed by the transport and written
// whole, in buffers taken from a pool only while writing, so they never
// interleave with the control frames gorilla/websocket writes. Results wait
// for the client: a slow client holds back only its own operations, whose
// sources (the live feed is pulled by sequence) fall behind and later catch
// up, losing nothing. Each write has a deadline of [Config.WriteTimeout]; a
// client that stops reading entirely is disconnected when it passes.
// Protocol messages never wait: one that finds the queue full closes the
// connection with [CloseTryAgainLater].
//
// # Shutdown
//
// [Transport.Shutdown] closes every connection with [CloseGoingAway] and
// waits for their goroutines to finish. Connections outlive the requests
// that opened them ([Transport.Do] returns once a connection is
// established), so Shutdown is what ends them when the server stops. net/http's Server.Shutdown does not
// track hijacked connections, so callers must call Transport.Shutdown
// themselves (for example from Server.RegisterOnShutdown).
//
// # Goroutines
//
// A connection is served by at most two goroutines, however many
// fast-path operations it runs: a reader, which [Transport.Do] starts
// after the upgrade before it returns (so that the HTTP handler's
// goroutine, with the stack it grew through the middleware and the
// upgrade, and net/http's buffers for the request go away), and a writer,
// which runs only while there is something to write (queued messages,
// results of operations whose sources woke it, a ping due) and exits when
// there is not. An idle connection therefore holds one goroutine with a
// shallow stack, a small read buffer of gorilla/websocket's and no write
// buffer. Each operation left to the executor adds a goroutine while it
// runs. The connection does not end with the upgrade request's context
// (net/http cancels it when Do returns): it ends when either side closes
// it, or at Transport.Shutdown, which waits for all of its goroutines.
// Executor operations stop when their context is cancelled, so resolvers
// must honour context cancellation (as gqlgen's generated subscription
// code does) for a connection to finish.
//
// # Close codes
//
//	Code  Reason                                             When
//	1000  (echo) / Normal Closure                            client closed; legacy connection_terminate
//	1001  Going Away / keep-alive timeout                    server shutdown; client silent for PongWait
//	1009  Message too big                                    a message exceeded ReadLimit
//	1013  client too slow; resubscribe with afterSequence    a protocol message found the queue full
//	4400  <what was wrong>                                   unparseable, unknown or invalid message
//	4401  Unauthorized                                       subscribe before connection_ack
//	4403  Forbidden                                          authentication failed or its expiry passed
//	4408  Connection initialisation timeout                  no connection_init within InitTimeout
//	4409  Subscriber for <id> already exists                 subscribe with an id that is still active
//	4429  Too many initialisation requests                   a second connection_init
//	4429  too many connections                               OnConnect refused the connection
//	4500  Internal server error                              a hook panicked
//
// The constants below document what a client should do for each.
package wsgraphql
