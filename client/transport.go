package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// callKind says which failures a call may be retried after.
type callKind int

const (
	// query is a read: retried after any transient failure.
	query callKind = iota
	// idempotentCommand is a mutation a repeat cannot apply twice
	// (events with ids, a command with an idempotency key): retried like a
	// query.
	idempotentCommand
	// command is any other mutation: retried only after RATE_LIMITED,
	// which guarantees that nothing was done.
	command
)

// maxResponse bounds a response body read.
const maxResponse = 64 << 20

// request is the body of a GraphQL POST.
type request struct {
	Query     string `json:"query"`
	Variables any    `json:"variables,omitempty"`
}

// do sends one operation (retrying as kind allows) and decodes its data
// into out.
func (c *Client) do(ctx context.Context, kind callKind, query string, vars any, out any) error {
	body, err := json.Marshal(request{Query: query, Variables: vars})
	if err != nil {
		return fmt.Errorf("client: encoding the request: %w", err)
	}
	for attempt := 1; ; attempt++ {
		err := c.once(ctx, body, out)
		if err == nil {
			return nil
		}
		retryAfter, ok := retryable(err, kind)
		if !ok || attempt >= c.retry.attempts || ctx.Err() != nil {
			return err
		}
		if werr := sleep(ctx, c.retry.delay(attempt, retryAfter)); werr != nil {
			return err
		}
	}
}

// transientError is a failure with no answer from the server, or an HTTP
// error without a GraphQL body (a proxy's 502, a restart's 503).
type transientError struct {
	err    error
	status int
}

func (e *transientError) Error() string {
	if e.status != 0 {
		return fmt.Sprintf("client: HTTP %d: %v", e.status, e.err)
	}
	return "client: " + e.err.Error()
}

func (e *transientError) Unwrap() error { return e.err }

// retryable reports whether err may be retried for a call of kind, and the
// least wait the server asked for.
func retryable(err error, kind callKind) (time.Duration, bool) {
	var e *Error
	if errors.As(err, &e) {
		switch {
		case e.Code == CodeRateLimited:
			return e.RetryAfter, true
		case e.Code == CodeUnavailable:
			// An append the server gave up on: nothing recorded, or, rarely,
			// recorded late; a repeat of the same ids is safe either way.
			return e.RetryAfter, kind != command
		case e.Code == CodeInternal || (e.Code == "" && e.HTTPStatus >= 500):
			return 0, kind != command
		}
		return 0, false
	}
	var t *transientError
	if errors.As(err, &t) {
		return 0, kind != command
	}
	return 0, false
}

// once sends body once.
func (c *Client) once(ctx context.Context, body []byte, out any) error {
	token, err := c.tokens.Token(ctx)
	if err != nil {
		return fmt.Errorf("client: getting a token: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &transientError{err: stripURL(err)}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &transientError{err: fmt.Errorf("reading the response: %w", err), status: resp.StatusCode}
	}
	var envelope struct {
		Data   json.RawMessage `json:"data"`
		Errors []wireError     `json:"errors"`
	}
	if err := json.Unmarshal(raw, &envelope); err != nil {
		if resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests {
			return &transientError{err: errors.New(snippet(raw)), status: resp.StatusCode}
		}
		return &Error{Message: fmt.Sprintf("HTTP %d: %s", resp.StatusCode, snippet(raw)), HTTPStatus: resp.StatusCode}
	}
	if len(envelope.Errors) > 0 {
		return toError(envelope.Errors, resp.StatusCode)
	}
	if resp.StatusCode >= 500 {
		return &transientError{err: errors.New(snippet(raw)), status: resp.StatusCode}
	}
	if resp.StatusCode != http.StatusOK {
		return &Error{Message: fmt.Sprintf("HTTP %d: %s", resp.StatusCode, snippet(raw)), HTTPStatus: resp.StatusCode}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(envelope.Data, out); err != nil {
		return fmt.Errorf("client: decoding the response: %w", err)
	}
	return nil
}

// stripURL drops the URL net/http puts into its errors.
func stripURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// snippet is the start of a body, for an error message.
func snippet(b []byte) string {
	s := string(bytes.TrimSpace(b))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	if s == "" {
		s = "(empty body)"
	}
	return s
}
