package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
)

// TestRESTListEncodesTheEventShape: the REST list body is byte for byte
// what encoding/json writes for the page's events (the public event shape)
// and its cursor, with and without a next page.
func TestRESTListEncodesTheEventShape(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	tok := b.token(t, tokenOpts{})
	in := eventInput(projectA, "device.first")
	in["subject"] = map[string]any{"type": "USER", "id": "u-1", "displayName": "<b>Ada</b> & \u2028 é"}
	in["details"] = map[string]any{"b": []any{1, "x<y"}, "a": nil}
	b.record(t, tok, in, eventInput(projectA, "device.second"))
	reader := app.Identity{TenantID: tenantA, ProjectIDs: []string{projectA}, Permissions: []app.Permission{app.PermissionAuditRead}}

	for _, first := range []int{1, 50} {
		page, err := b.app.SearchAuditEvents(context.Background(), reader, app.SearchAuditEventsInput{ProjectID: projectA, First: &first})
		require.NoError(t, err)
		want := struct {
			Events     []domain.AuditEvent `json:"events"`
			NextCursor *string             `json:"nextCursor"`
		}{Events: []domain.AuditEvent{}}
		for _, e := range page.Edges {
			want.Events = append(want.Events, e.Event)
		}
		if page.HasNextPage {
			want.NextCursor = &page.EndCursor
		}
		wantRaw, err := json.Marshal(want)
		require.NoError(t, err)

		resp := b.getPath(t, tok, "/api/v1/audit/events?projectId="+projectA+"&limit="+map[int]string{1: "1", 50: "50"}[first])
		raw, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", raw)
		require.Equal(t, string(wantRaw)+"\n", string(raw), "limit %d", first)
	}
}
