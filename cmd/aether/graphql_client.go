package main

import (
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

// graphQLClient sends GraphQL operations to an Aether Audit server with a
// bearer token.
type graphQLClient struct {
	endpoint string
	token    string
	http     *http.Client
}

// graphQLError is one entry of a response's errors.
type graphQLError struct {
	Message    string         `json:"message"`
	Path       []any          `json:"path"`
	Extensions map[string]any `json:"extensions"`
}

// graphQLErrors is a response's errors, as one error.
type graphQLErrors []graphQLError

// Error shows each error as "CODE: message (field f)".
func (es graphQLErrors) Error() string {
	parts := make([]string, len(es))
	for i, e := range es {
		s := e.Message
		if code, _ := e.Extensions["code"].(string); code != "" {
			s = code + ": " + s
		}
		if field, _ := e.Extensions["field"].(string); field != "" {
			s += " (field " + field + ")"
		}
		parts[i] = s
	}
	return strings.Join(parts, "; ")
}

// Code is the extensions.code of the first error.
func (es graphQLErrors) Code() string {
	if len(es) == 0 {
		return ""
	}
	code, _ := es[0].Extensions["code"].(string)
	return code
}

// maxGraphQLResponse bounds the response body read.
const maxGraphQLResponse = 8 << 20

// do sends one operation and decodes its data into out. Errors of the
// response come back as graphQLErrors; the token is never part of an error.
func (c *graphQLClient) do(ctx context.Context, query string, vars map[string]any, out any) error {
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/graphql-response+json, application/json")
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("GraphQL request to %s: %w", c.endpoint, unwrapURLError(err))
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxGraphQLResponse))
	if err != nil {
		return fmt.Errorf("reading GraphQL response: %w", err)
	}
	var envelope struct {
		Data   json.RawMessage `json:"data"`
		Errors graphQLErrors   `json:"errors"`
	}
	if err := json.Unmarshal(raw, &envelope); err != nil {
		return fmt.Errorf("GraphQL request to %s: HTTP %d: %s", c.endpoint, resp.StatusCode, snippet(raw))
	}
	if len(envelope.Errors) > 0 {
		return envelope.Errors
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GraphQL request to %s: HTTP %d: %s", c.endpoint, resp.StatusCode, snippet(raw))
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(envelope.Data, out); err != nil {
		return fmt.Errorf("decoding GraphQL data: %w", err)
	}
	return nil
}

// unwrapURLError drops the URL that net/http puts in its errors: a download
// URL is a capability and must not end up in logs.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// snippet is the start of a body, for an error message.
func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	if s == "" {
		s = "(empty body)"
	}
	return s
}
