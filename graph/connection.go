package graph

import (
	"github.com/google/uuid"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/graph/model"
)

// connectionOf turns a page of records keyed by UUID into a connection's
// edges and page info; edge builds one edge from a cursor and a node.
func connectionOf[T, E any](page app.Page[T], id func(*T) uuid.UUID, edge func(cursor string, node *T) E) ([]E, *model.PageInfo) {
	edges := make([]E, len(page.Items))
	info := &model.PageInfo{HasNextPage: page.HasNextPage}
	for i := range page.Items {
		cursor := app.IDCursor(id(&page.Items[i]))
		edges[i] = edge(cursor, &page.Items[i])
		if i == len(page.Items)-1 {
			info.EndCursor = &cursor
		}
	}
	return edges, info
}
