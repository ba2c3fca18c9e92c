package mcpserver

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/aetheriot/aether-audit/client"
)

// GraphQLBackend runs every request against the GraphQL API of a running
// server with one caller's bearer token: `aether mcp`, for desktop clients
// that start MCP servers as local processes. The server authorizes, scopes
// and rate-limits each operation as for any GraphQL client.
type GraphQLBackend struct {
	api   *client.Client
	token func() (string, error)
}

var _ Backend = (*GraphQLBackend)(nil)

// NewGraphQLBackend returns a backend for the server at baseURL (e.g.
// https://audit.example.com), asking through the Go client. token is
// called for each operation, so that a rotated token is picked up;
// httpClient nil is a default client. Each operation is sent once: a
// failure, RATE_LIMITED with its retryAfterSeconds included, goes back to
// the MCP client, which decides whether to try again.
func NewGraphQLBackend(baseURL string, token func() (string, error), httpClient *http.Client) (*GraphQLBackend, error) {
	if httpClient == nil {
		httpClient = &http.Client{}
	}
	api, err := client.New(baseURL, client.Options{
		TokenSource: client.TokenSourceFunc(func(context.Context) (string, error) { return token() }),
		HTTPClient:  httpClient, MaxAttempts: 1,
	})
	if err != nil {
		return nil, err
	}
	return &GraphQLBackend{api: api, token: token}, nil
}

// apiError is err of the client as the tools' *Error when the server
// answered it with a code.
func apiError(err error) error {
	var e *client.Error
	if errors.As(err, &e) && e.Code != "" {
		return &Error{Code: e.Code, Message: e.Message, Field: e.Field, RetryAfterSeconds: int64(e.RetryAfter / time.Second)}
	}
	return err
}

// query runs a query document through the client.
func (b *GraphQLBackend) query(ctx context.Context, document string, vars map[string]any, out any) error {
	return apiError(b.api.Query(ctx, document, vars, out))
}

// mutate runs a mutation document through the client.
func (b *GraphQLBackend) mutate(ctx context.Context, document string, vars map[string]any, out any) error {
	return apiError(b.api.Mutate(ctx, document, vars, out))
}

// claims reads the tenant and expiry a token claims. They are not
// verified here (the server verifies every operation): they only name the
// caller's resources and end subscriptions in time.
func (b *GraphQLBackend) claims() (tenant string, exp time.Time) {
	token, err := b.token()
	if err != nil {
		return "", time.Time{}
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return "", time.Time{}
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return "", time.Time{}
	}
	var c struct {
		TenantID string  `json:"tenant_id"`
		Exp      float64 `json:"exp"`
	}
	if json.Unmarshal(payload, &c) != nil {
		return "", time.Time{}
	}
	if c.Exp > 0 {
		exp = time.Unix(int64(c.Exp), 0)
	}
	return c.TenantID, exp
}

// TenantID implements Backend: the tenant_id the token claims.
func (b *GraphQLBackend) TenantID() string {
	tenant, _ := b.claims()
	return tenant
}

// Expires implements Backend: the exp the token claims.
func (b *GraphQLBackend) Expires() time.Time {
	_, exp := b.claims()
	return exp
}

// eventFields selects an AuditEvent in the order of its public JSON shape.
const eventFields = `fragment E on AuditEvent {
  id tenantId projectId sequence action occurredAt recordedAt
  subject { type id displayName } resource { type id } outcome
  governance { reason ticket risk confirmedBy } correlation { traceId requestId causationId }
  evidenceDigests { algorithm value label } details chainHash chainVersion
  recordedBy { issuer subject tokenId clientId }
}`

const (
	deliveryFields = `id projectId subscriptionId destinationId eventId eventSequence eventType idempotencyKey
  state attemptCount maxAttempts nextAttemptAt createdAt updatedAt deliveredAt deadLetteredAt lastError
  attempts { number outcome startedAt finishedAt statusCode latencyMs errorClass error responseBody }`
	exportFields = `id projectId kind format compression from to state requestedAt startedAt progressRows progressBytes
  objectRef contentDigest byteLength rowCount readyAt expiresAt failedAt failureReason expiredAt`
	pageInfoFields = `pageInfo { hasNextPage endCursor }`
)

