package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/server"
)

// TestGraphQLOperationShape: an operation with more root fields (aliases
// included, fragments inlined) than the limit, or with verifyAuditChain
// twice, is refused as a request error before it runs; at the limit it
// runs; verifyAuditChain costs complexity by the events of its range.
func TestGraphQLOperationShape(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *server.Config) { c.MaxRootFields = server.DefaultMaxRootFields })
	tok := b.token(t, tokenOpts{})
	b.recordN(t, tok, 3, "device.shaped")

	aliases := func(n int, field string) string {
		var sb strings.Builder
		sb.WriteString("{")
		for i := range n {
			fmt.Fprintf(&sb, " a%d: %s", i, field)
		}
		sb.WriteString(" }")
		return sb.String()
	}
	verify := `verifyAuditChain(projectId: "` + projectA + `", fromSequence: "1", toSequence: "3") { valid }`
	refused := func(query, msg string) {
		t.Helper()
		res := b.graphql(t, tok, query, nil, "Accept", "application/graphql-response+json")
		require.Equal(t, http.StatusBadRequest, res.Status, "%.300s", res.Raw)
		require.Equal(t, "BAD_USER_INPUT", res.code(t))
		require.Contains(t, res.Errors[0].Message, msg)
		require.False(t, hasDataEntry(t, res.Raw), "not executed: %.300s", res.Raw)
	}

	res := b.graphql(t, tok, aliases(server.DefaultMaxRootFields, "__typename"), nil)
	require.Empty(t, res.Errors, "%.300s", res.Raw)
	refused(aliases(server.DefaultMaxRootFields+1, "__typename"), "more than 32 selections")
	refused(aliases(13000, verify), "more than 32 selections")
	// A large body refused for the start of its document is not read to
	// its end: the answer closes the connection.
	big, err := json.Marshal(map[string]any{"query": aliases(13000, verify)})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, b.url+"/graphql", bytes.NewReader(big))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp := do(t, req, tok)
	require.True(t, resp.Close, "refused before the rest of the body is read")
	require.Equal(t, "BAD_USER_INPUT", readGraphQL(t, resp).code(t))

	// Fragments count as inlined.
	var frag strings.Builder
	frag.WriteString("fragment F on Query {")
	for i := range 20 {
		fmt.Fprintf(&frag, " f%d: __typename", i)
	}
	frag.WriteString(" }")
	// Fragment spreads count as selections of their set; a fragment's own
	// set is bounded like any other.
	var spreads strings.Builder
	for range 33 {
		spreads.WriteString(" ...F")
	}
	refused("{"+spreads.String()+" } "+frag.String(), "more than 32 selections")
	refused("{ ...F } "+strings.Replace(frag.String(), "{", "{"+strings.Trim(aliases(13, "__typename"), "{}"), 1), "more than 32 selections")
	res = b.graphql(t, tok, "{ ...F ... on Query { ...F } } "+frag.String(), nil)
	require.Empty(t, res.Errors, "%.300s", res.Raw)

	// Nested sets are bounded too, aliased or not: repeating one field
	// unaliased is as costly to validate.
	refused(`{ auditEvents(projectId: "`+projectA+`") { edges { node {`+strings.Repeat(" id", 40)+` } } } }`, "more than 32 selections")
	refused(strings.Repeat("{ a: auditEvents(projectId: \"x\") ", 70), "nested deeper than 64")

	// Braces and names inside arguments and strings are values, not
	// selections.
	res = b.graphql(t, tok, `{ auditEvents(projectId: "`+projectA+`", filter: {subjectId: "device.{ a b c d e f g h i j k l m n o p q r s t u v w x y z aa bb cc dd ee ff gg }"}) { edges { cursor } } }`, nil)
	require.Empty(t, res.Errors, "%.300s", res.Raw)

	// verifyAuditChain once per operation.
	res = b.graphql(t, tok, "{ "+verify+" }", nil)
	require.Empty(t, res.Errors, "%s", res.Raw)
	refused("{ a: "+verify+" b: "+verify+" }", "verifyAuditChain may appear once per operation")

	// An open range costs the most a call may verify (20,001 of 25,000): it
	// does not fit beside a page that fits alone, and a short range does.
	page := `auditEvents(projectId: "` + projectA + `", first: 500) { edges { node { id tenantId projectId sequence action occurredAt recordedAt subject { type id displayName } resource { type id } outcome details chainHash } } }`
	res = b.graphql(t, tok, "{ "+page+" }", nil)
	require.Empty(t, res.Errors, "%.300s", res.Raw)
	res = b.graphql(t, tok, "{ "+verify+" "+page+" }", nil)
	require.Empty(t, res.Errors, "%.300s", res.Raw)
	res = b.graphql(t, tok, `{ verifyAuditChain(projectId: "`+projectA+`") { valid } `+page+" }", nil,
		"Accept", "application/graphql-response+json")
	require.Equal(t, http.StatusBadRequest, res.Status, "%.300s", res.Raw)
	require.Contains(t, res.Errors[0].Message, "complexity")
}
