package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/mcpserver"
)

// mcpStdio starts `aether mcp` against base with token (written to a
// file) and connects the SDK's client to it over stdio; updated, when
// given, receives the URI of every resource update.
func mcpStdio(t *testing.T, base, token string, updated chan<- string) *mcp.ClientSession {
	t.Helper()
	opts := &mcp.ClientOptions{}
	if updated != nil {
		opts.ResourceUpdatedHandler = func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			updated <- req.Params.URI
		}
	}
	return mcpStdioWith(t, base, token, opts)
}

// mcpStdioWith is mcpStdio with the client's options.
func mcpStdioWith(t *testing.T, base, token string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	file := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(file, []byte(token+"\n"), 0o600))
	cmd := exec.Command(aetherBin, "mcp", "--url", base, "--token-file", file)
	cmd.Env = baseEnv()
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, opts).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	require.NoError(t, err, "stderr: %s", stderr)
	t.Cleanup(func() {
		_ = cs.Close()
		if t.Failed() {
			t.Logf("aether mcp stderr:\n%s", stderr)
		}
	})
	return cs
}

// stdioTool calls a tool; it returns its structured content (decoded into
// out when it succeeded) and its error when it failed.
func stdioTool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any, out any) *mcpserver.Error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	require.NoError(t, err)
	raw, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	if res.IsError {
		var body struct{ Error *mcpserver.Error }
		require.NoError(t, json.Unmarshal(raw, &body), "%v", res.Content)
		require.NotNil(t, body.Error)
		return body.Error
	}
	if out != nil {
		require.NoError(t, json.Unmarshal(raw, out), "%s", raw)
	}
	return nil
}

