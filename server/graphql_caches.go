package server

import (
	"context"

	"github.com/vektah/gqlparser/v2/ast"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/internal/doccache"
)

// DefaultMaxCachedDocumentBytes is the largest GraphQL document the server
// caches in any form (parsed, persisted, planned); larger ones are parsed
// each time they come.
const DefaultMaxCachedDocumentBytes = 16 << 10

// Byte bounds of the document caches of one process.
const (
	parsedDocumentCacheBytes   = 4 << 20
	persistedQueriesCacheBytes = 4 << 20
)

// queryCache is gqlgen's cache of parsed and validated documents (gqlgen
// adds only documents that validated), bounded in bytes and keyed by hash.
type queryCache struct {
	c *doccache.Cache[*ast.QueryDocument]
}

// Get implements graphql.Cache.
func (q queryCache) Get(_ context.Context, query string) (*ast.QueryDocument, bool) {
	if !q.c.Cacheable(len(query)) {
		return nil, false
	}
	return q.c.Get(doccache.KeyOf(query))
}

// Add implements graphql.Cache.
func (q queryCache) Add(_ context.Context, query string, doc *ast.QueryDocument) {
	q.c.Add(doccache.KeyOf(query), doc, len(query))
}

// persistedQueries is the automatic persisted queries' store, one
// namespace per tenant: a tenant can neither use nor learn another's
// queries by their hash.
type persistedQueries struct{ c *doccache.Cache[string] }

// Get implements graphql.Cache.
func (p persistedQueries) Get(ctx context.Context, hash string) (string, bool) {
	return p.c.Get(doccache.KeyOf(app.IdentityFromContext(ctx).TenantID, hash))
}

// Add implements graphql.Cache.
func (p persistedQueries) Add(ctx context.Context, hash, query string) {
	p.c.Add(doccache.KeyOf(app.IdentityFromContext(ctx).TenantID, hash), query, len(query))
}
