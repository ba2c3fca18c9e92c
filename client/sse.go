package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// ErrStreamCompleted is returned by [SSEStream.Next] after the server
// completed the subscription.
var ErrStreamCompleted = errors.New("client: subscription completed")

// SSEStream is a subscription over GraphQL over Server-Sent Events (the
// graphql-sse protocol's distinct connections mode), read one event at a
// time with Next.
type SSEStream struct {
	body    io.ReadCloser
	scanner *bufio.Scanner
}

// SubscribeSSE starts a subscription document over Server-Sent Events
// (for a caller that wants the events' data as the server wrote it; see
// [Client.Subscribe] for typed audit events over WebSocket). It returns
// once the server accepted it, or with the error it answered as *Error.
// ctx bounds the whole stream; the HTTP client's Timeout does not (it
// bounds a whole exchange, body included, and would cut a stream that
// lives longer: the default client's is 60 s). It is not retried.
func (c *Client) SubscribeSSE(ctx context.Context, document string, vars map[string]any) (*SSEStream, error) {
	body, err := json.Marshal(request{Query: document, Variables: vars})
	if err != nil {
		return nil, fmt.Errorf("client: encoding the request: %w", err)
	}
	token, err := c.tokens.Token(ctx)
	if err != nil {
		return nil, fmt.Errorf("client: getting a token: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	streaming := *c.http // the same transport, without the exchange's timeout
	streaming.Timeout = 0
	resp, err := streaming.Do(req)
	if err != nil {
		return nil, &transientError{err: stripURL(err)}
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		defer resp.Body.Close()
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
		var envelope struct {
			Errors []wireError `json:"errors"`
		}
		if json.Unmarshal(raw, &envelope) == nil && len(envelope.Errors) > 0 {
			return nil, toError(envelope.Errors, resp.StatusCode)
		}
		return nil, &Error{Message: fmt.Sprintf("HTTP %d: %s", resp.StatusCode, snippet(raw)), HTTPStatus: resp.StatusCode}
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), maxResponse)
	return &SSEStream{body: resp.Body, scanner: sc}, nil
}

// Next returns the data of the next "next" event, the error of an event
// that carries errors (as *Error), ErrStreamCompleted after a "complete"
// event, or the error of the stream.
func (s *SSEStream) Next() (json.RawMessage, error) {
	var event string
	var data []byte
	for s.scanner.Scan() {
		line := s.scanner.Text()
		switch {
		case line == "":
			switch event {
			case "next":
				var envelope struct {
					Data   json.RawMessage `json:"data"`
					Errors []wireError     `json:"errors"`
				}
				if err := json.Unmarshal(data, &envelope); err != nil {
					return nil, fmt.Errorf("client: decoding a subscription event: %w", err)
				}
				if len(envelope.Errors) > 0 {
					return nil, toError(envelope.Errors, http.StatusOK)
				}
				return envelope.Data, nil
			case "complete":
				return nil, ErrStreamCompleted
			}
			event, data = "", nil
		case strings.HasPrefix(line, "event:"):
			event = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "data:"):
			data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " ")...)
		}
	}
	if err := s.scanner.Err(); err != nil {
		return nil, err
	}
	return nil, io.ErrUnexpectedEOF
}

// Close ends the stream.
func (s *SSEStream) Close() error { return s.body.Close() }
