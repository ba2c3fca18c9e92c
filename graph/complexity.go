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
	c.Query.AuditCheckpoints = func(child int, _ string, first *int, _ *string) int {
		return 1 + idPageSize(first)*child
	}
	// A tenant has at most app.MaxAuditStreamsPerTenant streams, each
	// with up to app.MaxAuditStreamProjects projects (allProjects: more;
	// count those).
	c.Query.AuditStreams = func(child int, first *int, _ *string) int {
		return 1 + min(idPageSize(first), app.MaxAuditStreamsPerTenant)*child
	}
	c.AuditStream.Projects = func(child int) int { return 1 + 10*child }
	// Verifying a chain re-reads and re-hashes its events: it costs one per
	// VerifyEventsPerComplexity events of its range (the most a call may
	// verify when the range is open), so that the complexity limit bounds
	// the rows it touches.
	// A call recomputes at most app.MaxVerifyRange events whatever its
	// range (a longer one resumes), which bounds an open range or a resume
	// token.
	c.Query.VerifyAuditChain = verifyComplexity
	// A verification stream's steps are each bounded like a call, and a
	// tenant runs few at once (app.VerifyLimits): it costs what a call of
	// its range does.
	c.Subscription.AuditChainVerification = verifyComplexity
	// A delivery's attempts are bounded by the retry schedule (at most 21
	// per budget); count a typical handful.
	c.WebhookDelivery.Attempts = func(child int) int { return 1 + 5*child }
	return c
}

// VerifyEventsPerComplexity is how many events of a verifyAuditChain range
// cost one unit of complexity: a whole project (up to app.MaxVerifyRange
// events) costs 20,000 of the default limit of 25,000.
const VerifyEventsPerComplexity = 50

// verifyComplexity is the complexity of verifying a chain's range.
func verifyComplexity(child int, _ string, from, to *uint64, _ *string) int {
	events := uint64(app.MaxVerifyRange)
	if from != nil && to != nil && *to >= *from && *to-*from < app.MaxVerifyRange {
		events = *to - *from + 1
	}
	return 1 + child + int((events+VerifyEventsPerComplexity-1)/VerifyEventsPerComplexity)
}

func idPageSize(first *int) int {
	if first != nil && *first > 0 && *first <= app.MaxWebhookPageSize {
		return *first
	}
	return app.DefaultPageSize
}
