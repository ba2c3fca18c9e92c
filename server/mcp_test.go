package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/auth"
	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/export"
	"github.com/aetheriot/aether-audit/jobargs"
	"github.com/aetheriot/aether-audit/mcpserver"
	"github.com/aetheriot/aether-audit/secrets"
	"github.com/aetheriot/aether-audit/server"
	"github.com/aetheriot/aether-audit/webhook"
)

// /mcp is outside the OpenAPI document and the isolation matrix: its
// contract is MCP's, and its isolation is held by TestMCPIsolation (and the
// error paths of every tool by the tests of this file).
func init() {
	openAPIUndocumented["/mcp"] = "the MCP interface: its contract is MCP's (docs/mcp.md)"
	isoPublicRoutes["/mcp"] = "the MCP interface: TestMCPIsolation holds its tools and resources to tenant and project scoping"
}

// mcpBundle is a server whose app has webhooks (a sender trusting a
// loopback receiver that always answers 500, one retry) and exports, with
// https://allowed.example among the allowed origins.
type mcpBundle struct {
	*testBundle
	receiverURL string
}

// mcpPerms is every permission the MCP tools use.
var mcpPerms = []app.Permission{
	app.PermissionAuditRead, app.PermissionAuditWrite, app.PermissionWebhooksRead, app.PermissionWebhooksWrite,
	app.PermissionDeliveriesRedrive, app.PermissionExportsRead, app.PermissionExportsWrite,
}

func setupMCP(t *testing.T) *mcpBundle {
	t.Helper()
	receiver := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
	}))
	t.Cleanup(receiver.Close)
	loopback := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	sender := webhook.NewSender(webhook.SenderConfig{Timeout: 5 * time.Second, AllowPrefixes: loopback,
		RootCAs: receiver.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs})
	t.Cleanup(sender.CloseIdleConnections)
	box, err := secrets.NewBox(make([]byte, secrets.KeySize))
	require.NoError(t, err)
	bucket, err := export.OpenBucket(context.Background(), "file://"+t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { _ = bucket.Close() })
	b := &mcpBundle{testBundle: setupApp(t, app.Config{
		Webhooks: app.WebhookConfig{Box: box, Sender: sender, RetrySchedule: domain.RetrySchedule{time.Millisecond},
			URLPolicy: webhook.URLPolicy{AllowPrefixes: loopback}},
		Exports: app.ExportConfig{Bucket: bucket, DownloadKey: exportDownloadKey},
	}, func(c *server.Config) { c.AllowedOrigins = []string{"https://allowed.example"} })}
	t.Cleanup(func() { b.server.Shutdown(context.Background()) })
	b.receiverURL = receiver.URL
	return b
}

// tokenAs mints a token of tenant A, project A for subject with perms.
func (b *mcpBundle) tokenAs(t *testing.T, subject string, perms ...app.Permission) string {
	t.Helper()
	tok, err := auth.MintHS256(b.secret, auth.TokenRequest{
		Subject: subject, TenantID: tenantA, ProjectIDs: []string{projectA}, Permissions: perms, TTL: time.Hour,
	}, time.Now())
	require.NoError(t, err)
	return tok
}

// bearerTransport adds a bearer token (and other headers) to every request.
type bearerTransport struct {
	token  string
	header http.Header
}

// RoundTrip implements http.RoundTripper.
func (bt bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+bt.token)
	for k, v := range bt.header {
		r.Header[k] = v
	}
	return http.DefaultTransport.RoundTrip(r)
}

// mcpSession connects the SDK's client to /mcp over Streamable HTTP with
// token; updated, when given, receives the URI of every resource update.
func (b *mcpBundle) mcpSession(t *testing.T, token string, updated chan<- string) *mcp.ClientSession {
	t.Helper()
	opts := &mcp.ClientOptions{}
	if updated != nil {
		opts.ResourceUpdatedHandler = func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			updated <- req.Params.URI
		}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   b.url + "/mcp",
		HTTPClient: &http.Client{Transport: bearerTransport{token: token}},
	}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// callTool calls a tool, failing the test on a protocol error.
func callTool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	require.NoError(t, err)
	return res
}

// toolOK calls a tool that must succeed and decodes its structured result
// into out.
func toolOK(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any, out any) {
	t.Helper()
	res := callTool(t, cs, name, args)
	require.False(t, res.IsError, "%s: %s", name, toolText(res))
	raw, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, out), "%s", raw)
}

