package fastpath_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/graph"
	"github.com/aetheriot/aether-audit/graph/fastpath"
	"github.com/aetheriot/aether-audit/graph/generated"
	"github.com/aetheriot/aether-audit/store"
	"github.com/aetheriot/aether-audit/store/storetest"
)

// recordSide is one server over its own database: the generic executor and,
// optionally, the fast path in front of it.
type recordSide struct {
	app     *app.App
	generic *handler.Server
	fast    *fastpath.Paths
}

func newRecordSide(t *testing.T, withFast bool) *recordSide {
	fixed := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	a := app.New(store.New(storetest.NewPool(t)), app.Config{Now: func() time.Time { return fixed }})
	r := &graph.Resolver{App: a}
	es := generated.NewExecutableSchema(generated.Config{Resolvers: r, Complexity: graph.Complexity()})
	srv := handler.New(es)
	srv.AddTransport(transport.POST{})
	srv.SetErrorPresenter(graph.PresentError)
	s := &recordSide{app: a, generic: srv}
	if withFast {
		s.fast = fastpath.New(fastpath.Config{App: a, Schema: es, MaxDepth: 20, MaxComplexity: 1_000_000})
	}
	return s
}

// do answers one request; served reports whether the fast path took it.
func (s *recordSide) do(t *testing.T, id app.Identity, query string, vars map[string]any) (body string, served bool) {
	t.Helper()
	ctx := app.ContextWithIdentity(context.Background(), id)
	raw, err := json.Marshal(vars)
	require.NoError(t, err)
	if s.fast != nil {
		var buf bytes.Buffer
		if s.fast.TryServe(ctx, &buf, query, "", raw) {
			return buf.String(), true
		}
		require.Zero(t, buf.Len(), "nothing written when not served")
	}
	return post(t, s.generic, id, query, vars), false
}

const recordAllFields = `id tenantId projectId sequence action occurredAt recordedAt
	subject { type id displayName } resource { type id } outcome
	governance { reason ticket risk confirmedBy } correlation { traceId requestId causationId }
	evidenceDigests { algorithm value label } details chainHash`

func eventVar(id, action string) map[string]any {
	return map[string]any{
		"projectId": "p1", "id": id, "action": action, "occurredAt": "2026-11-01T08:00:00.5Z",
		"subject":  map[string]any{"type": "USER", "id": "u1", "displayName": "Ada \"<&>\""},
		"resource": map[string]any{"type": "device", "id": "d1"}, "outcome": "SUCCESS",
		"governance":      map[string]any{"reason": "r", "risk": "HIGH"},
		"correlation":     map[string]any{"requestId": "req-1"},
		"evidenceDigests": []any{map[string]any{"algorithm": "sha256", "value": "ab"}},
		"details":         map[string]any{"b": 1.5, "a": []any{"x", nil, true}},
	}
}

func with(m map[string]any, k string, v any) map[string]any {
	out := map[string]any{}
	for key, val := range m {
		out[key] = val
	}
	if v == nil {
		delete(out, k)
	} else {
		out[k] = v
	}
	return out
}

