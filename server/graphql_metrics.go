package server

import (
	"context"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/aetheriot/aether-audit/graph/fastpath"
	"github.com/aetheriot/aether-audit/metrics"
)

// graphQLMetrics records every operation the generic executor runs, on any
// transport: queries and mutations with their duration and outcome,
// subscriptions when they start. The auditEvents fast path runs inside the
// executor and is counted here; the ingest and subscription fast paths,
// which bypass it, report through their hooks (see instrumentFastPaths).
type graphQLMetrics struct{ m *metrics.Metrics }

var _ interface {
	graphql.HandlerExtension
	graphql.OperationInterceptor
} = graphQLMetrics{}

// ExtensionName implements graphql.HandlerExtension.
func (graphQLMetrics) ExtensionName() string { return "Metrics" }

// Validate implements graphql.HandlerExtension.
func (graphQLMetrics) Validate(graphql.ExecutableSchema) error { return nil }

// InterceptOperation implements graphql.OperationInterceptor.
func (g graphQLMetrics) InterceptOperation(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
	oc := graphql.GetOperationContext(ctx)
	start := oc.Stats.OperationStart
	if start.IsZero() {
		start = time.Now()
	}
	kind, name := "query", ""
	if oc.Operation != nil {
		kind, name = string(oc.Operation.Operation), oc.Operation.Name
	}
	handler := next(ctx)
	if kind == string(ast.Subscription) {
		g.m.GraphQLOperation(kind, name, false, 0)
		return handler
	}
	done := false
	return func(ctx context.Context) *graphql.Response {
		resp := handler(ctx)
		if !done {
			done = true
			g.m.GraphQLOperation(kind, name, resp == nil || len(resp.Errors) > 0, time.Since(start))
		}
		return resp
	}
}

// instrumentFastPaths makes the fast paths that bypass the executor (ingest
// and subscription) report the operations they serve.
func instrumentFastPaths(m *metrics.Metrics, cfg *fastpath.Config) {
	cfg.OnServed = func(_ context.Context, name string, failed bool, took time.Duration) {
		m.GraphQLOperation(string(ast.Mutation), name, failed, took)
	}
	cfg.OnOpened = func(_ context.Context, name string) {
		m.GraphQLOperation(string(ast.Subscription), name, false, 0)
	}
}