// toolErr calls a tool that must fail with the API's error and returns it.
func toolErr(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) mcpserver.Error {
	t.Helper()
	res := callTool(t, cs, name, args)
	require.True(t, res.IsError, "%s must fail: %s", name, toolText(res))
	raw, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	var body struct{ Error mcpserver.Error }
	require.NoError(t, json.Unmarshal(raw, &body), "%s", raw)
	require.True(t, documentedCodes[body.Error.Code], "%s", raw)
	require.Equal(t, body.Error.Code+": "+body.Error.Message, toolText(res))
	return body.Error
}

// toolText is the text content of a result.
func toolText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// mcpEvent is what the tests read of an event.
type mcpEvent struct {
	ID         string `json:"id"`
	TenantID   string `json:"tenantId"`
	ProjectID  string `json:"projectId"`
	Sequence   string `json:"sequence"`
	Action     string `json:"action"`
	Subject    struct{ ID string }
	RecordedBy *struct{ Subject string } `json:"recordedBy"`
}

type mcpEventPage struct {
	Events      []mcpEvent `json:"events"`
	HasNextPage bool       `json:"hasNextPage"`
	EndCursor   *string    `json:"endCursor"`
}

func eventSeqs(es []mcpEvent) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Sequence
	}
	return out
}

// identity is the app identity of tenant A's subject "owner" with perms.
func identity(perms ...app.Permission) app.Identity {
	return app.Identity{Subject: "owner", TenantID: tenantA, ProjectIDs: []string{projectA}, Permissions: perms}
}

// deadLetter creates a subscription of project A whose receiver always
// fails, records a device event and runs its delivery's two attempts: the
// delivery ends DEAD_LETTERED. It returns the delivery's id.
func (b *mcpBundle) deadLetter(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	owner := identity(mcpPerms...)
	dest, err := b.app.CreateWebhookDestination(ctx, owner, app.CreateWebhookDestinationInput{ProjectID: projectA, URL: b.receiverURL + "/hook"})
	require.NoError(t, err)
	_, err = b.app.CreateWebhookSubscription(ctx, owner, app.CreateWebhookSubscriptionInput{
		ProjectID: projectA, DestinationID: dest.Destination.ID.String(), EventTypes: []string{"device.*"}})
	require.NoError(t, err)
	b.record(t, b.token(t, tokenOpts{}), eventInput(projectA, "device.rebooted"))
	_, err = b.app.FanOutWebhookDeliveries(ctx, jobargs.WebhookFanoutArgs{TenantID: tenantA, ProjectID: projectA, FromSequence: 1, ToSequence: 1000})
	require.NoError(t, err)
	page, err := b.app.WebhookDeliveries(ctx, owner, app.WebhookDeliveriesInput{ProjectID: projectA})
	require.NoError(t, err)
	require.Len(t, page.Items, 1)
	d := page.Items[0]
	for attempt := 1; attempt <= 2; attempt++ {
		if d.NextAttemptAt != nil {
			next := *d.NextAttemptAt
			require.Eventually(t, func() bool { return time.Now().After(next) }, 10*time.Second, time.Millisecond)
		}
		args := jobargs.WebhookDeliveryArgs{TenantID: tenantA, DestinationID: d.DestinationID, Attempts: []int{attempt}}
		args.SetDeliveries(1, func(int) (uuid.UUID, uuid.UUID) { return d.ID, d.EventID })
		require.NoError(t, b.app.DeliverWebhooks(ctx, args))
		d, err = b.app.WebhookDelivery(ctx, owner, d.ID.String())
		require.NoError(t, err)
	}
	require.Equal(t, domain.WebhookDeliveryDeadLettered, d.State)
	return d.ID.String()
}

