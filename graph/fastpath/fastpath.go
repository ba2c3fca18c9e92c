// Package fastpath serves the GraphQL operations that carry volume without
// gqlgen's generic machinery: the auditEvents page (a root field
// interceptor), the recordAuditEvent and recordAuditEvents ingest mutations
// (offered by the POST transport before the executor) and the
// auditEventRecorded subscription (offered by the WebSocket transport).
//
// Every path answers byte for byte what the generic executor answers, and
// steps aside to it whenever it could answer differently. Two tests hold it
// there: one fails when a field, argument or input field of the schema that
// a fast-pathed operation reaches is not handled here, and one sends
// randomly generated operations through the fast paths and through the
// executor and requires equal responses.
//
// The port is narrow: New takes the use cases it runs (UseCases, which
// *app.App implements), the executable schema and the server's limits, and
// the server wires the three entry points of Paths (AroundRootFields,
// TryServe, Open) into its transports. The package depends on package graph
// for what the resolvers and it share (input decoding, error extensions,
// selection depth); graph never imports it.
package fastpath

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/99designs/gqlgen/graphql"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
)

// UseCases are the use cases the fast paths run, with the signatures of
// *app.App, which implements them.
type UseCases interface {
	VisitAuditEvents(ctx context.Context, id app.Identity, in app.SearchAuditEventsInput, fn func(*domain.AuditEvent) error) (app.AuditEventPageInfo, error)
	RecordAuditEvent(ctx context.Context, id app.Identity, draft domain.AuditEventDraft, traceID string) (domain.AuditEvent, error)
	RecordAuditEvents(ctx context.Context, id app.Identity, in app.RecordAuditEventsInput) ([]domain.AuditEvent, error)
	SubscribeAuditEvents(ctx context.Context, id app.Identity, in app.SubscribeAuditEventsInput) (app.AuditEventStream, error)
}

var _ UseCases = (*app.App)(nil)

// Config is what the fast paths need from the server.
type Config struct {
	// App runs the use cases.
	App UseCases
	// Schema is the executable schema the generic executor runs (with the
	// server's complexity functions): documents are validated against it
	// and their complexity is computed by it.
	Schema graphql.ExecutableSchema
	// MaxDepth and MaxComplexity are the server's limits on an operation's
	// selection depth and complexity; the paths leave operations beyond
	// them to the executor, which refuses them.
	MaxDepth      int
	MaxComplexity int
	// MaxCachedDocumentBytes is the largest document the paths plan and
	// cache; larger ones are left to the executor. Default 16 KiB.
	MaxCachedDocumentBytes int
	// Logger, if set, logs the internal causes of use case errors the
	// ingest path answers, as the resolvers log theirs.
	Logger *slog.Logger

	// OnServed, if set, is called after each ingest mutation TryServe
	// served, with the operation's name ("" when anonymous), whether it
	// answered with an error, and how long it took from TryServe's start:
	// the generic server's operation middlewares never see these requests.
	OnServed func(ctx context.Context, operationName string, failed bool, took time.Duration)
	// OnOpened, if set, is called for each subscription Open opened, with
	// the operation's name ("" when anonymous): the generic server's
	// operation middlewares never see them.
	OnOpened func(ctx context.Context, operationName string)
}

// Paths are the fast paths of one GraphQL server. Its methods are safe for
// concurrent use.
type Paths struct {
	cfg        Config
	documents  documents
	records    *planCache[*recordPlan]
	subscribes *planCache[*subscribePlan]

	// Whether each path is on: the schema's inputs are those it reads.
	pagesOn, recordOn, subscribeOn bool

	// pages counts the auditEvents pages AroundRootFields served.
	pages atomic.Uint64
}

// New returns the fast paths of a server with cfg. A path whose operation
// takes arguments or input fields in cfg.Schema that it does not read is
// off: it leaves every operation to the executor.
func New(cfg Config) *Paths {
	p := &Paths{cfg: cfg, documents: documents{cfg.Schema, cfg.MaxDepth, cfg.MaxComplexity}}
	maxDoc := cfg.MaxCachedDocumentBytes
	if maxDoc <= 0 {
		maxDoc = defaultMaxCachedDocumentBytes
	}
	p.records = newPlanCache(p.makeRecordPlan, func() *recordPlan { return &recordPlan{} },
		func(r *recordPlan) bool { return r != invalidRecordPlan }, maxDoc)
	p.subscribes = newPlanCache(p.makeSubscribePlan, func() *subscribePlan { return &subscribePlan{} },
		func(r *subscribePlan) bool { return r != invalidSubscribePlan }, maxDoc)
	schema := cfg.Schema.Schema()
	p.pagesOn = readsSchema(schema, "Query.auditEvents", "AuditEventFilter", "AuditCorrelationFilter")
	p.subscribeOn = readsSchema(schema, "Subscription.auditEventRecorded", "AuditEventFilter", "AuditCorrelationFilter")
	p.recordOn = readsSchema(schema, "Mutation.recordAuditEvent", "Mutation.recordAuditEvents", "RecordAuditEventsInput",
		"RecordAuditEventInput", "AuditSubjectInput", "AuditResourceInput", "AuditGovernanceInput", "AuditCorrelationInput", "EvidenceDigestInput")
	return p
}
