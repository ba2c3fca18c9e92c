package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/app"
)

// mcpProgress collects the progress notifications an MCP client receives.
type mcpProgress struct {
	mu    sync.Mutex
	items []*mcp.ProgressNotificationParams
}

func (p *mcpProgress) add(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.items = append(p.items, req.Params)
}

// take awaits n notifications (they may be handled after the call's
// result), returns those received and forgets them.
func (p *mcpProgress) take(t *testing.T, n int) []*mcp.ProgressNotificationParams {
	t.Helper()
	require.Eventually(t, func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.items) >= n
	}, 10*time.Second, 5*time.Millisecond)
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.items
	p.items = nil
	return out
}

// progressOf is the progress values of notifications.
func progressOf(ns []*mcp.ProgressNotificationParams) (progress, total []float64) {
	for _, n := range ns {
		progress, total = append(progress, n.Progress), append(total, n.Total)
	}
	return progress, total
}

// mcpVerification is the part of verify_audit_chain's result the tests read.
type mcpVerification struct {
	Valid                bool    `json:"valid"`
	Complete             bool    `json:"complete"`
	ResumeToken          *string `json:"resumeToken"`
	CheckedCount         string  `json:"checkedCount"`
	SequenceReached      string  `json:"sequenceReached"`
	FirstInvalidSequence *string `json:"firstInvalidSequence"`
	HeadSequence         string  `json:"headSequence"`
}

// TestMCPVerifyWholeRange: verify_audit_chain verifies a project longer
// than one step of the verification (1,200 events) in one call, through
// the app's verification stream, and reports each step as an MCP progress
// notification to a client that sent a progressToken (none to one that
// did not); tampering past the first step is its verdict.
func TestMCPVerifyWholeRange(t *testing.T) {
	t.Parallel()
	b := setupApp(t, app.Config{Verify: verifyLimits}, nil)
	t.Cleanup(func() { b.server.Shutdown(context.Background()) })
	for range 3 {
		b.recordN(t, b.token(t, tokenOpts{}), 1000, "device.updated")
	}
	var progress mcpProgress
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{ProgressNotificationHandler: progress.add})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: b.url + "/mcp",
		HTTPClient: &http.Client{Transport: bearerTransport{token: b.token(t, tokenOpts{perms: []app.Permission{app.PermissionAuditRead}})}}}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })

	verify := func(args map[string]any, token any) mcpVerification {
		t.Helper()
		params := &mcp.CallToolParams{Name: "verify_audit_chain", Arguments: args}
		if token != nil {
			params.SetProgressToken(token)
		}
		res, err := cs.CallTool(ctx, params)
		require.NoError(t, err)
		require.False(t, res.IsError, toolText(res))
		raw, err := json.Marshal(res.StructuredContent)
		require.NoError(t, err)
		var v mcpVerification
		require.NoError(t, json.Unmarshal(raw, &v), "%s", raw)
		return v
	}

	v := verify(map[string]any{"projectId": projectA}, "whole")
	require.True(t, v.Valid)
	require.True(t, v.Complete)
	require.Nil(t, v.ResumeToken)
	require.Equal(t, "3000", v.CheckedCount)
	require.Equal(t, "3000", v.SequenceReached)
	got, total := progressOf(progress.take(t, 2))
	require.Equal(t, []float64{1200, 2400}, got)
	require.Equal(t, []float64{3000, 3000}, total)

	// A sub-range: its total is its own length.
	v = verify(map[string]any{"projectId": projectA, "fromSequence": "101", "toSequence": "2600"}, 7)
	require.True(t, v.Valid)
	require.Equal(t, "2500", v.CheckedCount)
	got, total = progressOf(progress.take(t, 2))
	require.Equal(t, []float64{1200, 2400}, got)
	require.Equal(t, []float64{2500, 2500}, total)

	// Without a progressToken: the verdict alone.
	v = verify(map[string]any{"projectId": projectA}, nil)
	require.True(t, v.Valid)
	require.Empty(t, progress.take(t, 0))

	// Tampering past the first step is found in the same call.
	b.tamperEvent(t, 1500)
	v = verify(map[string]any{"projectId": projectA}, "tampered")
	require.False(t, v.Valid)
	require.True(t, v.Complete)
	require.Equal(t, "1500", *v.FirstInvalidSequence)
	require.Equal(t, "1499", v.CheckedCount)
	got, _ = progressOf(progress.take(t, 1))
	require.Equal(t, []float64{1200}, got)
}

// TestMCPVerificationsPerSession: an MCP session runs at most
// StreamsPerConnection verify_audit_chain calls at once, as a GraphQL
// WebSocket runs that many auditChainVerification subscriptions: while
// one runs (its read held by a lock), another call of the same session is
// a QUOTA_EXCEEDED tool error, another session of the same identity runs
// its own, and the session's slot comes back when its call ends.
func TestMCPVerificationsPerSession(t *testing.T) {
	t.Parallel()
	limits := verifyLimits
	limits.StreamsPerConnection = 1
	b := &mcpBundle{testBundle: setupApp(t, app.Config{Verify: limits}, nil)}
	t.Cleanup(func() { b.server.Shutdown(context.Background()) })
	b.recordN(t, b.token(t, tokenOpts{}), 10, "device.updated")
	tok := b.token(t, tokenOpts{perms: []app.Permission{app.PermissionAuditRead}})
	s1, s2 := b.mcpSession(t, tok, nil), b.mcpSession(t, tok, nil)
	verify := func(cs *mcp.ClientSession) <-chan *mcp.CallToolResult {
		out := make(chan *mcp.CallToolResult, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "verify_audit_chain", Arguments: map[string]any{"projectId": projectA}})
			if err != nil {
				res = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}
			}
			out <- res
		}()
		return out
	}
	requireValid := func(res *mcp.CallToolResult) {
		t.Helper()
		require.False(t, res.IsError, toolText(res))
		raw, err := json.Marshal(res.StructuredContent)
		require.NoError(t, err)
		var v mcpVerification
		require.NoError(t, json.Unmarshal(raw, &v), "%s", raw)
		require.True(t, v.Valid)
		require.Equal(t, "10", v.CheckedCount)
	}

	unlock := b.lockAuditEvents(t)
	first := verify(s1)
	b.requireWaitingReads(t, 1)
	second := <-verify(s1)
	require.True(t, second.IsError, toolText(second))
	require.Contains(t, toolText(second), "QUOTA_EXCEEDED")
	raw, err := json.Marshal(second.StructuredContent)
	require.NoError(t, err)
	require.Contains(t, string(raw), `"code":"QUOTA_EXCEEDED"`)
	other := verify(s2)
	b.requireWaitingReads(t, 2)
	unlock()
	requireValid(<-first)
	requireValid(<-other)
	// The session's slot came back with its call's end.
	requireValid(<-verify(s1))
}
