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
	c.Query.WebhookSubscriptions = func(child int, _ string, first *int, _ *string) int {
		return 1 + idPageSize(first)*child
	}
	c.Query.WebhookDeliveries = func(child int, _ string, _ *model.WebhookDeliveryFilter, first *int, _ *string) int {
		return 1 + idPageSize(first)*child
	}
	c.Query.DataExports = func(child int, _ string, _ *model.DataExportFilter, first *int, _ *string) int {
		return 1 + idPageSize(first)*child
	}
	// A delivery's attempts are bounded by the retry schedule (at most 21
	// per budget); count a typical handful.
	c.WebhookDelivery.Attempts = func(child int) int { return 1 + 5*child }
	return c
}

func idPageSize(first *int) int {
	if first != nil && *first > 0 && *first <= app.MaxWebhookPageSize {
		return *first
	}
	return app.DefaultPageSize
}