func TestMCPToolList(t *testing.T) {
	t.Parallel()
	b := setupMCP(t)
	cs := b.mcpSession(t, b.token(t, tokenOpts{}), nil)
	ctx := context.Background()

	var names []string
	for tool, err := range cs.Tools(ctx, nil) {
		require.NoError(t, err)
		names = append(names, tool.Name)
		require.NotEmpty(t, tool.Description, tool.Name)
		require.NotNil(t, tool.InputSchema, tool.Name)
		require.NotNil(t, tool.Annotations, tool.Name)
		command := tool.Name == "redrive_webhook_delivery" || tool.Name == "request_data_export"
		require.Equal(t, !command, tool.Annotations.ReadOnlyHint, tool.Name)
		schema, err := json.Marshal(tool.InputSchema)
		require.NoError(t, err)
		if command {
			require.Contains(t, string(schema), `"confirm"`, tool.Name)
			require.NotNil(t, tool.Annotations.DestructiveHint)
		}
		if strings.HasPrefix(tool.Name, "search_") || strings.HasPrefix(tool.Name, "list_") {
			require.Contains(t, string(schema), `"maximum":100`, tool.Name)
		}
	}
	require.ElementsMatch(t, []string{
		"search_audit_events", "get_audit_event", "verify_audit_chain", "list_webhook_deliveries",
		"get_webhook_delivery", "list_data_exports", "redrive_webhook_delivery", "request_data_export",
	}, names)

	var templates []string
	for rt, err := range cs.ResourceTemplates(ctx, nil) {
		require.NoError(t, err)
		templates = append(templates, rt.URITemplate)
	}
	require.ElementsMatch(t, []string{mcpserver.EventsTemplate, mcpserver.EventTemplate}, templates)

	var prompts []string
	for p, err := range cs.Prompts(ctx, nil) {
		require.NoError(t, err)
		prompts = append(prompts, p.Name)
	}
	require.ElementsMatch(t, []string{"investigate_incident", "review_recorder"}, prompts)
	res, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "investigate_incident", Arguments: map[string]string{
		"projectId": projectA, "from": "2026-12-01T22:00:00Z", "to": "2026-12-02T06:00:00Z", "resourceType": "device", "resourceId": "dev-1", "recorder": "ingest",
	}})
	require.NoError(t, err)
	text := res.Messages[0].Content.(*mcp.TextContent).Text
	for _, want := range []string{"search_audit_events", "verify_audit_chain", `"resourceId": "dev-1"`, `"recordedBySubject": "ingest"`, `"occurredFrom": "2026-12-01T22:00:00Z"`} {
		require.Contains(t, text, want)
	}
	_, err = cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "investigate_incident", Arguments: map[string]string{"projectId": projectA}})
	require.ErrorContains(t, err, "missing argument from")
}