// TestRecordFastPathMatchesExecutor sends the same requests, in the same
// order, to a server with the fast path and to one without, over two
// databases with a fixed clock: every response must be equal byte for byte,
// and the fast path must take exactly the requests it is meant to.
func TestRecordFastPathMatchesExecutor(t *testing.T) {
	fastSide, slowSide := newRecordSide(t, true), newRecordSide(t, false)
	writer := app.Identity{TenantID: "t1", ProjectIDs: []string{"p1"}, Permissions: []app.Permission{app.PermissionAuditWrite}}
	batch := `mutation($in: RecordAuditEventsInput!) { recordAuditEvents(input: $in) { events { ` + recordAllFields + ` } } }`
	single := `mutation M($e: RecordAuditEventInput!) { r: recordAuditEvent(input: $e) { __typename event { ...F } } } fragment F on AuditEvent { s: sequence id action __typename subject { id } }`
	e1 := eventVar("0193f3c4-0000-7000-8000-000000000001", "device.firmware.updated")
	e2 := eventVar("0193f3c4-0000-7000-8000-000000000002", "device.config.changed")

	cases := []struct {
		name   string
		who    app.Identity
		query  string
		vars   map[string]any
		served bool
	}{
		{"batch", writer, batch, map[string]any{"in": map[string]any{"events": []any{e1, e2}}}, true},
		{"batch again is idempotent", writer, batch, map[string]any{"in": map[string]any{"events": []any{e1}}}, true},
		{"batch with key", writer, batch, map[string]any{"in": map[string]any{"idempotencyKey": "k1", "events": []any{
			eventVar("0193f3c4-0000-7000-8000-000000000003", "alarm.raised")}}}, true},
		{"key reused with other events", writer, batch, map[string]any{"in": map[string]any{"idempotencyKey": "k1", "events": []any{e1}}}, true},
		{"single with alias and fragment", writer, single, map[string]any{"e": eventVar("0193f3c4-0000-7000-8000-000000000004", "user.login")}, true},
		{"conflicting content", writer, single, map[string]any{"e": with(e1, "outcome", "DENIED")}, true},
		{"invalid action", writer, single, map[string]any{"e": with(e2, "action", "Not Valid")}, true},
		{"malformed id", writer, batch, map[string]any{"in": map[string]any{"events": []any{with(e2, "id", "nope")}}}, true},
		{"project outside the token", writer, single, map[string]any{"e": with(e2, "projectId", "p9")}, true},
		{"no permission", app.Identity{TenantID: "t1", ProjectIDs: []string{"p1"}}, single, map[string]any{"e": e2}, true},
		{"unknown input field", writer, single, map[string]any{"e": with(e2, "bogus", 1)}, false},
		// Found by TestFastPathsMatchExecutorRandomly: encoding/json and
		// go-json's v1 API match member names in another case too.
		{"input field in another case", writer, single, map[string]any{"e": with(with(e2, "action", nil), "Action", "device.x")}, false},
		{"batch field in another case", writer, batch, map[string]any{"in": map[string]any{"Events": []any{}, "idempotencyKey": "k9"}}, false},
		{"missing required field", writer, single, map[string]any{"e": with(e2, "action", nil)}, false},
		{"lower-case enum", writer, single, map[string]any{"e": with(e2, "outcome", "success")}, false},
		{"details not an object", writer, single, map[string]any{"e": with(e2, "details", []any{1})}, false},
		{"numeric project id", writer, single, map[string]any{"e": with(e2, "projectId", 7)}, false},
		{"bad time", writer, single, map[string]any{"e": with(e2, "occurredAt", "yesterday")}, false},
		{"single event where a list is expected", writer, batch, map[string]any{"in": map[string]any{"events": eventVar("0193f3c4-0000-7000-8000-000000000005", "alarm.cleared")}}, false},
		{"missing variable", writer, single, map[string]any{}, false},
		{"inline input", writer, `mutation { recordAuditEvent(input: {projectId: "p1", id: "0193f3c4-0000-7000-8000-0000000000aa", action: "device.inline", occurredAt: "2026-11-01T08:00:00Z", subject: {type: SYSTEM, id: "s"}, resource: {type: "device", id: "d"}, outcome: SUCCESS}) { event { sequence } } }`, nil, false},
		{"two mutations", writer, `mutation($e: RecordAuditEventInput!) { a: recordAuditEvent(input: $e) { event { sequence } } b: recordAuditEvent(input: $e) { event { sequence } } }`, map[string]any{"e": eventVar("0193f3c4-0000-7000-8000-000000000006", "device.twice")}, false},
		{"invalid document", writer, `mutation($e: RecordAuditEventInput!) { recordAuditEvent(input: $e) { event { nope } } }`, map[string]any{"e": e2}, false},
		{"after the fallbacks", writer, batch, map[string]any{"in": map[string]any{"events": []any{eventVar("0193f3c4-0000-7000-8000-000000000007", "device.last")}}}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want, _ := slowSide.do(t, tc.who, tc.query, tc.vars)
			got, served := fastSide.do(t, tc.who, tc.query, tc.vars)
			require.Equal(t, htmlEscaped(want), htmlEscaped(got))
			require.Equal(t, tc.served, served)
		})
	}

	// Both databases hold the same evidence, byte for byte.
	reader := app.Identity{TenantID: "t1", ProjectIDs: []string{"p1"}, Permissions: []app.Permission{app.PermissionAuditRead}}
	first := 500
	var stored [2][]string
	for i, side := range []*recordSide{slowSide, fastSide} {
		page, err := side.app.SearchAuditEvents(context.Background(), reader, app.SearchAuditEventsInput{ProjectID: "p1", First: &first})
		require.NoError(t, err)
		for _, e := range page.Edges {
			stored[i] = append(stored[i], string(e.Event.CanonicalBytes()))
		}
	}
	require.NotEmpty(t, stored[0])
	require.Equal(t, stored[0], stored[1])
}

