package mcpserver

import (
	"context"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// toolFunc runs a tool's input against the request's Backend.
type toolFunc[In any] func(ctx context.Context, b Backend, in In) (any, error)

// requestToolFunc is a toolFunc that also reads its request (a progress
// token, the session to notify).
type requestToolFunc[In any] func(ctx context.Context, req *mcp.CallToolRequest, b Backend, in In) (any, error)

// addTool registers a tool whose handler binds the request to its caller,
// runs it as a call of its session's connection (sessionConnections), and
// answers a refusal as a tool error in the API's codes.
func addTool[In any](s *Server, t *mcp.Tool, schema *jsonschema.Schema, run toolFunc[In]) {
	addRequestTool(s, t, schema, func(ctx context.Context, _ *mcp.CallToolRequest, b Backend, in In) (any, error) {
		return run(ctx, b, in)
	})
}

// addRequestTool is addTool of a requestToolFunc.
func addRequestTool[In any](s *Server, t *mcp.Tool, schema *jsonschema.Schema, run requestToolFunc[In]) {
	t.InputSchema = schema
	mcp.AddTool(s.mcp, t, func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, any, error) {
		ctx, done := s.connections.enter(ctx, req.Session)
		defer done()
		ctx, b, err := s.bind(ctx, req.Extra)
		if err == nil {
			var out any
			if out, err = run(ctx, req, b, in); err == nil {
				return nil, out, nil
			}
		}
		s.logInternal(ctx, t.Name, err)
		return toolError(errorOf(err)), nil, nil
	})
}

// readOnly are the annotations of a tool that changes nothing.
func readOnly(title string) *mcp.ToolAnnotations {
	return &mcp.ToolAnnotations{Title: title, ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: new(false)}
}

// command are the annotations of a tool that changes something: not
// read-only, not destructive (nothing is deleted), not idempotent.
func command(title string, openWorld bool) *mcp.ToolAnnotations {
	return &mcp.ToolAnnotations{Title: title, DestructiveHint: new(false), OpenWorldHint: new(openWorld)}
}