func TestMCPAuditTools(t *testing.T) {
	t.Parallel()
	b := setupMCP(t)
	writer := b.token(t, tokenOpts{})
	b.record(t, writer, eventInput(projectA, "device.rebooted"), eventInput(projectA, "device.firmware.updated"),
		eventInput(projectA, "user.login"), eventInput(projectA, "device.rebooted"))
	cs := b.mcpSession(t, b.token(t, tokenOpts{perms: []app.Permission{app.PermissionAuditRead}}), nil)

	// search_audit_events: a filter, pages by cursor, both orders.
	var page mcpEventPage
	toolOK(t, cs, "search_audit_events", map[string]any{"projectId": projectA, "filter": map[string]any{"action": "device.*"}, "first": 2}, &page)
	require.Equal(t, []string{"1", "2"}, eventSeqs(page.Events))
	require.True(t, page.HasNextPage)
	require.Equal(t, tenantA, page.Events[0].TenantID)
	var next mcpEventPage
	toolOK(t, cs, "search_audit_events", map[string]any{"projectId": projectA, "filter": map[string]any{"action": "device.*"}, "first": 2, "after": *page.EndCursor}, &next)
	require.Equal(t, []string{"4"}, eventSeqs(next.Events))
	require.False(t, next.HasNextPage)
	toolOK(t, cs, "search_audit_events", map[string]any{"projectId": projectA, "order": "NEWEST_FIRST",
		"filter": map[string]any{"sequenceFrom": "2", "sequenceTo": 3, "outcome": []string{"SUCCESS"}, "recordedBySubject": "tester"}}, &page)
	require.Equal(t, []string{"3", "2"}, eventSeqs(page.Events))
	require.Equal(t, "tester", page.Events[0].RecordedBy.Subject)

	e := toolErr(t, cs, "search_audit_events", map[string]any{"projectId": projectA, "after": "not-a-cursor"})
	require.Equal(t, "BAD_USER_INPUT", e.Code)
	require.Equal(t, "after", e.Field)
	e = toolErr(t, cs, "search_audit_events", map[string]any{"projectId": projectA, "filter": map[string]any{"action": "Not An Action"}})
	require.Equal(t, "BAD_USER_INPUT", e.Code)
	require.Equal(t, "NOT_FOUND", toolErr(t, cs, "search_audit_events", map[string]any{"projectId": projectB}).Code)
	res := callTool(t, cs, "search_audit_events", map[string]any{"projectId": projectA, "first": 101})
	require.True(t, res.IsError, "the page bound is in the schema")
	res = callTool(t, cs, "search_audit_events", map[string]any{"projectId": projectA, "order": "SIDEWAYS"})
	require.True(t, res.IsError)

	// get_audit_event: by id and by sequence.
	var ev mcpEvent
	toolOK(t, cs, "get_audit_event", map[string]any{"projectId": projectA, "sequence": "3"}, &ev)
	require.Equal(t, "user.login", ev.Action)
	var byID mcpEvent
	toolOK(t, cs, "get_audit_event", map[string]any{"projectId": projectA, "id": ev.ID}, &byID)
	require.Equal(t, ev, byID)
	require.Equal(t, "NOT_FOUND", toolErr(t, cs, "get_audit_event", map[string]any{"projectId": projectA, "sequence": 99}).Code)
	require.Equal(t, "NOT_FOUND", toolErr(t, cs, "get_audit_event", map[string]any{"projectId": projectA, "id": uuid.NewString()}).Code)
	require.Equal(t, "BAD_USER_INPUT", toolErr(t, cs, "get_audit_event", map[string]any{"projectId": projectA, "id": ev.ID, "sequence": "3"}).Code)
	require.Equal(t, "BAD_USER_INPUT", toolErr(t, cs, "get_audit_event", map[string]any{"projectId": projectA}).Code)

	// verify_audit_chain.
	var v struct {
		Valid        bool   `json:"valid"`
		CheckedCount string `json:"checkedCount"`
		HeadSequence string `json:"headSequence"`
		HeadHash     string `json:"headHash"`
	}
	toolOK(t, cs, "verify_audit_chain", map[string]any{"projectId": projectA}, &v)
	require.True(t, v.Valid)
	require.Equal(t, "4", v.CheckedCount)
	require.Equal(t, "4", v.HeadSequence)
	require.Len(t, v.HeadHash, 64)
	toolOK(t, cs, "verify_audit_chain", map[string]any{"projectId": projectA, "fromSequence": "2", "toSequence": "3"}, &v)
	require.Equal(t, "2", v.CheckedCount)
	require.Equal(t, "BAD_USER_INPUT", toolErr(t, cs, "verify_audit_chain", map[string]any{"projectId": projectA, "fromSequence": "3", "toSequence": "2"}).Code)
	require.Equal(t, "BAD_USER_INPUT", toolErr(t, cs, "verify_audit_chain", map[string]any{"projectId": projectA, "resumeToken": "bm90LWEtdG9rZW4"}).Code)

	// A token without audit:read gets FORBIDDEN, as from GraphQL.
	noRead := b.mcpSession(t, b.token(t, tokenOpts{perms: []app.Permission{app.PermissionAuditWrite}}), nil)
	for name, args := range map[string]map[string]any{
		"search_audit_events": {"projectId": projectA},
		"get_audit_event":     {"projectId": projectA, "sequence": "1"},
		"verify_audit_chain":  {"projectId": projectA},
	} {
		e := toolErr(t, noRead, name, args)
		require.Equal(t, "FORBIDDEN", e.Code, name)
		require.Equal(t, "missing permission audit:read", e.Message, name)
	}
}