const (
	searchEventsQuery = `query($p: ID!, $filter: AuditEventFilter, $first: Int, $after: String, $order: AuditOrder) {
  auditEvents(projectId: $p, filter: $filter, first: $first, after: $after, order: $order) { edges { node { ...E } } ` + pageInfoFields + ` }
}
` + eventFields
	eventQuery = `query($p: ID!, $id: ID!) { auditEvent(projectId: $p, id: $id) { ...E } }
` + eventFields
	verifySubscription = `subscription($p: ID!, $from: Uint64, $to: Uint64, $resume: String) {
  auditChainVerification(projectId: $p, fromSequence: $from, toSequence: $to, resumeToken: $resume) {
    valid complete resumeToken checkedCount sequenceReached eventsPerSecond firstInvalidSequence headSequence headHash
    purgedThroughSequence checkpointsChecked firstInvalidCheckpointSequence
  }
}`
	deliveriesQuery = `query($p: ID!, $filter: WebhookDeliveryFilter, $first: Int, $after: String) {
  webhookDeliveries(projectId: $p, filter: $filter, first: $first, after: $after) { edges { node { ` + deliveryFields + ` } } ` + pageInfoFields + ` }
}`
	deliveryQuery = `query($id: ID!) { webhookDelivery(id: $id) { ` + deliveryFields + ` } }`
	exportsQuery  = `query($p: ID!, $filter: DataExportFilter, $first: Int, $after: String) {
  dataExports(projectId: $p, filter: $filter, first: $first, after: $after) { edges { node { ` + exportFields + ` } } ` + pageInfoFields + ` }
}`
	redriveMutation    = `mutation($in: RedriveWebhookDeliveryInput!) { redriveWebhookDelivery(input: $in) { delivery { ` + deliveryFields + ` } } }`
	exportMutation     = `mutation($in: RequestDataExportInput!) { requestDataExport(input: $in) { export { ` + exportFields + ` } } }`
	eventsSubscription = `subscription($p: ID!, $after: Uint64) { auditEventRecorded(projectId: $p, afterSequence: $after) { ...E } }
` + eventFields
)

// pageInfo is a connection's pageInfo.
type pageInfo struct {
	HasNextPage bool    `json:"hasNextPage"`
	EndCursor   *string `json:"endCursor"`
}

// connection is a GraphQL connection of nodes of type T.
type connection[T any] struct {
	Edges    []struct{ Node T } `json:"edges"`
	PageInfo pageInfo           `json:"pageInfo"`
}

// nodes are the connection's nodes.
func (c connection[T]) nodes() []T {
	out := make([]T, len(c.Edges))
	for i, e := range c.Edges {
		out[i] = e.Node
	}
	return out
}

// graphQLEvent reads an event of the API as an Event.
func graphQLEvent(raw json.RawMessage) (Event, error) {
	var e Event
	if err := e.UnmarshalJSON(raw); err != nil {
		return Event{}, fmt.Errorf("decoding an audit event: %w", err)
	}
	return e, nil
}

// optional is v, or nil (null) when it is the zero value.
func optional[T comparable](v T) any {
	var zero T
	if v == zero {
		return nil
	}
	return v
}

// SearchAuditEvents implements Backend.
func (b *GraphQLBackend) SearchAuditEvents(ctx context.Context, in SearchAuditEventsInput) (EventPage, error) {
	var data struct {
		AuditEvents connection[json.RawMessage] `json:"auditEvents"`
	}
	vars := map[string]any{"p": in.ProjectID, "filter": in.Filter, "first": in.First, "after": optional(in.After), "order": optional(in.Order)}
	if err := b.query(ctx, searchEventsQuery, vars, &data); err != nil {
		return EventPage{}, err
	}
	out := EventPage{HasNextPage: data.AuditEvents.PageInfo.HasNextPage, EndCursor: data.AuditEvents.PageInfo.EndCursor, Events: []Event{}}
	for _, raw := range data.AuditEvents.nodes() {
		e, err := graphQLEvent(raw)
		if err != nil {
			return EventPage{}, err
		}
		out.Events = append(out.Events, e)
	}
	return out, nil
}

