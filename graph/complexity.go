package graph

import (
	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/graph/generated"
	"github.com/aetheriot/aether-audit/graph/model"
)

// Complexity returns the complexity functions of fields whose cost grows
// with their arguments: a connection costs its selection times the page
// size, so the complexity limit bounds the rows a query can ask for.
func Complexity() generated.ComplexityRoot {
	var c generated.ComplexityRoot
	c.Query.AuditEvents = func(child int, _ string, _ *model.AuditEventFilter, first *int, _ *string, _ *model.AuditOrder) int {
		n := app.DefaultPageSize
		if first != nil && *first > 0 && *first <= app.MaxPageSize {
			n = *first
		}
		return 1 + n*child
	}
	return c
}
