package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// maxGraphQLResponse bounds a GraphQL response body, and one event of a
// stream.
const maxGraphQLResponse = 8 << 20

// graphQLClient sends GraphQL operations to a running server with a
// bearer token.
type graphQLClient struct {
	endpoint string
	token    func() (string, error)
	http     *http.Client
}

// graphQLResponse is the envelope of a GraphQL response.
type graphQLResponse struct {
	Data   json.RawMessage `json:"data"`
	Errors []struct {
		Message    string         `json:"message"`
		Extensions map[string]any `json:"extensions"`
	} `json:"errors"`
}

// err is the response's first error as an *Error with the API's code, or
// nil.
func (r *graphQLResponse) err() error {
	if len(r.Errors) == 0 {
		return nil
	}
	e := r.Errors[0]
	out := &Error{Code: codeInternal, Message: e.Message}
	if code, ok := e.Extensions["code"].(string); ok && code != "" {
		out.Code = code
	}
	out.Field, _ = e.Extensions["field"].(string)
	if s, ok := e.Extensions["retryAfterSeconds"].(float64); ok {
		out.RetryAfterSeconds = int64(s)
	}
	return out
}

// request builds the POST of one operation.
func (c *graphQLClient) request(ctx context.Context, query string, vars map[string]any, accept string) (*http.Request, error) {
	token, err := c.token()
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", accept)
	req.Header.Set("Authorization", "Bearer "+token)
	return req, nil
}

// do sends one query or mutation and decodes its data into out. The
// response's errors come back as *Error; the token is never part of an
// error.
func (c *graphQLClient) do(ctx context.Context, query string, vars map[string]any, out any) error {
	req, err := c.request(ctx, query, vars, "application/graphql-response+json, application/json")
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("GraphQL request to %s: %w", c.endpoint, unwrapURLError(err))
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxGraphQLResponse))
	if err != nil {
		return fmt.Errorf("reading GraphQL response: %w", err)
	}
	var r graphQLResponse
	if err := json.Unmarshal(raw, &r); err != nil {
		return fmt.Errorf("GraphQL request to %s: HTTP %d: not a GraphQL response", c.endpoint, resp.StatusCode)
	}
	if err := r.err(); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GraphQL request to %s: HTTP %d", c.endpoint, resp.StatusCode)
	}
	return json.Unmarshal(r.Data, out)
}

// subscribe starts a subscription over GraphQL over Server-Sent Events
// (the graphql-sse protocol's distinct connections mode): it returns once
// the server accepted it, or with the error it answered.
func (c *graphQLClient) subscribe(ctx context.Context, query string, vars map[string]any) (*sseStream, error) {
	req, err := c.request(ctx, query, vars, "text/event-stream")
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GraphQL subscription to %s: %w", c.endpoint, unwrapURLError(err))
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		defer resp.Body.Close()
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxGraphQLResponse))
		var r graphQLResponse
		if json.Unmarshal(raw, &r) == nil && r.err() != nil {
			return nil, r.err()
		}
		return nil, fmt.Errorf("GraphQL subscription to %s: HTTP %d", c.endpoint, resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), maxGraphQLResponse)
	return &sseStream{body: resp.Body, scanner: sc}, nil
}

// sseStream reads the events of a graphql-sse response.
type sseStream struct {
	body    io.ReadCloser
	scanner *bufio.Scanner
}

// errStreamCompleted is returned by next after the server completed the
// stream.
var errStreamCompleted = errors.New("subscription completed")

// next returns the data of the next "next" event, or the error of an
// "error" event or of the stream.
func (s *sseStream) next() (json.RawMessage, error) {
	var event string
	var data []byte
	for s.scanner.Scan() {
		line := s.scanner.Text()
		switch {
		case line == "":
			switch event {
			case "next":
				var r graphQLResponse
				if err := json.Unmarshal(data, &r); err != nil {
					return nil, fmt.Errorf("decoding a subscription event: %w", err)
				}
				if err := r.err(); err != nil {
					return nil, err
				}
				return r.Data, nil
			case "complete":
				return nil, errStreamCompleted
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

// close ends the stream.
func (s *sseStream) close() { _ = s.body.Close() }

// unwrapURLError drops the URL net/http puts in its errors.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
