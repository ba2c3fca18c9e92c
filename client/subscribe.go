package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/websocket"
)

// SubscribeOptions shape a subscription.
type SubscribeOptions struct {
	// AfterSequence is the last sequence the caller has processed: the
	// subscription first replays every committed matching event after it,
	// then continues live. 0 replays the project from its first event,
	// unless FromNow is set.
	AfterSequence uint64
	// FromNow starts after the project's newest event at the time of the
	// call instead.
	FromNow bool
	// Filter narrows the events, as in Search.
	Filter *Filter
	// MaxAuthFailures is how many connections in a row the server may
	// refuse for their token (4403 before connection_ack) before
	// Subscribe gives up (default 3); a token that expires during a
	// subscription is always renewed.
	MaxAuthFailures int
}

const subscribeDoc = `subscription($p: ID!, $after: Uint64, $f: AuditEventFilter) {
auditEventRecorded(projectId: $p, afterSequence: $after, filter: $f) { ` + eventFields + ` } }`

// Subscribe yields a project's events as they are recorded, in sequence
// order, over a graphql-transport-ws WebSocket. When the connection ends
// for a reason a reconnect can cure (see the close codes in docs/live.md:
// a server restart or shutdown, a network failure, a token that expired, a
// consumer too slow), it reconnects with back-off, asking a fresh token of
// the client's TokenSource, and resumes after the last event it yielded:
// the loop sees every event once, with no gap. It ends when ctx ends or
// the loop breaks (without an error), or after yielding an [*Error] for a
// failure a reconnect would not cure: the operation refused (NOT_FOUND,
// FORBIDDEN, BAD_USER_INPUT), or a close code that signals a client
// mistake (1009, 4400, 4401, 4409, 4429 for a second connection_init),
// with CloseCode set.
//
// The loop's body runs while the connection waits: a body slower than the
// server's keep-alive gets the connection closed, and Subscribe resumes.
func (c *Client) Subscribe(ctx context.Context, projectID string, opts SubscribeOptions) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		after := opts.AfterSequence
		if opts.FromNow {
			page, err := c.SearchPage(ctx, projectID, SearchOptions{PageSize: 1, Order: NewestFirst})
			if err != nil {
				yield(Event{}, err)
				return
			}
			if len(page.Events) > 0 {
				after = page.Events[0].Sequence
			}
		}
		maxAuth := opts.MaxAuthFailures
		if maxAuth <= 0 {
			maxAuth = 3
		}
		failures, authFailures := 0, 0
		for {
			s := &wsSession{client: c, project: projectID, filter: opts.Filter, after: after}
			stopped, err := s.run(ctx, func(ev Event) bool {
				after = ev.Sequence
				failures = 0
				return yield(ev, nil)
			})
			if stopped || ctx.Err() != nil {
				return
			}
			var ae *Error
			retryAfter := time.Duration(0)
			if errors.As(err, &ae) {
				switch {
				case ae.CloseCode == CloseForbidden && !s.acked:
					if authFailures++; authFailures >= maxAuth {
						yield(Event{}, err)
						return
					}
				case ae.CloseCode != 0:
					if !resumable(ae.CloseCode, ae.Message) {
						yield(Event{}, err)
						return
					}
				case ae.Code == CodeRateLimited:
					retryAfter = ae.RetryAfter
				case ae.Code != CodeInternal && ae.Code != "":
					yield(Event{}, err) // the operation was refused
					return
				}
			}
			if s.acked {
				authFailures = 0
			}
			failures++
			if sleep(ctx, c.retry.delay(failures, retryAfter)) != nil {
				return
			}
		}
	}
}

// wsSession is one WebSocket connection of a subscription.
type wsSession struct {
	client  *Client
	project string
	filter  *Filter
	after   uint64
	// acked is set once the server acknowledged connection_init.
	acked bool
}

