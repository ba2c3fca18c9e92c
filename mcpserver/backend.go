package mcpserver

import (
	"context"
	"time"
)

// Backend runs the tools, resource reads and subscriptions of one request
// as its verified caller. Errors a caller can act on are *Error, with the
// API's codes; any other error is reported as INTERNAL.
//
// A Backend is built for each request (Config.Backend) and never kept
// beyond it, except by the subscription it opens.
type Backend interface {
	// TenantID is the caller's tenant, the {tenant} of resource URIs.
	TenantID() string
	// SearchAuditEvents is GraphQL's auditEvents. First is set.
	SearchAuditEvents(ctx context.Context, in SearchAuditEventsInput) (EventPage, error)
	// GetAuditEvent is GraphQL's auditEvent: NOT_FOUND when the project
	// has no such event.
	GetAuditEvent(ctx context.Context, projectID, eventID string) (Event, error)
	// VerifyAuditChain verifies in's range to its end, whatever its
	// length, as GraphQL's auditChainVerification subscription does (and
	// bounded by its limits): progress, when not nil, receives each
	// progress item; the result is the verdict.
	VerifyAuditChain(ctx context.Context, in VerifyAuditChainInput, progress func(VerifyProgress)) (ChainVerification, error)
	// WebhookDeliveries is GraphQL's webhookDeliveries. First is set.
	WebhookDeliveries(ctx context.Context, in ListWebhookDeliveriesInput) (WebhookDeliveryPage, error)
	// WebhookDelivery is GraphQL's webhookDelivery: NOT_FOUND when missing
	// or not visible.
	WebhookDelivery(ctx context.Context, deliveryID string) (WebhookDelivery, error)
	// DataExports is GraphQL's dataExports. First is set.
	DataExports(ctx context.Context, in ListDataExportsInput) (DataExportPage, error)
	// RedriveWebhookDelivery is GraphQL's redriveWebhookDelivery, audited
	// as the caller.
	RedriveWebhookDelivery(ctx context.Context, in RedriveWebhookDeliveryInput) (WebhookDelivery, error)
	// RequestDataExport is GraphQL's requestDataExport, audited as the
	// caller.
	RequestDataExport(ctx context.Context, in RequestDataExportInput) (DataExport, error)
	// SubscribeAuditEvents is GraphQL's auditEventRecorded: the project's
	// events after sequence after (every committed one first), or, when
	// after is nil, from the next one committed. The stream outlives the
	// request: ctx bounds it, and the caller closes it.
	SubscribeAuditEvents(ctx context.Context, projectID string, after *uint64) (EventStream, error)
	// Expires is when the caller's credentials stop being valid (zero when
	// unknown); subscriptions end then.
	Expires() time.Time
}

// EventStream is a live, gap-free sequence of a project's audit events.
type EventStream interface {
	// Next returns the next event in sequence order, waiting for one.
	Next(ctx context.Context) (Event, error)
	// Close ends the stream.
	Close()
}