// GetAuditEvent implements Backend.
func (b *GraphQLBackend) GetAuditEvent(ctx context.Context, projectID, eventID string) (Event, error) {
	var data struct {
		AuditEvent json.RawMessage `json:"auditEvent"`
	}
	if err := b.query(ctx, eventQuery, map[string]any{"p": projectID, "id": eventID}, &data); err != nil {
		return Event{}, err
	}
	if len(data.AuditEvent) == 0 || string(data.AuditEvent) == "null" {
		return Event{}, errEventNotFound
	}
	return graphQLEvent(data.AuditEvent)
}

// VerifyAuditChain implements Backend: the auditChainVerification
// subscription over Server-Sent Events, read to its verdict. As any other
// operation of this backend it is sent once: a stream that drops fails
// the call, and the MCP client decides whether to try again.
func (b *GraphQLBackend) VerifyAuditChain(ctx context.Context, in VerifyAuditChainInput, progress func(VerifyProgress)) (ChainVerification, error) {
	vars := map[string]any{"p": in.ProjectID, "from": in.FromSequence, "to": in.ToSequence, "resume": optional(in.ResumeToken)}
	s, err := b.api.SubscribeSSE(ctx, verifySubscription, vars)
	if err != nil {
		return ChainVerification{}, apiError(err)
	}
	defer s.Close()
	for {
		raw, err := s.Next()
		if errors.Is(err, client.ErrStreamCompleted) {
			return ChainVerification{}, errors.New("the verification stream completed without its verdict")
		}
		if err != nil {
			return ChainVerification{}, apiError(err)
		}
		var data struct {
			AuditChainVerification ChainVerification `json:"auditChainVerification"`
		}
		if err := json.Unmarshal(raw, &data); err != nil {
			return ChainVerification{}, fmt.Errorf("decoding a verification item: %w", err)
		}
		v := data.AuditChainVerification
		if v.Complete {
			return v, nil
		}
		if progress != nil {
			p, err := graphQLProgress(v)
			if err != nil {
				return ChainVerification{}, err
			}
			progress(p)
		}
	}
}

// graphQLProgress reads a progress item's counts.
func graphQLProgress(v ChainVerification) (VerifyProgress, error) {
	p := VerifyProgress{EventsPerSecond: v.EventsPerSecond}
	for _, f := range []struct {
		s   string
		out *uint64
	}{{v.CheckedCount, &p.CheckedCount}, {v.SequenceReached, &p.SequenceReached}, {v.HeadSequence, &p.HeadSequence}} {
		n, err := strconv.ParseUint(f.s, 10, 64)
		if err != nil {
			return VerifyProgress{}, fmt.Errorf("decoding a verification item: %w", err)
		}
		*f.out = n
	}
	return p, nil
}

// WebhookDeliveries implements Backend.
func (b *GraphQLBackend) WebhookDeliveries(ctx context.Context, in ListWebhookDeliveriesInput) (WebhookDeliveryPage, error) {
	var data struct {
		WebhookDeliveries connection[WebhookDelivery] `json:"webhookDeliveries"`
	}
	filter := map[string]any{"state": optional(in.State), "subscriptionId": optional(in.SubscriptionID), "eventId": optional(in.EventID)}
	vars := map[string]any{"p": in.ProjectID, "filter": filter, "first": in.First, "after": optional(in.After)}
	if err := b.query(ctx, deliveriesQuery, vars, &data); err != nil {
		return WebhookDeliveryPage{}, err
	}
	c := data.WebhookDeliveries
	return WebhookDeliveryPage{Deliveries: c.nodes(), HasNextPage: c.PageInfo.HasNextPage, EndCursor: c.PageInfo.EndCursor}, nil
}

// errDeliveryNotFound answers a lookup of a delivery that is missing or
// not visible, as the API does.
var errDeliveryNotFound = &Error{Code: codeNotFound, Message: "webhook delivery not found"}

