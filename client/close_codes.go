package client

// WebSocket close codes of docs/live.md ("Close codes").
const (
	CloseNormalClosure                   = 1000
	CloseGoingAway                       = 1001
	CloseAbnormalClosure                 = 1006
	CloseMessageTooBig                   = 1009
	CloseTryAgainLater                   = 1013
	CloseBadRequest                      = 4400
	CloseUnauthorized                    = 4401
	CloseForbidden                       = 4403
	CloseConnectionInitialisationTimeout = 4408
	CloseSubscriberAlreadyExists         = 4409
	CloseTooManyRequests                 = 4429
	CloseInternalServerError             = 4500
)

// reasonTooManyConnections is the reason of the 4429 that refuses a
// connection over the identity's limit (the other 4429 is a second
// connection_init).
const reasonTooManyConnections = "too many connections"

// resumable reports whether a subscription that ended with the close code
// (and reason) should reconnect and resume, as docs/live.md says:
//
//   - 1000 (the server closed without being asked), 1001 (shutdown, or
//     silence past the keep-alive), 1006 (no close frame: a crash or a
//     network failure), 1013 (the consumer was too slow), 4403 (the token
//     expired: a fresh one is asked for), 4408 (connection_init came too
//     late), 4429 "too many connections" (after a back-off: a connection of
//     the identity may close) and 4500 (after a back-off): reconnect;
//   - 1009 (an operation larger than the server's read limit), 4400,
//     4401, 4409 and the other 4429 (client bugs a retry would repeat):
//     give up.
func resumable(code int, reason string) bool {
	switch code {
	case CloseMessageTooBig, CloseBadRequest, CloseUnauthorized, CloseSubscriberAlreadyExists:
		return false
	case CloseTooManyRequests:
		return reason == reasonTooManyConnections
	}
	return true
}
