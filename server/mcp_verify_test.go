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