// WebhookDelivery implements Backend.
func (b *GraphQLBackend) WebhookDelivery(ctx context.Context, deliveryID string) (WebhookDelivery, error) {
	var data struct {
		WebhookDelivery *WebhookDelivery `json:"webhookDelivery"`
	}
	if err := b.query(ctx, deliveryQuery, map[string]any{"id": deliveryID}, &data); err != nil {
		return WebhookDelivery{}, err
	}
	if data.WebhookDelivery == nil {
		return WebhookDelivery{}, errDeliveryNotFound
	}
	return *data.WebhookDelivery, nil
}

// DataExports implements Backend.
func (b *GraphQLBackend) DataExports(ctx context.Context, in ListDataExportsInput) (DataExportPage, error) {
	var data struct {
		DataExports connection[DataExport] `json:"dataExports"`
	}
	filter := map[string]any{"state": optional(in.State), "kind": optional(in.Kind)}
	vars := map[string]any{"p": in.ProjectID, "filter": filter, "first": in.First, "after": optional(in.After)}
	if err := b.query(ctx, exportsQuery, vars, &data); err != nil {
		return DataExportPage{}, err
	}
	c := data.DataExports
	return DataExportPage{Exports: c.nodes(), HasNextPage: c.PageInfo.HasNextPage, EndCursor: c.PageInfo.EndCursor}, nil
}

// RedriveWebhookDelivery implements Backend.
func (b *GraphQLBackend) RedriveWebhookDelivery(ctx context.Context, in RedriveWebhookDeliveryInput) (WebhookDelivery, error) {
	var data struct {
		RedriveWebhookDelivery struct{ Delivery WebhookDelivery } `json:"redriveWebhookDelivery"`
	}
	vars := map[string]any{"in": map[string]any{"deliveryId": in.DeliveryID, "confirm": in.Confirm}}
	err := b.mutate(ctx, redriveMutation, vars, &data)
	return data.RedriveWebhookDelivery.Delivery, err
}

// RequestDataExport implements Backend.
func (b *GraphQLBackend) RequestDataExport(ctx context.Context, in RequestDataExportInput) (DataExport, error) {
	var data struct {
		RequestDataExport struct {
			Export DataExport `json:"export"`
		} `json:"requestDataExport"`
	}
	input := map[string]any{
		"projectId": in.ProjectID, "kind": in.Kind, "format": in.Format, "compression": in.Compression,
		"confirm": in.Confirm, "from": in.From, "to": in.To, "fromSequence": in.FromSequence, "toSequence": in.ToSequence,
		"filter": in.Filter, "idempotencyKey": optional(in.IdempotencyKey),
	}
	err := b.mutate(ctx, exportMutation, map[string]any{"in": input}, &data)
	return data.RequestDataExport.Export, err
}

// SubscribeAuditEvents implements Backend over GraphQL's
// auditEventRecorded, which the server serves from its live hub.
func (b *GraphQLBackend) SubscribeAuditEvents(ctx context.Context, projectID string, after *uint64) (EventStream, error) {
	vars := map[string]any{"p": projectID}
	if after != nil {
		vars["after"] = strconv.FormatUint(*after, 10)
	}
	s, err := b.api.SubscribeSSE(ctx, eventsSubscription, vars)
	if err != nil {
		return nil, apiError(err)
	}
	return graphQLStream{s}, nil
}

// graphQLStream is a subscription to auditEventRecorded as an EventStream.
type graphQLStream struct{ s *client.SSEStream }

// Next implements EventStream. The stream's context, given to
// SubscribeAuditEvents, bounds it; ctx is not consulted between events.
func (s graphQLStream) Next(context.Context) (Event, error) {
	data, err := s.s.Next()
	if err != nil {
		return Event{}, apiError(err)
	}
	var d struct {
		AuditEventRecorded json.RawMessage `json:"auditEventRecorded"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return Event{}, fmt.Errorf("decoding a subscription event: %w", err)
	}
	if len(d.AuditEventRecorded) == 0 {
		return Event{}, errors.New("a subscription event without auditEventRecorded")
	}
	return graphQLEvent(d.AuditEventRecorded)
}

// Close implements EventStream.
func (s graphQLStream) Close() { _ = s.s.Close() }