func TestMCPWebhookTools(t *testing.T) {
	t.Parallel()
	b := setupMCP(t)
	deliveryID := b.deadLetter(t)
	cs := b.mcpSession(t, b.tokenAs(t, "oncall", mcpPerms...), nil)

	type delivery struct {
		ID             string `json:"id"`
		State          string `json:"state"`
		EventSequence  string `json:"eventSequence"`
		IdempotencyKey string `json:"idempotencyKey"`
		AttemptCount   int    `json:"attemptCount"`
		Attempts       []struct {
			Number     int      `json:"number"`
			Outcome    string   `json:"outcome"`
			StatusCode *int     `json:"statusCode"`
			LatencyMs  *float64 `json:"latencyMs"`
		} `json:"attempts"`
	}
	var list struct {
		Deliveries  []delivery `json:"deliveries"`
		HasNextPage bool       `json:"hasNextPage"`
		EndCursor   *string    `json:"endCursor"`
	}
	toolOK(t, cs, "list_webhook_deliveries", map[string]any{"projectId": projectA, "state": "DEAD_LETTERED"}, &list)
	require.Len(t, list.Deliveries, 1)
	d := list.Deliveries[0]
	require.Equal(t, deliveryID, d.ID)
	require.Equal(t, 2, d.AttemptCount)
	require.Len(t, d.Attempts, 2)
	require.Equal(t, 500, *d.Attempts[1].StatusCode)
	require.NotNil(t, d.Attempts[1].LatencyMs)
	toolOK(t, cs, "list_webhook_deliveries", map[string]any{"projectId": projectA, "state": "DELIVERED"}, &list)
	require.Empty(t, list.Deliveries)
	require.Equal(t, "BAD_USER_INPUT", toolErr(t, cs, "list_webhook_deliveries", map[string]any{"projectId": projectA, "after": "?"}).Code)

	var got delivery
	toolOK(t, cs, "get_webhook_delivery", map[string]any{"deliveryId": deliveryID}, &got)
	require.Equal(t, d.IdempotencyKey, got.IdempotencyKey)
	require.Equal(t, "NOT_FOUND", toolErr(t, cs, "get_webhook_delivery", map[string]any{"deliveryId": uuid.NewString()}).Code)

	// redrive_webhook_delivery: confirm: true or nothing happens.
	for _, args := range []map[string]any{{"deliveryId": deliveryID}, {"deliveryId": deliveryID, "confirm": false}} {
		e := toolErr(t, cs, "redrive_webhook_delivery", args)
		require.Equal(t, "CONFIRMATION_REQUIRED", e.Code)
		require.Equal(t, "confirm", e.Field)
	}
	toolOK(t, cs, "get_webhook_delivery", map[string]any{"deliveryId": deliveryID}, &got)
	require.Equal(t, "DEAD_LETTERED", got.State, "an unconfirmed redrive changes nothing")
	noRedrive := b.mcpSession(t, b.token(t, tokenOpts{perms: []app.Permission{app.PermissionWebhooksRead, app.PermissionAuditRead}}), nil)
	require.Equal(t, "FORBIDDEN", toolErr(t, noRedrive, "redrive_webhook_delivery", map[string]any{"deliveryId": deliveryID, "confirm": true}).Code)

	toolOK(t, cs, "redrive_webhook_delivery", map[string]any{"deliveryId": deliveryID, "confirm": true}, &got)
	require.Equal(t, "PENDING", got.State)
	require.Equal(t, d.IdempotencyKey, got.IdempotencyKey, "the same webhook-id")
	e := toolErr(t, cs, "redrive_webhook_delivery", map[string]any{"deliveryId": deliveryID, "confirm": true})
	require.Equal(t, "INVALID_STATE", e.Code)

	// The redrive is audited as the caller.
	var page mcpEventPage
	toolOK(t, cs, "search_audit_events", map[string]any{"projectId": projectA, "filter": map[string]any{"action": "webhook.delivery.redriven"}}, &page)
	require.Len(t, page.Events, 1)
	require.Equal(t, "oncall", page.Events[0].Subject.ID)
	require.Equal(t, "oncall", page.Events[0].RecordedBy.Subject)
}

