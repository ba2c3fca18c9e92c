package server_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/app"
)

// TestGraphQLCachesHoldNoLargeDocuments: 24 distinct 4 MiB documents, from
// a token with no permissions, leave no more than 16 MiB behind: documents
// over the cached size are parsed each time and kept by no cache. (Not
// parallel: it reads the process's heap.)
func TestGraphQLCachesHoldNoLargeDocuments(t *testing.T) {
	b := setup(t, nil)
	tok := b.token(t, tokenOpts{perms: []app.Permission{}})
	heap := func() uint64 {
		runtime.GC()
		runtime.GC() // and what sync.Pools keep for one cycle
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	b.graphql(t, tok, `{ __typename }`, nil) // warm up
	before := heap()
	for i := range 24 {
		query := fmt.Sprintf(`{ auditEvents(projectId: "%s", filter: {subjectId: "%d%s"}) { edges { cursor } } }`,
			projectA, i, strings.Repeat("x", 4<<20))
		body, err := json.Marshal(map[string]any{"query": query})
		require.NoError(t, err)
		// A request of its own, closed at once: the test's helpers keep
		// requests (and their bodies) until the test ends.
		req, err := http.NewRequest(http.MethodPost, b.url+"/graphql", bytes.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		raw, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.Contains(t, string(raw), "FORBIDDEN")
	}
	after := heap()
	require.Less(t, int64(after)-int64(before), int64(16<<20), "heap grew from %d to %d bytes", before, after)
}

// TestPersistedQueriesPerTenant: a query persisted by one tenant's request
// is not found by its hash in another tenant's.
func TestPersistedQueriesPerTenant(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	query := `{ auditEvents(projectId: "` + projectA + `", first: 1) { edges { cursor } } }`
	sum := sha256.Sum256([]byte(query))
	ext := map[string]any{"persistedQuery": map[string]any{"version": 1, "sha256Hash": hex.EncodeToString(sum[:])}}
	send := func(tok string, withQuery bool) *gqlResult {
		body := map[string]any{"extensions": ext}
		if withQuery {
			body["query"] = query
		}
		raw, err := json.Marshal(body)
		require.NoError(t, err)
		return b.graphqlRaw(t, tok, raw)
	}
	tokA := b.token(t, tokenOpts{})
	tokB := b.token(t, tokenOpts{tenant: "tenant-b"})

	require.Empty(t, send(tokA, true).Errors, "registered by tenant A")
	require.Empty(t, send(tokA, false).Errors, "found by its hash for tenant A")
	res := send(tokB, false)
	require.Len(t, res.Errors, 1, "%s", res.Raw)
	require.Contains(t, res.Errors[0].Message, "PersistedQueryNotFound")
}
