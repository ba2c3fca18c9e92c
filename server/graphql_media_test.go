package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/server"
)

// hasDataEntry reports whether a GraphQL response body has a "data" entry
// (even null).
func hasDataEntry(t *testing.T, raw []byte) bool {
	t.Helper()
	var body map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(raw, &body), "body: %s", raw)
	_, ok := body["data"]
	return ok
}

// TestGraphQLAcceptNegotiation: the response media type follows the Accept
// header (GraphQL over HTTP), and a request accepting neither JSON type is
// refused with 406.
func TestGraphQLAcceptNegotiation(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	tok := b.token(t, tokenOpts{})
	for _, tc := range []struct {
		accept string
		want   string // Content-Type; "" means 406
	}{
		{"", "application/json"},
		{"*/*", "application/json"},
		{"application/*", "application/json"},
		{"application/json", "application/json"},
		{"application/graphql-response+json", "application/graphql-response+json"},
		{"application/graphql-response+json, application/json", "application/graphql-response+json"},
		{"application/json, application/graphql-response+json", "application/graphql-response+json"},
		{"application/graphql-response+json;q=0.5, application/json", "application/json"},
		{"application/json;q=0.5, application/graphql-response+json;charset=utf-8", "application/graphql-response+json"},
		{"text/html, application/xhtml+xml, */*;q=0.8", "application/json"},
		{"application/json;q=0, */*", "application/graphql-response+json"},
		{"text/html", ""},
		{"application/json;q=0", ""},
		{"application/json;charset=latin1", ""},
	} {
		res := b.graphql(t, tok, `{ __typename }`, nil, "Accept", tc.accept)
		if tc.want == "" {
			require.Equal(t, http.StatusNotAcceptable, res.Status, "Accept %q: %s", tc.accept, res.Raw)
			require.Equal(t, "BAD_USER_INPUT", res.code(t))
			continue
		}
		require.Equal(t, http.StatusOK, res.Status, "Accept %q: %s", tc.accept, res.Raw)
		require.Equal(t, tc.want, res.Header.Get("Content-Type"), "Accept %q", tc.accept)
		require.JSONEq(t, `{"data":{"__typename":"Query"}}`, string(res.Raw))
	}

	// A query is streamed only when text/event-stream, named, ranks above
	// every JSON type the request accepts (RFC 9110: q, then order).
	for _, tc := range []struct {
		accept string
		stream bool
	}{
		{"text/event-stream", true},
		{"text/event-stream, application/json", true},
		{"application/json;q=0.5, text/event-stream", true},
		{"text/event-stream, */*", true},
		{"application/json, text/event-stream", false},
		{"text/event-stream;q=0.5, application/json", false},
		{"*/*, text/event-stream", false},
		{"text/*", false},
		{"text/event-stream;q=0, application/json", false},
		{"application/graphql-response+json, text/event-stream;q=0.9", false},
	} {
		body, err := json.Marshal(map[string]any{"query": `{ __typename }`})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.url+"/graphql", bytes.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", tc.accept)
		resp := do(t, req, tok)
		if tc.stream {
			require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"), "Accept %q", tc.accept)
		} else {
			require.NotContains(t, resp.Header.Get("Content-Type"), "text/event-stream", "Accept %q", tc.accept)
		}
		cancel()
	}

	// The ingest fast path answers in the negotiated type too.
	res := b.graphql(t, tok, recordEventMutation, map[string]any{"in": eventInput(projectA, "device.firmware.updated")},
		"Accept", "application/graphql-response+json")
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Raw)
	require.Equal(t, "application/graphql-response+json", res.Header.Get("Content-Type"))
	require.Empty(t, res.Errors, "%s", res.Raw)
	require.Equal(t, 1, b.count(t, tok))
}

