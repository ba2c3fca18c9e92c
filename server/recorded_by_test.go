package server_test

import (
	"net/url"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"
)

// TestRecordedByOverHTTP: a token's iss, sub, jti and azp become the
// event's recordedBy in every interface; a recordedBy in the input is
// refused; the recorder and correlation filters work in GraphQL, REST and
// SSE alike.
func TestRecordedByOverHTTP(t *testing.T) {
	b := setup(t, nil)
	now := time.Now()
	gateway, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"sub": "plant-gateway", "iss": "https://idp.example", "jti": "tok-42", "azp": "gateway-client",
		"tenant_id": tenantA, "project_ids": []any{projectA}, "permissions": []any{"audit:write", "audit:read"},
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(),
	}).SignedString(b.secret)
	require.NoError(t, err)
	tester := b.token(t, tokenOpts{})

	withRequest := eventInput(projectA, "device.updated")
	withRequest["correlation"] = map[string]any{"requestId": "req-7"}
	b.record(t, gateway, withRequest)
	b.record(t, tester, eventInput(projectA, "device.updated"))

	// GraphQL: recordedBy and chainVersion, filtered by recorder.
	res := b.graphql(t, tester, `query($p: ID!, $f: AuditEventFilter) { auditEvents(projectId: $p, filter: $f) {
	  edges { node { sequence chainVersion recordedBy { issuer subject tokenId clientId } } } } }`,
		map[string]any{"p": projectA, "f": map[string]any{"recordedBySubject": "plant-gateway"}})
	var data struct {
		AuditEvents struct {
			Edges []struct {
				Node struct {
					Sequence     string
					ChainVersion int
					RecordedBy   map[string]string
				}
			}
		}
	}
	res.decode(t, &data)
	require.Len(t, data.AuditEvents.Edges, 1)
	n := data.AuditEvents.Edges[0].Node
	require.Equal(t, "1", n.Sequence)
	require.Equal(t, 2, n.ChainVersion)
	require.Equal(t, map[string]string{"issuer": "https://idp.example", "subject": "plant-gateway", "tokenId": "tok-42", "clientId": "gateway-client"}, n.RecordedBy)

	// A client-sent recordedBy is not an input field.
	forged := eventInput(projectA, "device.updated")
	forged["recordedBy"] = map[string]any{"subject": "someone-else"}
	res = b.graphql(t, tester, recordEventsMutation, map[string]any{"in": map[string]any{"events": []any{forged}}})
	require.Equal(t, "BAD_USER_INPUT", res.code(t), "an unknown input field in variables")
	require.Equal(t, 2, b.count(t, tester))

	// REST: the same filters as query parameters.
	l := b.restList(t, tester, url.Values{"projectId": {projectA}, "recordedBySubject": {"tester"}})
	require.Equal(t, []string{"2"}, restSeqs(l))
	rec, _ := l.Events[0]["recordedBy"].(map[string]any)
	require.Equal(t, "tester", rec["subject"])
	require.EqualValues(t, 2, l.Events[0]["chainVersion"])
	l = b.restList(t, tester, url.Values{"projectId": {projectA}, "correlation.requestId": {"req-7"}})
	require.Equal(t, []string{"1"}, restSeqs(l))

	// SSE: the same.
	resp := b.getPath(t, tester, "/api/v1/audit/events/stream?"+url.Values{"projectId": {projectA}, "recordedBySubject": {"plant-gateway"}}.Encode())
	events := readSSE(t, resp.Body)
	resp.Body.Close()
	require.Len(t, events, 1)
	require.Equal(t, "1", events[0].id)
}
