// Package client is a Go client of Aether Audit's public GraphQL API, for
// producers and readers of audit evidence. It depends on nothing of the
// server's: it speaks the documented API (docs/api.md) over HTTP, and the
// graphql-transport-ws protocol (docs/live.md) over WebSocket for Subscribe.
//
// A Client records events ([Client.Record], [Client.RecordBatch]), reads
// them ([Client.Get], [Client.Search], [Client.Subscribe]), verifies a
// project's hash chain ([Client.VerifyChain]), and runs the webhook and data
// export commands. Inputs and results are typed; errors the server answers
// are [*Error] values that carry the documented code (BAD_USER_INPUT,
// NOT_FOUND, RATE_LIMITED, ...).
//
// # Retries
//
// Recording is idempotent by event id: Record and RecordBatch give every
// event without an id a UUIDv7 before the first attempt, so that a retry
// after a timeout, a dropped connection or a 5xx answer returns the events
// the first attempt stored instead of recording them twice. They retry, with
// exponential back-off and jitter, on network errors, on HTTP 5xx and
// INTERNAL answers, and on RATE_LIMITED and UNAVAILABLE (an append that
// waited past the server's bound for its project's head), waiting at least
// the retryAfterSeconds the server asked for. Queries retry the same way. Other
// commands retry only on RATE_LIMITED (the server did nothing), since they
// are not idempotent unless given an idempotency key. [Options] bounds the
// attempts and the delays.
//
// # Authentication
//
// Every request carries the bearer token of the client's [TokenSource]: a
// static token ([StaticToken]) or a source that refreshes short-lived
// tokens ([NewCachingTokenSource]). The token is asked for before each
// request and each WebSocket connection, and never appears in errors.
//
// # Live events
//
// [Client.Subscribe] yields a project's events as they are recorded. It
// resumes after the last event it yielded whenever the connection ends for a
// reason a reconnect can cure (server restart or shutdown, network failure,
// an expired token, a slow consumer), so the caller sees each event once and
// in sequence order, with no gap. It stops with an [*Error] for the close
// codes that signal a condition a reconnect would not cure (docs/live.md).
package client