func TestMCPExportTools(t *testing.T) {
	t.Parallel()
	b := setupMCP(t)
	b.record(t, b.token(t, tokenOpts{}), eventInput(projectA, "device.rebooted"))
	cs := b.mcpSession(t, b.tokenAs(t, "auditor", mcpPerms...), nil)

	type exportOut struct {
		ID        string  `json:"id"`
		State     string  `json:"state"`
		Kind      string  `json:"kind"`
		From      *string `json:"from"`
		ObjectRef *string `json:"objectRef"`
	}
	var list struct {
		Exports     []exportOut `json:"exports"`
		HasNextPage bool        `json:"hasNextPage"`
	}
	in := map[string]any{"projectId": projectA, "kind": "AUDIT", "format": "NDJSON", "from": exportFrom, "to": exportTo}
	e := toolErr(t, cs, "request_data_export", in)
	require.Equal(t, "CONFIRMATION_REQUIRED", e.Code)
	toolOK(t, cs, "list_data_exports", map[string]any{"projectId": projectA}, &list)
	require.Empty(t, list.Exports, "an unconfirmed request creates nothing")

	in["confirm"] = true
	var ex exportOut
	toolOK(t, cs, "request_data_export", in, &ex)
	require.Equal(t, "QUEUED", ex.State)
	require.Equal(t, exportFrom, *ex.From)
	require.Nil(t, ex.ObjectRef)
	toolOK(t, cs, "list_data_exports", map[string]any{"projectId": projectA, "state": "QUEUED"}, &list)
	require.Len(t, list.Exports, 1)
	require.Equal(t, ex.ID, list.Exports[0].ID)
	toolOK(t, cs, "list_data_exports", map[string]any{"projectId": projectA, "kind": "TELEMETRY"}, &list)
	require.Empty(t, list.Exports)

	bad := map[string]any{"projectId": projectA, "kind": "AUDIT", "format": "NDJSON", "from": exportTo, "to": exportFrom, "confirm": true}
	e = toolErr(t, cs, "request_data_export", bad)
	require.Equal(t, "BAD_USER_INPUT", e.Code)
	require.Equal(t, "to", e.Field)
	require.Equal(t, "BAD_USER_INPUT", toolErr(t, cs, "list_data_exports", map[string]any{"projectId": projectA, "after": "?"}).Code)
	noWrite := b.mcpSession(t, b.token(t, tokenOpts{perms: []app.Permission{app.PermissionExportsRead}}), nil)
	require.Equal(t, "FORBIDDEN", toolErr(t, noWrite, "request_data_export", in).Code)
	noRead := b.mcpSession(t, b.token(t, tokenOpts{perms: []app.Permission{app.PermissionAuditRead}}), nil)
	require.Equal(t, "FORBIDDEN", toolErr(t, noRead, "list_data_exports", map[string]any{"projectId": projectA}).Code)

	// The request is audited as the caller.
	var page mcpEventPage
	toolOK(t, cs, "search_audit_events", map[string]any{"projectId": projectA, "filter": map[string]any{"action": "export.requested"}}, &page)
	require.Len(t, page.Events, 1)
	require.Equal(t, "auditor", page.Events[0].Subject.ID)
	require.Equal(t, "auditor", page.Events[0].RecordedBy.Subject)
}