// TestGraphQLRequestErrorStatus: a request that cannot be executed answers
// without a data entry, with 400 in application/graphql-response+json and
// 200 in application/json; an execution error answers 200 with data in
// both; a missing query is a malformed request (400) in both.
func TestGraphQLRequestErrorStatus(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	tok := b.token(t, tokenOpts{})
	requestErrors := []struct {
		name  string
		query string
		vars  map[string]any
	}{
		{"Parse", `{`, nil},
		{"Validation", `{ auditEvents(projectId: "proj-1") { nope } }`, nil},
		{"VariableCoercion", `query($p: ID!) { auditEvents(projectId: $p) { edges { cursor } } }`, map[string]any{"p": map[string]any{"x": 1}}},
		{"UnusedVariable", `query Q($id: ID!) { __typename }`, map[string]any{"id": "x"}},
		{"UnknownOperation", `query A { __typename }`, nil},
	}
	for _, tc := range requestErrors {
		t.Run(tc.name, func(t *testing.T) {
			body := map[string]any{"query": tc.query, "variables": tc.vars}
			if tc.name == "UnknownOperation" {
				body["operationName"] = "B"
			}
			raw, err := json.Marshal(body)
			require.NoError(t, err)

			res := b.graphqlRaw(t, tok, raw, "Accept", "application/graphql-response+json")
			require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Raw)
			require.Equal(t, "application/graphql-response+json", res.Header.Get("Content-Type"))
			require.Equal(t, "BAD_USER_INPUT", res.code(t))
			require.False(t, hasDataEntry(t, res.Raw), "a request error has no data entry: %s", res.Raw)

			res = b.graphqlRaw(t, tok, raw, "Accept", "application/json")
			require.Equal(t, http.StatusOK, res.Status, "%s", res.Raw)
			require.Equal(t, "application/json", res.Header.Get("Content-Type"))
			require.Equal(t, "BAD_USER_INPUT", res.code(t))
			require.False(t, hasDataEntry(t, res.Raw), "a request error has no data entry: %s", res.Raw)
		})
	}

	t.Run("ExecutionError", func(t *testing.T) {
		for _, accept := range []string{"application/graphql-response+json", "application/json"} {
			res := b.graphql(t, tok, `{ auditEvents(projectId: "proj-1", first: 0) { edges { cursor } } }`, nil, "Accept", accept)
			require.Equal(t, http.StatusOK, res.Status, "%s: %s", accept, res.Raw)
			require.Equal(t, "BAD_USER_INPUT", res.code(t))
			require.True(t, hasDataEntry(t, res.Raw), "%s: an execution error keeps data: %s", accept, res.Raw)
		}
	})

	t.Run("MissingQuery", func(t *testing.T) {
		for _, accept := range []string{"application/graphql-response+json", "application/json"} {
			res := b.graphqlRaw(t, tok, []byte(`{"qeury":"{ __typename }"}`), "Accept", accept)
			require.Equal(t, http.StatusBadRequest, res.Status, "%s: %s", accept, res.Raw)
			require.Equal(t, "BAD_USER_INPUT", res.code(t))
			require.False(t, hasDataEntry(t, res.Raw), "%s", res.Raw)
		}
	})

	t.Run("GET", func(t *testing.T) {
		get := func(q url.Values, accept string) *gqlResult {
			req, err := http.NewRequest(http.MethodGet, b.url+"/graphql?"+q.Encode(), nil)
			require.NoError(t, err)
			req.Header.Set("Accept", accept)
			return readGraphQL(t, do(t, req, tok))
		}
		res := get(url.Values{"query": {`{ __typename }`}}, "application/graphql-response+json")
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Raw)
		require.Equal(t, "application/graphql-response+json", res.Header.Get("Content-Type"))
		require.JSONEq(t, `{"data":{"__typename":"Query"}}`, string(res.Raw))

		res = get(url.Values{"query": {`{ nope }`}}, "application/graphql-response+json")
		require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Raw)
		require.False(t, hasDataEntry(t, res.Raw), "%s", res.Raw)
		res = get(url.Values{"query": {`{ nope }`}}, "application/json")
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Raw)
		require.Equal(t, "BAD_USER_INPUT", res.code(t))

		for _, bad := range []url.Values{
			{"query": {`{ __typename }`}, "variables": {`[1]`}},
			{"query": {`{ __typename }`}, "extensions": {`"x"`}},
			{},
		} {
			res = get(bad, "application/json")
			require.Equal(t, http.StatusBadRequest, res.Status, "%v: %s", bad, res.Raw)
			require.Equal(t, "BAD_USER_INPUT", res.code(t))
		}

		res = get(url.Values{"query": {`{ __typename }`}}, "text/html")
		require.Equal(t, http.StatusNotAcceptable, res.Status, "%s", res.Raw)
	})
}

// graphQLClient is the request headers a popular GraphQL client sends by
// default, read from its published source (versions named), for a query or
// mutation and for a subscription over HTTP.
type graphQLClient struct {
	name string
	// accept and subscriptionAccept are the Accept headers ("" sends none).
	accept, subscriptionAccept string
	// streams reports whether the client asks for subscriptions as
	// text/event-stream (graphql-sse); the others use WebSockets.
	streams bool
}