// wsMessage is a graphql-transport-ws message.
type wsMessage struct {
	ID      string          `json:"id,omitempty"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// run connects, subscribes after s.after and hands each event to deliver
// until deliver returns false (stopped), ctx ends, or the connection or
// the operation ends (the error says how).
func (s *wsSession) run(ctx context.Context, deliver func(Event) bool) (stopped bool, err error) {
	token, err := s.client.tokens.Token(ctx)
	if err != nil {
		return false, fmt.Errorf("client: getting a token: %w", err)
	}
	u := *s.client.base
	u.Scheme = map[string]string{"http": "ws", "https": "wss"}[u.Scheme]
	u.Path = strings.TrimSuffix(u.Path, "/") + "/graphql"
	dialer := websocket.Dialer{Subprotocols: []string{"graphql-transport-ws"}, HandshakeTimeout: 30 * time.Second,
		Proxy: http.ProxyFromEnvironment}
	conn, resp, err := dialer.DialContext(ctx, u.String(), nil)
	if resp != nil && resp.Body != nil {
		_ = resp.Body.Close()
	}
	if err != nil {
		if resp != nil {
			return false, &Error{Message: "websocket handshake: " + resp.Status, HTTPStatus: resp.StatusCode}
		}
		return false, &transientError{err: stripURL(err)}
	}
	defer conn.Close()
	// Cancelling ctx closes the connection, which ends a blocked read.
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
			_ = conn.WriteControl(websocket.CloseMessage,
				websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
			_ = conn.Close()
		case <-done:
		}
	}()

	init, _ := json.Marshal(map[string]string{"Authorization": "Bearer " + token})
	if err := conn.WriteJSON(wsMessage{Type: "connection_init", Payload: init}); err != nil {
		return false, closeError(err)
	}
	vars := map[string]any{"p": s.project, "after": strconv.FormatUint(s.after, 10)}
	if s.filter != nil {
		vars["f"] = s.filter
	}
	for {
		var msg wsMessage
		if err := conn.ReadJSON(&msg); err != nil {
			return false, closeError(err)
		}
		switch msg.Type {
		case "connection_ack":
			s.acked = true
			payload, _ := json.Marshal(request{Query: subscribeDoc, Variables: vars})
			if err := conn.WriteJSON(wsMessage{ID: "1", Type: "subscribe", Payload: payload}); err != nil {
				return false, closeError(err)
			}
		case "ping":
			if err := conn.WriteJSON(wsMessage{Type: "pong"}); err != nil {
				return false, closeError(err)
			}
		case "next":
			var p struct {
				Data *struct {
					AuditEventRecorded Event `json:"auditEventRecorded"`
				} `json:"data"`
				Errors []wireError `json:"errors"`
			}
			if err := json.Unmarshal(msg.Payload, &p); err != nil {
				return false, fmt.Errorf("client: decoding an event: %w", err)
			}
			if len(p.Errors) > 0 {
				return false, toError(p.Errors, 0)
			}
			if p.Data == nil {
				continue
			}
			ev := p.Data.AuditEventRecorded
			if ev.Sequence <= s.after {
				continue // never twice, whatever the server resends
			}
			s.after = ev.Sequence
			if !deliver(ev) {
				return true, nil
			}
		case "error":
			var errs []wireError
			if err := json.Unmarshal(msg.Payload, &errs); err != nil || len(errs) == 0 {
				return false, &Error{Code: CodeInternal, Message: "the subscription failed"}
			}
			return false, toError(errs, 0)
		case "complete":
			return false, &transientError{err: errors.New("the server completed the subscription")}
		}
	}
}

// closeError turns a read or write error into an *Error with the close
// code (1006 when the connection ended without a close frame).
func closeError(err error) error {
	var ce *websocket.CloseError
	if errors.As(err, &ce) {
		return &Error{CloseCode: ce.Code, Message: ce.Text}
	}
	return &Error{CloseCode: CloseAbnormalClosure, Message: err.Error()}
}