func TestMCPStdio(t *testing.T) {
	t.Parallel()
	s := serveReady(t)
	perms := "audit:read,audit:write,webhooks:read,deliveries:redrive,exports:read,exports:write"
	owner := mintToken(t, s.dir, "--tenant", "acme", "--project", "plant-1", "--subject", "investigator", "--permissions", perms)
	record := func(n int) {
		t.Helper()
		for range n {
			_, errs := postGraphQL(t, s.base, owner, `mutation($in: RecordAuditEventInput!) { recordAuditEvent(input: $in) { event { id } } }`,
				map[string]any{"in": map[string]any{
					"projectId": "plant-1", "action": "device.firmware.updated", "occurredAt": time.Now().UTC().Format(time.RFC3339Nano),
					"subject": map[string]any{"type": "SERVICE", "id": "updater"}, "resource": map[string]any{"type": "device", "id": "dev-1"},
					"outcome": "SUCCESS", "details": map[string]any{"version": "2.0.1"},
				}})
			require.Empty(t, errs)
		}
	}
	record(3)
	cs := mcpStdio(t, s.base, owner, nil)
	ctx := context.Background()

	var names []string
	for tool, err := range cs.Tools(ctx, nil) {
		require.NoError(t, err)
		names = append(names, tool.Name)
	}
	require.Len(t, names, 8)

	// The tools answer in the GraphQL API's shape.
	var page struct {
		Events      []map[string]any `json:"events"`
		HasNextPage bool             `json:"hasNextPage"`
		EndCursor   *string          `json:"endCursor"`
	}
	require.Nil(t, stdioTool(t, cs, "search_audit_events", map[string]any{"projectId": "plant-1", "first": 2, "filter": map[string]any{"action": "device.*"}}, &page))
	require.Len(t, page.Events, 2)
	require.True(t, page.HasNextPage)
	require.Nil(t, stdioTool(t, cs, "search_audit_events", map[string]any{"projectId": "plant-1", "after": *page.EndCursor}, &page))
	require.Len(t, page.Events, 1)
	require.Equal(t, "3", page.Events[0]["sequence"])
	data, errs := postGraphQL(t, s.base, owner, `query($id: ID!) { auditEvent(projectId: "plant-1", id: $id) {
  id tenantId projectId sequence action occurredAt recordedAt subject { type id displayName } resource { type id } outcome
  governance { reason ticket risk confirmedBy } correlation { traceId requestId causationId } evidenceDigests { algorithm value label }
  details chainHash chainVersion recordedBy { issuer subject tokenId clientId } } }`, map[string]any{"id": page.Events[0]["id"]})
	require.Empty(t, errs)
	var gql struct{ AuditEvent map[string]any }
	require.NoError(t, json.Unmarshal(data, &gql))
	var one map[string]any
	require.Nil(t, stdioTool(t, cs, "get_audit_event", map[string]any{"projectId": "plant-1", "id": page.Events[0]["id"]}, &one))
	require.Equal(t, gql.AuditEvent, one)
	require.Equal(t, "NOT_FOUND", stdioTool(t, cs, "get_audit_event", map[string]any{"projectId": "plant-1", "sequence": "9"}, nil).Code)
	require.Equal(t, "NOT_FOUND", stdioTool(t, cs, "get_audit_event", map[string]any{"projectId": "plant-1", "id": "00000000-0000-0000-0000-000000000000"}, nil).Code)
	var v struct {
		Valid        bool   `json:"valid"`
		CheckedCount string `json:"checkedCount"`
	}
	require.Nil(t, stdioTool(t, cs, "verify_audit_chain", map[string]any{"projectId": "plant-1"}, &v))
	require.True(t, v.Valid)
	require.Equal(t, "3", v.CheckedCount)
	require.Equal(t, "BAD_USER_INPUT", stdioTool(t, cs, "verify_audit_chain", map[string]any{"projectId": "plant-1", "resumeToken": "bm90LWEtdG9rZW4"}, nil).Code)
	e := stdioTool(t, cs, "search_audit_events", map[string]any{"projectId": "plant-1", "after": "bad"}, nil)
	require.Equal(t, "BAD_USER_INPUT", e.Code)
	require.Equal(t, "after", e.Field)

	// Webhook deliveries: none, and the commands' errors.
	var deliveries struct{ Deliveries []any }
	require.Nil(t, stdioTool(t, cs, "list_webhook_deliveries", map[string]any{"projectId": "plant-1", "state": "DEAD_LETTERED"}, &deliveries))
	require.Empty(t, deliveries.Deliveries)
	missing := "00000000-0000-0000-0000-000000000001"
	require.Equal(t, "NOT_FOUND", stdioTool(t, cs, "get_webhook_delivery", map[string]any{"deliveryId": missing}, nil).Code)
	require.Equal(t, "CONFIRMATION_REQUIRED", stdioTool(t, cs, "redrive_webhook_delivery", map[string]any{"deliveryId": missing}, nil).Code)
	require.Equal(t, "NOT_FOUND", stdioTool(t, cs, "redrive_webhook_delivery", map[string]any{"deliveryId": missing, "confirm": true}, nil).Code)

	// Exports: confirmation, then a request audited as the caller.
	in := map[string]any{"projectId": "plant-1", "kind": "AUDIT", "format": "NDJSON", "fromSequence": "1", "toSequence": "3"}
	require.Equal(t, "CONFIRMATION_REQUIRED", stdioTool(t, cs, "request_data_export", in, nil).Code)
	var exports struct {
		Exports []struct{ ID, State string }
	}
	require.Nil(t, stdioTool(t, cs, "list_data_exports", map[string]any{"projectId": "plant-1"}, &exports))
	require.Empty(t, exports.Exports)
	in["confirm"] = true
	var ex struct{ ID, State string }
	require.Nil(t, stdioTool(t, cs, "request_data_export", in, &ex))
	require.Equal(t, "QUEUED", ex.State)
	require.Nil(t, stdioTool(t, cs, "list_data_exports", map[string]any{"projectId": "plant-1"}, &exports))
	require.Len(t, exports.Exports, 1)
	require.Equal(t, ex.ID, exports.Exports[0].ID)
	require.Nil(t, stdioTool(t, cs, "search_audit_events", map[string]any{"projectId": "plant-1", "filter": map[string]any{"action": "export.requested"}}, &page))
	require.Len(t, page.Events, 1)
	require.Equal(t, "investigator", page.Events[0]["recordedBy"].(map[string]any)["subject"])

	// Another tenant's token sees nothing; a token without the permission
	// gets FORBIDDEN.
	other := mcpStdio(t, s.base, mintToken(t, s.dir, "--tenant", "globex", "--project", "plant-1", "--permissions", perms), nil)
	require.Nil(t, stdioTool(t, other, "search_audit_events", map[string]any{"projectId": "plant-1"}, &page))
	require.Empty(t, page.Events)
	_, err := other.ReadResource(ctx, &mcp.ReadResourceParams{URI: mcpserver.EventsURI("acme", "plant-1", nil)})
	var wire *jsonrpc.Error
	require.ErrorAs(t, err, &wire)
	require.Equal(t, int64(mcp.CodeResourceNotFound), wire.Code)
	writeOnly := mcpStdio(t, s.base, mintToken(t, s.dir, "--tenant", "acme", "--project", "plant-1", "--permissions", "audit:write"), nil)
	require.Equal(t, "FORBIDDEN", stdioTool(t, writeOnly, "verify_audit_chain", map[string]any{"projectId": "plant-1"}, nil).Code)

	// The events resource and its subscription, resumed after a reconnect.
	res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: mcpserver.EventsURI("acme", "plant-1", nil)})
	require.NoError(t, err)
	var latest mcpserver.EventsPage
	require.NoError(t, json.Unmarshal([]byte(res.Contents[0].Text), &latest))
	head := latest.Events[len(latest.Events)-1].Sequence // the export request's event
	next := func(updated <-chan string) uint64 {
		t.Helper()
		select {
		case uri := <-updated:
			n, err := strconv.ParseUint(uri[strings.LastIndexByte(uri, '/')+1:], 10, 64)
			require.NoError(t, err)
			require.Equal(t, mcpserver.EventURI("acme", "plant-1", n), uri)
			return n
		case <-time.After(20 * time.Second):
			t.Fatal("no resource update")
			return 0
		}
	}
	updated := make(chan string, 100)
	sub := mcpStdio(t, s.base, owner, updated)
	require.NoError(t, sub.Subscribe(ctx, &mcp.SubscribeParams{URI: mcpserver.EventsURI("acme", "plant-1", &head)}))
	record(3)
	got := []uint64{next(updated), next(updated), next(updated)}
	require.Equal(t, []uint64{head + 1, head + 2, head + 3}, got, "each event in order")
	require.NoError(t, sub.Close())

	record(2)
	updated2 := make(chan string, 100)
	sub2 := mcpStdio(t, s.base, owner, updated2)
	last := got[2]
	require.NoError(t, sub2.Subscribe(ctx, &mcp.SubscribeParams{URI: mcpserver.EventsURI("acme", "plant-1", &last)}))
	record(1)
	got = []uint64{next(updated2), next(updated2), next(updated2)}
	require.Equal(t, []uint64{last + 1, last + 2, last + 3}, got, fmt.Sprintf("resumed after %d", last))
}

