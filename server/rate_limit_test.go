package server_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/app"
)

// TestRateLimitsAtEveryInterface: over its limit, an identity's mutation
// gets RATE_LIMITED with retryAfterSeconds (recording through the ingest
// fast path, other mutations through gqlgen's executor), a subscription start over WebSocket an operation error
// of that code, and a live SSE stream 429 with Retry-After; nothing is done.
func TestRateLimitsAtEveryInterface(t *testing.T) {
	b := setupApp(t, app.Config{RateLimits: app.RateLimitConfig{
		CommandsPerIdentity:      app.RateLimit{Rate: 0.01, Burst: 1},
		SubscriptionsPerIdentity: app.RateLimit{Rate: 0.01, Burst: 1},
	}}, nil)
	tok := b.token(t, tokenOpts{perms: []app.Permission{app.PermissionAuditWrite, app.PermissionAuditRead, app.PermissionWebhooksWrite}})

	b.record(t, tok, eventInput(projectA, "device.updated"))
	res := b.graphql(t, tok, recordEventMutation, map[string]any{"in": eventInput(projectA, "device.updated")})
	require.Len(t, res.Errors, 1, "%s", res.Raw)
	require.Equal(t, "RATE_LIMITED", res.Errors[0].Extensions["code"], "%s", res.Raw)
	require.EqualValues(t, 100, res.Errors[0].Extensions["retryAfterSeconds"], "%s", res.Raw)
	res = b.graphql(t, tok, createDestinationMutation, map[string]any{"in": map[string]any{"projectId": projectA, "url": "https://example.com/hook"}})
	require.Equal(t, "RATE_LIMITED", res.code(t))
	require.Equal(t, 1, b.count(t, tok), "the refused commands wrote nothing")

	ws := b.dialWS(t, tok)
	ws.subscribe("1", map[string]any{"p": projectA, "after": "0"})
	require.Equal(t, []uint64{1}, ws.sequences("1", 1))
	ws.subscribe("2", map[string]any{"p": projectA, "after": "0"})
	ws.requireOperationError("2", "RATE_LIMITED")

	resp := b.getPath(t, tok, "/api/v1/audit/events/stream?follow=true&projectId="+projectA)
	defer resp.Body.Close()
	require.Equal(t, "100", resp.Header.Get("Retry-After"))
	requireProblem(t, resp, http.StatusTooManyRequests, "RATE_LIMITED")
}