// addTools registers every tool.
func (s *Server) addTools() {
	addTool(s, &mcp.Tool{
		Name: "search_audit_events",
		Description: "Search a project's audit events with every filter of the GraphQL auditEvents query " +
			"(action or action prefix, subject, resource, outcome, occurredAt range, sequence range, recorder, correlation ids), " +
			"one page at a time (1-100 events, default 20; pass endCursor as after for the next page). Needs audit:read.",
		Annotations: readOnly("Search audit events"),
	}, inputSchema[SearchAuditEventsInput](filterEnums("filter"), enum(orderValues, "order"), pageSize("first")),
		func(ctx context.Context, b Backend, in SearchAuditEventsInput) (any, error) {
			var err error
			if in.First, err = page(in.First); err != nil {
				return nil, err
			}
			return b.SearchAuditEvents(ctx, in)
		})

	addTool(s, &mcp.Tool{
		Name: "get_audit_event",
		Description: "Read one audit event of a project by its id or by its sequence, with its chain hash and who recorded it. " +
			"NOT_FOUND when the project has no such event. Needs audit:read.",
		Annotations: readOnly("Get an audit event"),
	}, inputSchema[GetAuditEventInput](), func(ctx context.Context, b Backend, in GetAuditEventInput) (any, error) {
		return getAuditEvent(ctx, b, in)
	})

	addRequestTool(s, &mcp.Tool{
		Name: "verify_audit_chain",
		Description: "Recompute the hash chain of a project's events in [fromSequence, toSequence] (default: all, whatever its length) " +
			"and the stored signed checkpoints in it; reports whether history is intact and, if not, the first event or checkpoint that fails. " +
			"Long ranges take a while: the call sends MCP progress notifications (events checked of the range) when given a progressToken. " +
			"Needs audit:read.",
		Annotations: readOnly("Verify the audit chain"),
	}, inputSchema[VerifyAuditChainInput](), func(ctx context.Context, req *mcp.CallToolRequest, b Backend, in VerifyAuditChainInput) (any, error) {
		return b.VerifyAuditChain(ctx, in, verifyProgressNotifier(ctx, req, in))
	})

	addTool(s, &mcp.Tool{
		Name: "list_webhook_deliveries",
		Description: "List a project's webhook deliveries, newest first, each with its attempts (status, latency, error); " +
			"filter by state (DEAD_LETTERED for the dead letters), subscription or audit event. Needs webhooks:read.",
		Annotations: readOnly("List webhook deliveries"),
	}, inputSchema[ListWebhookDeliveriesInput](enum(deliveryStateValues, "state"), pageSize("first")),
		func(ctx context.Context, b Backend, in ListWebhookDeliveriesInput) (any, error) {
			var err error
			if in.First, err = page(in.First); err != nil {
				return nil, err
			}
			return b.WebhookDeliveries(ctx, in)
		})

	addTool(s, &mcp.Tool{
		Name:        "get_webhook_delivery",
		Description: "Read one webhook delivery with every attempt. NOT_FOUND when missing or not visible. Needs webhooks:read.",
		Annotations: readOnly("Get a webhook delivery"),
	}, inputSchema[GetWebhookDeliveryInput](), func(ctx context.Context, b Backend, in GetWebhookDeliveryInput) (any, error) {
		return b.WebhookDelivery(ctx, in.DeliveryID)
	})

	addTool(s, &mcp.Tool{
		Name: "list_data_exports",
		Description: "List a project's data exports, newest first, with state, progress, object reference, digest and length " +
			"(never their bytes). Needs exports:read.",
		Annotations: readOnly("List data exports"),
	}, inputSchema[ListDataExportsInput](enum(exportStateValues, "state"), enum(exportKindValues, "kind"), pageSize("first")),
		func(ctx context.Context, b Backend, in ListDataExportsInput) (any, error) {
			var err error
			if in.First, err = page(in.First); err != nil {
				return nil, err
			}
			return b.DataExports(ctx, in)
		})

	addTool(s, &mcp.Tool{
		Name: "redrive_webhook_delivery",
		Description: "Send a dead-lettered webhook delivery again, with a fresh budget of attempts and the same webhook-id. " +
			"Changes state: requires confirm: true (else CONFIRMATION_REQUIRED); only from DEAD_LETTERED (else INVALID_STATE). " +
			"Needs deliveries:redrive. Audited as webhook.delivery.redriven, recorded as you.",
		Annotations: command("Redrive a webhook delivery", true),
	}, inputSchema[RedriveWebhookDeliveryInput](), func(ctx context.Context, b Backend, in RedriveWebhookDeliveryInput) (any, error) {
		return b.RedriveWebhookDelivery(ctx, in)
	})

	addTool(s, &mcp.Tool{
		Name: "request_data_export",
		Description: "Queue an export of a project's history (AUDIT, ALARM or TELEMETRY) in [from, to), or of the AUDIT events " +
			"fromSequence..toSequence, optionally filtered. Takes data out of the platform: requires confirm: true (else CONFIRMATION_REQUIRED, " +
			"and nothing is created). Needs exports:write. Audited as export.requested (risk HIGH), recorded as you.",
		Annotations: command("Request a data export", false),
	}, inputSchema[RequestDataExportInput](enum(exportKindValues, "kind"), enum(exportFormatValues, "format"),
		enum(compressionValues, "compression"), filterEnums("filter")),
		func(ctx context.Context, b Backend, in RequestDataExportInput) (any, error) {
			if in.Compression == "" {
				in.Compression = "NONE"
			}
			return b.RequestDataExport(ctx, in)
		})
}

// errEventNotFound answers a lookup of an event that is missing or not
// visible, as the API does.
var errEventNotFound = &Error{Code: codeNotFound, Message: "audit event not found"}

// getAuditEvent reads one event by id or by sequence.
func getAuditEvent(ctx context.Context, b Backend, in GetAuditEventInput) (Event, error) {
	switch {
	case in.ID != "" && in.Sequence != nil:
		return Event{}, badInput("id", "give id or sequence, not both")
	case in.ID != "":
		return b.GetAuditEvent(ctx, in.ProjectID, in.ID)
	case in.Sequence != nil:
		return eventBySequence(ctx, b, in.ProjectID, uint64(*in.Sequence))
	default:
		return Event{}, badInput("id", "give id or sequence")
	}
}

// eventBySequence reads the event at seq of a project.
func eventBySequence(ctx context.Context, b Backend, projectID string, seq uint64) (Event, error) {
	one := 1
	s := Sequence(seq)
	page, err := b.SearchAuditEvents(ctx, SearchAuditEventsInput{
		ProjectID: projectID, First: &one, Filter: &AuditEventFilter{SequenceFrom: &s, SequenceTo: &s},
	})
	if err != nil {
		return Event{}, err
	}
	if len(page.Events) == 0 {
		return Event{}, errEventNotFound
	}
	return page.Events[0], nil
}