// TestMCPStdioVerifyWholeRange: through `aether mcp` (the GraphQL backend),
// verify_audit_chain verifies a project longer than one verification step
// (2 events) in one call over the auditChainVerification subscription, and
// sends each progress item as an MCP progress notification.
func TestMCPStdioVerifyWholeRange(t *testing.T) {
	t.Parallel()
	s := serveReady(t, "AETHER_VERIFY_STEP_EVENTS=2")
	owner := mintToken(t, s.dir, "--tenant", "acme", "--project", "plant-1", "--permissions", "audit:read,audit:write")
	for i := range 5 {
		_, errs := postGraphQL(t, s.base, owner, `mutation($in: RecordAuditEventInput!) { recordAuditEvent(input: $in) { event { id } } }`,
			map[string]any{"in": map[string]any{
				"projectId": "plant-1", "action": "device.firmware.updated", "occurredAt": time.Now().UTC().Format(time.RFC3339Nano),
				"subject": map[string]any{"type": "SERVICE", "id": "updater"}, "resource": map[string]any{"type": "device", "id": fmt.Sprint("dev-", i)},
				"outcome": "SUCCESS",
			}})
		require.Empty(t, errs)
	}
	progress := make(chan *mcp.ProgressNotificationParams, 16)
	cs := mcpStdioWith(t, s.base, owner, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) { progress <- req.Params },
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	params := &mcp.CallToolParams{Name: "verify_audit_chain", Arguments: map[string]any{"projectId": "plant-1"}}
	params.SetProgressToken("p1")
	res, err := cs.CallTool(ctx, params)
	require.NoError(t, err)
	require.False(t, res.IsError, "%v", res.Content)
	raw, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	var v struct {
		Valid           bool    `json:"valid"`
		Complete        bool    `json:"complete"`
		CheckedCount    string  `json:"checkedCount"`
		SequenceReached string  `json:"sequenceReached"`
		ResumeToken     *string `json:"resumeToken"`
	}
	require.NoError(t, json.Unmarshal(raw, &v))
	require.True(t, v.Valid, "%s", raw)
	require.True(t, v.Complete)
	require.Nil(t, v.ResumeToken)
	require.Equal(t, "5", v.CheckedCount)
	require.Equal(t, "5", v.SequenceReached)
	for _, want := range []float64{2, 4} {
		select {
		case p := <-progress:
			require.Equal(t, "p1", p.ProgressToken)
			require.Equal(t, want, p.Progress)
			require.Equal(t, float64(5), p.Total)
			require.Contains(t, p.Message, fmt.Sprintf("verified through sequence %d of 5", int(want)))
		case <-ctx.Done():
			t.Fatalf("no progress notification for %v", want)
		}
	}
}
