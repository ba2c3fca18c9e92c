package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// eventsPageSize is how many events one read of an events resource holds.
const eventsPageSize = 50

// codeRefused is the JSON-RPC error code of a resource read or
// subscription the API refuses for another reason than a missing resource;
// its data is the *Error ({"code": "FORBIDDEN", …}).
const codeRefused = -32000

// EventsPage is the contents of an events resource.
type EventsPage struct {
	// Events are in sequence order.
	Events []Event `json:"events"`
	// HasMore is true when events after the last one were left out.
	HasMore bool `json:"hasMore"`
	// Next is the URI of the events after this page's last (or, for an
	// empty page, after the same point): read it, or subscribe to it, to
	// follow on without a gap.
	Next string `json:"next"`
}

// addResources registers the resource templates.
func (s *Server) addResources() {
	s.mcp.AddResourceTemplate(&mcp.ResourceTemplate{
		Name:  "audit-events",
		Title: "Audit events of a project",
		Description: "The latest page of a project's audit events in sequence order; with ?after=S the events after sequence S. " +
			"Subscribe to be notified of each new event (notifications/resources/updated with the event's URI); " +
			"with ?after=S the subscription first replays every event after S.",
		MIMEType:    "application/json",
		URITemplate: EventsTemplate,
	}, s.readResource)
	s.mcp.AddResourceTemplate(&mcp.ResourceTemplate{
		Name:        "audit-event",
		Title:       "One audit event",
		Description: "One audit event of a project, by sequence.",
		MIMEType:    "application/json",
		URITemplate: EventTemplate,
	}, s.readResource)
}

// readResource reads an events or event resource as the request's caller.
func (s *Server) readResource(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	ctx, b, r, err := s.bindResource(ctx, req.Extra, uri)
	if err != nil {
		return nil, err
	}
	var body any
	if r.sequence != nil {
		body, err = eventBySequence(ctx, b, r.project, *r.sequence)
	} else {
		body, err = readEvents(ctx, b, r)
	}
	if err != nil {
		return nil, s.resourceError(ctx, uri, err)
	}
	text, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "application/json", Text: string(text)}}}, nil
}

// bindResource binds a request on a resource URI to its caller: a URI of
// another tenant is not found, as a missing resource is.
func (s *Server) bindResource(ctx context.Context, extra *mcp.RequestExtra, uri string) (context.Context, Backend, resourceURI, error) {
	r, ok := parseResourceURI(uri)
	if !ok {
		return ctx, nil, r, mcp.ResourceNotFoundError(uri)
	}
	ctx, b, err := s.bind(ctx, extra)
	if err != nil {
		return ctx, nil, r, s.resourceError(ctx, uri, err)
	}
	if r.tenant != b.TenantID() {
		return ctx, nil, r, mcp.ResourceNotFoundError(uri)
	}
	return ctx, b, r, nil
}

// readEvents reads a page of an events resource: after r.after in sequence
// order, or the latest events.
func readEvents(ctx context.Context, b Backend, r resourceURI) (EventsPage, error) {
	first := eventsPageSize
	in := SearchAuditEventsInput{ProjectID: r.project, First: &first}
	if r.after != nil {
		if *r.after == math.MaxUint64 {
			return EventsPage{Events: []Event{}, Next: EventsURI(r.tenant, r.project, r.after)}, nil
		}
		from := Sequence(*r.after + 1)
		in.Filter = &AuditEventFilter{SequenceFrom: &from}
	} else {
		in.Order = orderNewestFirst
	}
	page, err := b.SearchAuditEvents(ctx, in)
	if err != nil {
		return EventsPage{}, err
	}
	out := EventsPage{Events: page.Events, HasMore: r.after != nil && page.HasNextPage}
	if r.after == nil {
		slices.Reverse(out.Events)
	}
	next := r.after
	if n := len(out.Events); n > 0 {
		next = &out.Events[n-1].Sequence
	}
	if next == nil {
		zero := uint64(0)
		next = &zero
	}
	out.Next = EventsURI(r.tenant, r.project, next)
	return out, nil
}

// resourceError is the JSON-RPC error of a refused resource request:
// NOT_FOUND as the SDK's resource-not-found error, any other refusal with
// its *Error as data.
func (s *Server) resourceError(ctx context.Context, uri string, err error) error {
	e := errorOf(err)
	if e.Code == codeNotFound {
		return mcp.ResourceNotFoundError(uri)
	}
	var wire *jsonrpc.Error
	if errors.As(err, &wire) {
		return wire
	}
	s.logInternal(ctx, "resource "+uri, err)
	data, _ := json.Marshal(e)
	return &jsonrpc.Error{Code: codeRefused, Message: e.Error(), Data: data}
}
