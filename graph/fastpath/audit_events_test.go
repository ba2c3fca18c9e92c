package fastpath_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/graph"
	"github.com/aetheriot/aether-audit/graph/fastpath"
	"github.com/aetheriot/aether-audit/graph/generated"
	"github.com/aetheriot/aether-audit/store"
	"github.com/aetheriot/aether-audit/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

func newHandler(a *app.App, fast bool) (http.Handler, *fastpath.Paths) {
	es := generated.NewExecutableSchema(generated.Config{Resolvers: &graph.Resolver{App: a}, Complexity: graph.Complexity()})
	srv := handler.New(es)
	srv.AddTransport(transport.POST{})
	paths := fastpath.New(fastpath.Config{App: a, Schema: es, MaxDepth: 20, MaxComplexity: 1_000_000})
	if fast {
		srv.AroundRootFields(paths.AroundRootFields)
	}
	return srv, paths
}

func post(t *testing.T, h http.Handler, id app.Identity, query string, vars map[string]any) string {
	t.Helper()
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	require.NoError(t, err)
	req := httptest.NewRequest(http.MethodPost, "/graphql", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req = req.WithContext(app.ContextWithIdentity(req.Context(), id))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Body.String()
}

// TestAuditEventsFastPathMatchesExecutor runs many selections through the
// generic executor and through the fast path: the responses must be equal
// byte for byte, and the fast path must have served the pages it can.
func TestAuditEventsFastPathMatchesExecutor(t *testing.T) {
	a := app.New(store.New(storetest.NewPool(t)), app.Config{})
	ctx := context.Background()
	writer := app.Identity{TenantID: "t1", ProjectIDs: []string{"p1"}, Permissions: []app.Permission{app.PermissionAuditWrite}}
	reader := app.Identity{TenantID: "t1", ProjectIDs: []string{"p1"}, Permissions: []app.Permission{app.PermissionAuditRead}}

	base := time.Date(2026, 11, 1, 8, 0, 0, 123456000, time.UTC)
	var drafts []domain.AuditEventDraft
	for i := range 12 {
		d := domain.AuditEventDraft{
			ProjectID:  "p1",
			Action:     []string{"device.firmware.updated", "user.login", "alarm.raised"}[i%3],
			OccurredAt: base.Add(time.Duration(i) * time.Minute),
			Subject:    domain.Subject{Type: domain.SubjectUser, ID: fmt.Sprintf("u%d", i%4), DisplayName: "Ada \"the\" <Countess>\n\u2028é"},
			Resource:   domain.Resource{Type: "device", ID: fmt.Sprintf("d%d", i%2)},
			Outcome:    []domain.Outcome{domain.OutcomeSuccess, domain.OutcomeDenied, domain.OutcomeError}[i%3],
			Details:    json.RawMessage(`{"n":1.50,"s":"a\"b<&>","nested":{"z":[true,null]}}`),
		}
		if i%2 == 0 {
			d.Governance = &domain.Governance{Reason: "why", Ticket: "OPS-1", Risk: domain.RiskHigh}
		}
		if i%3 == 0 {
			d.Correlation = &domain.Correlation{TraceID: "0af7651916cd43dd8448eb211c80319c", RequestID: "r"}
		}
		for range i % 3 {
			d.EvidenceDigests = append(d.EvidenceDigests, domain.EvidenceDigest{Algorithm: "sha256", Value: "ab", Label: "l"})
		}
		drafts = append(drafts, d)
	}
	_, err := a.RecordAuditEvents(ctx, writer, app.RecordAuditEventsInput{Events: drafts})
	require.NoError(t, err)

	slow, _ := newHandler(a, false)
	fast, paths := newHandler(a, true)
	const all = `id tenantId projectId sequence action occurredAt recordedAt
		subject { type id displayName } resource { type id } outcome
		governance { reason ticket risk confirmedBy } correlation { traceId requestId causationId }
		evidenceDigests { algorithm value label } details chainHash`
	cursor := app.EncodeCursor(domain.OldestFirst, 3)

	cases := []struct {
		name  string
		query string
		vars  map[string]any
		fast  bool // whether the fast path should serve it
	}{
		{"all fields", `{ auditEvents(projectId: "p1") { edges { cursor node { ` + all + ` } } pageInfo { hasNextPage endCursor } } }`, nil, true},
		{"fragment and typename", `query { auditEvents(projectId: "p1", first: 5) { __typename edges { __typename node { ...E } } pageInfo { __typename endCursor } } }
			fragment E on AuditEvent { __typename id subject { __typename id } governance { __typename risk } evidenceDigests { __typename label } }`, nil, true},
		{"aliases and duplicates", `{ auditEvents(projectId: "p1", first: 3) { e: edges { c: cursor n: node { i: id id s: sequence action a: action } } p: pageInfo { more: hasNextPage } } }`, nil, true},
		{"skip and include", `query($yes: Boolean!, $no: Boolean!) { auditEvents(projectId: "p1") { edges { node { id @include(if: $yes) action @skip(if: $yes) outcome @include(if: $no) correlation @skip(if: $no) { traceId } } } } }`,
			map[string]any{"yes": true, "no": false}, true},
		{"inline fragments", `{ auditEvents(projectId: "p1") { edges { node { ... on AuditEvent { action resource { id } } ... { sequence } } } } }`, nil, true},
		{"variables, order and filter", `query($p: ID!, $f: AuditEventFilter, $n: Int, $o: AuditOrder) { auditEvents(projectId: $p, filter: $f, first: $n, order: $o) { edges { node { sequence outcome } } pageInfo { hasNextPage endCursor } } }`,
			map[string]any{"p": "p1", "n": 4, "o": "NEWEST_FIRST", "f": map[string]any{"outcome": []string{"SUCCESS", "ERROR"}, "sequenceFrom": "2", "occurredFrom": "2026-11-01T08:01:00Z", "action": "device.*"}}, true},
		{"literal filter", `{ auditEvents(projectId: "p1", filter: {subjectId: "u1", resourceType: "device", resourceId: "d1", sequenceTo: "11", occurredTo: "2026-11-01T09:00:00Z"}) { edges { node { sequence } } } }`, nil, true},
		{"after cursor", `query($c: String) { auditEvents(projectId: "p1", first: 2, after: $c) { edges { cursor node { sequence } } pageInfo { hasNextPage endCursor } } }`,
			map[string]any{"c": cursor}, true},
		{"empty page", `{ auditEvents(projectId: "p1", filter: {subjectId: "nobody"}) { edges { node { id } } pageInfo { hasNextPage endCursor } } }`, nil, true},
		{"two node selections fall back", `{ auditEvents(projectId: "p1") { edges { a: node { id } b: node { action } } } }`, nil, false},
		{"bad cursor falls back", `{ auditEvents(projectId: "p1", after: "nope") { edges { cursor } } }`, nil, false},
		{"bad uint64 falls back", `{ auditEvents(projectId: "p1", filter: {sequenceFrom: "x"}) { edges { cursor } } }`, nil, false},
		{"other project falls back", `{ auditEvents(projectId: "p2") { edges { cursor } } }`, nil, false},
		{"another root field alongside", `{ a: auditEvents(projectId: "p1", first: 1) { edges { cursor } } v: verifyAuditChain(projectId: "p1") { valid headHash } }`, nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := paths.PagesServed()
			want := post(t, slow, reader, tc.query, tc.vars)
			got := post(t, fast, reader, tc.query, tc.vars)
			require.Equal(t, want, got)
			if tc.fast {
				require.Greater(t, paths.PagesServed(), before, "the fast path served it")
			} else {
				require.Equal(t, before, paths.PagesServed(), "the executor served it")
			}
		})
	}
}