// graphQLClients are the default headers of the clients integrators use.
var graphQLClients = []graphQLClient{
	{name: "urql 6.0 (@urql/core)",
		accept:             "application/graphql-response+json, application/graphql+json, application/json, text/event-stream, multipart/mixed",
		subscriptionAccept: "text/event-stream, multipart/mixed", streams: true},
	{name: "Apollo Client 4.3 (HttpLink)",
		accept:             "application/graphql-response+json,application/json;q=0.9",
		subscriptionAccept: "multipart/mixed;boundary=graphql;subscriptionSpec=1.0,application/graphql-response+json,application/json;q=0.9"},
	{name: "graphql-request 7.4",
		accept:             "application/graphql-response+json, application/json",
		subscriptionAccept: "application/graphql-response+json, application/json"},
	// Relay's network layer example sets only Content-Type; the browser's
	// fetch then sends its default Accept.
	{name: "Relay network layer example", accept: "*/*", subscriptionAccept: "*/*"},
	{name: "curl", accept: "*/*", subscriptionAccept: "*/*"},
	{name: "browser fetch", accept: "*/*", subscriptionAccept: "*/*"},
	{name: "no Accept header", accept: "", subscriptionAccept: ""},
}

// TestGraphQLClientDefaultHeaders replays the default headers of popular
// clients: queries and mutations are answered as one JSON response in the
// type the client ranks first (never as a stream, whatever else it
// accepts) and never count as live connections; a subscription is a
// graphql-sse stream when the client accepts text/event-stream, counted as
// a live connection, and otherwise a 406 that names the ways to subscribe.
func TestGraphQLClientDefaultHeaders(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *server.Config) { c.MaxWebSocketsPerIdentity = 1 })
	tok := b.token(t, tokenOpts{})
	subscription := `subscription { auditEventRecorded(projectId: "` + projectA + `", afterSequence: "0") { sequence } }`

	post := func(ctx context.Context, query string, vars map[string]any, accept string) *http.Response {
		body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
		require.NoError(t, err)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.url+"/graphql", bytes.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		return do(t, req, tok)
	}
	wantJSON := func(c graphQLClient) string {
		if strings.HasPrefix(c.accept, "application/graphql-response+json") {
			return "application/graphql-response+json"
		}
		return "application/json"
	}

	// The identity's one live connection is taken for the whole test: a
	// query or mutation that counted as one would get 429.
	held := b.getPath(t, tok, "/api/v1/audit/events/stream?follow=true&projectId="+projectA)
	require.Equal(t, http.StatusOK, held.StatusCode)

	recorded := 0
	for _, c := range graphQLClients {
		t.Run(c.name, func(t *testing.T) {
			res := readGraphQL(t, post(context.Background(), `{ auditEvents(projectId: "`+projectA+`", first: 1) { edges { cursor } } }`, nil, c.accept))
			require.Equal(t, http.StatusOK, res.Status, "query: %s", res.Raw)
			require.Equal(t, wantJSON(c), res.Header.Get("Content-Type"), "query")
			require.Empty(t, res.Errors, "query: %s", res.Raw)

			res = readGraphQL(t, post(context.Background(), recordEventMutation, map[string]any{"in": eventInput(projectA, "device.client.tried")}, c.accept))
			require.Equal(t, http.StatusOK, res.Status, "mutation: %s", res.Raw)
			require.Equal(t, wantJSON(c), res.Header.Get("Content-Type"), "mutation")
			require.Empty(t, res.Errors, "mutation: %s", res.Raw)
			recorded++
			require.Equal(t, recorded, b.count(t, tok), "the mutation was recorded once")

			res = readGraphQL(t, post(context.Background(), subscription, nil, c.subscriptionAccept))
			if !c.streams {
				require.Equal(t, http.StatusNotAcceptable, res.Status, "subscription: %s", res.Raw)
				require.Equal(t, "BAD_USER_INPUT", res.code(t))
				require.Contains(t, res.Errors[0].Message, "text/event-stream")
				return
			}
			// A stream counts: the held connection leaves no room.
			require.Equal(t, http.StatusTooManyRequests, res.Status, "subscription: %s", res.Raw)
			require.Equal(t, "QUOTA_EXCEEDED", res.code(t))
		})
	}

	// With the held connection closed, the stream is served.
	require.NoError(t, held.Body.Close())
	for _, c := range graphQLClients {
		if !c.streams {
			continue
		}
		require.Eventually(t, func() bool {
			body, err := json.Marshal(map[string]any{"query": subscription})
			require.NoError(t, err)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.url+"/graphql", bytes.NewReader(body))
			require.NoError(t, err)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", c.subscriptionAccept)
			req.Header.Set("Authorization", "Bearer "+tok)
			s := startLiveStream(t, req)
			if s.resp.StatusCode != http.StatusOK {
				return false
			}
			require.Equal(t, "text/event-stream", s.resp.Header.Get("Content-Type"), c.name)
			f, ok := s.next()
			require.True(t, ok, c.name)
			require.Equal(t, "next", f.event, c.name)
			require.JSONEq(t, `{"data":{"auditEventRecorded":{"sequence":"1"}}}`, f.data, c.name)
			return true
		}, 10*time.Second, 20*time.Millisecond, c.name)
	}
}