func TestMCPIsolation(t *testing.T) {
	t.Parallel()
	b := setupMCP(t)
	deliveryID := b.deadLetter(t)
	ctx := context.Background()
	ownCS := b.mcpSession(t, b.token(t, tokenOpts{perms: mcpPerms}), nil)
	var own mcpEvent
	toolOK(t, ownCS, "get_audit_event", map[string]any{"projectId": projectA, "sequence": "1"}, &own)
	var ex struct{ ID string }
	toolOK(t, ownCS, "request_data_export", map[string]any{"projectId": projectA, "kind": "AUDIT", "format": "CSV", "from": exportFrom, "to": exportTo, "confirm": true}, &ex)

	// Tenant B, with a project of the same name and every permission, sees
	// nothing of tenant A's.
	other := b.mcpSession(t, b.token(t, tokenOpts{tenant: tenantB, perms: mcpPerms}), nil)
	var page mcpEventPage
	toolOK(t, other, "search_audit_events", map[string]any{"projectId": projectA}, &page)
	require.Empty(t, page.Events)
	require.Equal(t, "NOT_FOUND", toolErr(t, other, "get_audit_event", map[string]any{"projectId": projectA, "id": own.ID}).Code)
	require.Equal(t, "NOT_FOUND", toolErr(t, other, "get_audit_event", map[string]any{"projectId": projectA, "sequence": "1"}).Code)
	var v struct {
		CheckedCount string `json:"checkedCount"`
	}
	toolOK(t, other, "verify_audit_chain", map[string]any{"projectId": projectA}, &v)
	require.Equal(t, "0", v.CheckedCount)
	var deliveries struct{ Deliveries []any }
	toolOK(t, other, "list_webhook_deliveries", map[string]any{"projectId": projectA}, &deliveries)
	require.Empty(t, deliveries.Deliveries)
	require.Equal(t, "NOT_FOUND", toolErr(t, other, "get_webhook_delivery", map[string]any{"deliveryId": deliveryID}).Code)
	require.Equal(t, "NOT_FOUND", toolErr(t, other, "redrive_webhook_delivery", map[string]any{"deliveryId": deliveryID, "confirm": true}).Code)
	var exports struct{ Exports []any }
	toolOK(t, other, "list_data_exports", map[string]any{"projectId": projectA}, &exports)
	require.Empty(t, exports.Exports)

	// Tenant A's resources answer tenant B as missing ones.
	for _, uri := range []string{mcpserver.EventsURI(tenantA, projectA, nil), mcpserver.EventURI(tenantA, projectA, 1)} {
		_, err := other.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		requireResourceNotFound(t, err)
		_, err = ownCS.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		require.NoError(t, err)
	}
	requireResourceNotFound(t, other.Subscribe(ctx, &mcp.SubscribeParams{URI: mcpserver.EventsURI(tenantA, projectA, nil)}))
	_, err := ownCS.ReadResource(ctx, &mcp.ReadResourceParams{URI: mcpserver.EventsURI(tenantA, projectB, nil)})
	requireResourceNotFound(t, err)

	// A session belongs to the tenant and subject that opened it.
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{}}`
	req, err := http.NewRequest(http.MethodPost, b.url+"/mcp", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", ownCS.ID())
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp := do(t, req, b.token(t, tokenOpts{tenant: tenantB, perms: mcpPerms}))
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
}

// requireResourceNotFound fails unless err is the SDK's resource-not-found
// error.
func requireResourceNotFound(t *testing.T, err error) {
	t.Helper()
	var wire *jsonrpc.Error
	require.ErrorAs(t, err, &wire)
	require.Equal(t, int64(mcp.CodeResourceNotFound), wire.Code, "%v", err)
}

func TestMCPResources(t *testing.T) {
	t.Parallel()
	b := setupMCP(t)
	b.recordN(t, b.token(t, tokenOpts{}), 3, "device.rebooted")
	cs := b.mcpSession(t, b.token(t, tokenOpts{}), nil)
	ctx := context.Background()

	read := func(uri string) mcpserver.EventsPage {
		t.Helper()
		res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		require.NoError(t, err)
		require.Len(t, res.Contents, 1)
		require.Equal(t, "application/json", res.Contents[0].MIMEType)
		var p mcpserver.EventsPage
		var raw struct {
			Events []mcpEvent `json:"events"`
		}
		require.NoError(t, json.Unmarshal([]byte(res.Contents[0].Text), &raw))
		require.NoError(t, json.Unmarshal([]byte(res.Contents[0].Text), &p))
		for i, e := range raw.Events {
			require.Equal(t, strconv.FormatUint(p.Events[i].Sequence, 10), e.Sequence)
		}
		return p
	}
	seqsOf := func(p mcpserver.EventsPage) []uint64 {
		var out []uint64
		for _, e := range p.Events {
			out = append(out, e.Sequence)
		}
		return out
	}
	latest := read(mcpserver.EventsURI(tenantA, projectA, nil))
	require.Equal(t, []uint64{1, 2, 3}, seqsOf(latest))
	require.Equal(t, mcpserver.EventsURI(tenantA, projectA, new(uint64(3))), latest.Next)
	after := read(mcpserver.EventsURI(tenantA, projectA, new(uint64(1))))
	require.Equal(t, []uint64{2, 3}, seqsOf(after))
	empty := read(latest.Next)
	require.Empty(t, empty.Events)
	require.Equal(t, latest.Next, empty.Next)

	res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: mcpserver.EventURI(tenantA, projectA, 2)})
	require.NoError(t, err)
	var one mcpEvent
	require.NoError(t, json.Unmarshal([]byte(res.Contents[0].Text), &one))
	require.Equal(t, "2", one.Sequence)
	_, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: mcpserver.EventURI(tenantA, projectA, 9)})
	requireResourceNotFound(t, err)
	_, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "aether://" + tenantA + "/" + projectA + "/events?after=x"})
	require.Error(t, err)
}

func TestMCPResourceSubscription(t *testing.T) {
	t.Parallel()
	b := setupMCP(t)
	writer := b.token(t, tokenOpts{})
	reader := b.token(t, tokenOpts{perms: []app.Permission{app.PermissionAuditRead}})
	ctx := context.Background()
	b.recordN(t, writer, 1, "device.rebooted") // before the subscription: not notified

	// next waits for the next update and reads the event it names.
	next := func(cs *mcp.ClientSession, updated <-chan string) uint64 {
		t.Helper()
		select {
		case uri := <-updated:
			res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
			require.NoError(t, err)
			var e mcpEvent
			require.NoError(t, json.Unmarshal([]byte(res.Contents[0].Text), &e))
			require.Equal(t, mcpserver.EventURI(tenantA, projectA, mustUint(t, e.Sequence)), uri)
			return mustUint(t, e.Sequence)
		case <-time.After(20 * time.Second):
			t.Fatal("no resource update")
			return 0
		}
	}
	updated := make(chan string, 100)
	cs := b.mcpSession(t, reader, updated)
	require.Error(t, cs.Subscribe(ctx, &mcp.SubscribeParams{URI: mcpserver.EventURI(tenantA, projectA, 1)}), "an event never changes")
	require.NoError(t, cs.Subscribe(ctx, &mcp.SubscribeParams{URI: mcpserver.EventsURI(tenantA, projectA, nil)}))
	b.recordN(t, writer, 2, "device.rebooted")
	b.record(t, writer, eventInput(projectA, "user.login"))
	var got []uint64
	for range 3 {
		got = append(got, next(cs, updated))
	}
	require.Equal(t, []uint64{2, 3, 4}, got, "each event recorded during the session, in order")
	last := got[len(got)-1]
	require.NoError(t, cs.Close())

	// Events recorded while no one listens are replayed after the last one
	// seen, then the subscription goes on live: no gap, nothing twice.
	b.recordN(t, writer, 3, "device.rebooted")
	updated2 := make(chan string, 100)
	cs2 := b.mcpSession(t, reader, updated2)
	require.NoError(t, cs2.Subscribe(ctx, &mcp.SubscribeParams{URI: mcpserver.EventsURI(tenantA, projectA, &last)}))
	got = nil
	for range 3 {
		got = append(got, next(cs2, updated2))
	}
	require.Equal(t, []uint64{5, 6, 7}, got)
	b.recordN(t, writer, 2, "device.rebooted")
	got = append(got, next(cs2, updated2), next(cs2, updated2))
	require.Equal(t, []uint64{5, 6, 7, 8, 9}, got)

	// After unsubscribing, nothing more arrives.
	require.NoError(t, cs2.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: mcpserver.EventsURI(tenantA, projectA, &last)}))
	b.recordN(t, writer, 1, "device.rebooted")
	probe := b.mcpSession(t, reader, nil) // the server answers requests in order: by now a notification would be queued
	toolOK(t, probe, "get_audit_event", map[string]any{"projectId": projectA, "sequence": "10"}, new(mcpEvent))
	require.NoError(t, cs2.Ping(ctx, nil))
	require.Empty(t, updated2)
	require.False(t, slices.Contains(got, 10))
}

func mustUint(t *testing.T, s string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(s, 10, 64)
	require.NoError(t, err)
	return n
}

func TestMCPOriginAndAuthentication(t *testing.T) {
	t.Parallel()
	b := setupMCP(t)
	token := b.token(t, tokenOpts{})
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	post := func(origin, token string) *http.Response {
		req, err := http.NewRequest(http.MethodPost, b.url+"/mcp", strings.NewReader(initialize))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		return do(t, req, token)
	}
	for _, origin := range []string{"https://evil.example", "http://localhost:1234", "null"} {
		resp := post(origin, token)
		require.Equal(t, http.StatusForbidden, resp.StatusCode, origin)
		var body struct {
			Error struct {
				Data struct{ Code string }
			}
		}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
		require.Equal(t, "FORBIDDEN", body.Error.Data.Code)
	}
	for _, origin := range []string{"", "https://allowed.example", b.url} {
		resp := post(origin, token)
		require.Equal(t, http.StatusOK, resp.StatusCode, origin)
		require.NotEmpty(t, resp.Header.Get("Mcp-Session-Id"))
	}
	// The SDK's client refused by the Origin check.
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	_, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: b.url + "/mcp",
		HTTPClient: &http.Client{Transport: bearerTransport{token: token, header: http.Header{"Origin": {"https://evil.example"}}}}}, nil)
	require.Error(t, err)

	for _, tok := range []string{"", "not-a-token", b.token(t, tokenOpts{ttl: time.Minute, now: time.Now().Add(-time.Hour)})} {
		resp := post("", tok)
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
		require.Equal(t, `Bearer realm="aether"`, resp.Header.Get("WWW-Authenticate"))
	}
}
