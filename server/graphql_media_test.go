package server_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"
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