// htmlEscaped escapes <, > and & in JSON strings, as encoding/json does:
// gqlgen's own POST transport re-encodes its output that way, while ours and
// the fast path write it as produced. Both are the same JSON.
func htmlEscaped(s string) string {
	var buf bytes.Buffer
	json.HTMLEscape(&buf, []byte(s))
	return buf.String()
}

func TestRecordFastPathHonoursLimits(t *testing.T) {
	a := app.New(store.New(storetest.NewPool(t)), app.Config{})
	r := &graph.Resolver{App: a}
	es := generated.NewExecutableSchema(generated.Config{Resolvers: r, Complexity: graph.Complexity()})
	ctx := app.ContextWithIdentity(context.Background(), app.Identity{TenantID: "t1", ProjectIDs: []string{"p1"}, Permissions: []app.Permission{app.PermissionAuditWrite}})
	query := `mutation($e: RecordAuditEventInput!) { recordAuditEvent(input: $e) { event { subject { id } } } }`
	vars, err := json.Marshal(map[string]any{"e": eventVar("0193f3c4-0000-7000-8000-000000000001", "device.a")})
	require.NoError(t, err)
	var buf bytes.Buffer
	require.False(t, fastpath.New(fastpath.Config{App: a, Schema: es, MaxDepth: 2, MaxComplexity: 1000}).TryServe(ctx, &buf, query, "", vars), "too deep")
	require.False(t, fastpath.New(fastpath.Config{App: a, Schema: es, MaxDepth: 10, MaxComplexity: 2}).TryServe(ctx, &buf, query, "", vars), "too complex")
	require.Zero(t, buf.Len())
	require.True(t, fastpath.New(fastpath.Config{App: a, Schema: es, MaxDepth: 10, MaxComplexity: 1000}).TryServe(ctx, &buf, query, "", vars))
}

// TestPlanCacheHoldsOnlyValidSmallDocuments: a document that does not
// parse or validate is not cached, nor one over the cached size; a valid
// one, eligible or not, is planned once and kept.
func TestPlanCacheHoldsOnlyValidSmallDocuments(t *testing.T) {
	a := app.New(store.New(storetest.NewPool(t)), app.Config{})
	es := generated.NewExecutableSchema(generated.Config{Resolvers: &graph.Resolver{App: a}, Complexity: graph.Complexity()})
	p := fastpath.New(fastpath.Config{App: a, Schema: es, MaxDepth: 10, MaxComplexity: 1000, MaxCachedDocumentBytes: 1024})
	ctx := app.ContextWithIdentity(context.Background(), app.Identity{TenantID: "t1", ProjectIDs: []string{"p1"}, Permissions: []app.Permission{app.PermissionAuditWrite}})
	var buf bytes.Buffer
	for i := range 20 {
		require.False(t, p.TryServe(ctx, &buf, fmt.Sprintf("mutation { nope%d }", i), "", nil))
		require.False(t, p.TryServe(ctx, &buf, fmt.Sprintf("{ unterminated%d", i), "", nil))
	}
	require.False(t, p.TryServe(ctx, &buf, "mutation { __typename "+strings.Repeat(" ", 2000)+"}", "", nil))
	docs, _ := p.PlansCached()
	require.Zero(t, docs, "invalid and oversized documents are not kept")

	require.False(t, p.TryServe(ctx, &buf, "mutation { __typename }", "", nil), "valid, not eligible")
	docs, size := p.PlansCached()
	require.Equal(t, 1, docs)
	require.Equal(t, len("mutation { __typename }"), size)
}
