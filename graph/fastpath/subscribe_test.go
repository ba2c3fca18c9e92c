package fastpath_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/executor"
	"github.com/stretchr/testify/require"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/graph"
	"github.com/aetheriot/aether-audit/graph/fastpath"
	"github.com/aetheriot/aether-audit/graph/generated"
	"github.com/aetheriot/aether-audit/live"
	"github.com/aetheriot/aether-audit/store"
	"github.com/aetheriot/aether-audit/store/storetest"
)

// TestSubscribeFastPathMatchesExecutor runs subscriptions through the
// executor and through the fast path over the same events: the payloads
// must be equal byte for byte, and the fast path must take exactly what it
// is meant to.
func TestSubscribeFastPathMatchesExecutor(t *testing.T) {
	pool := storetest.NewPool(t)
	st := store.New(pool)
	hub := live.New(pool, st, live.Config{})
	hubCtx, stopHub := context.WithCancel(context.Background())
	hubDone := make(chan struct{})
	go func() { defer close(hubDone); hub.Run(hubCtx) }()
	t.Cleanup(func() { stopHub(); <-hubDone })
	a := app.New(st, app.Config{Live: hub})
	r := &graph.Resolver{App: a}
	es := generated.NewExecutableSchema(generated.Config{Resolvers: r, Complexity: graph.Complexity()})
	exec := executor.New(es)
	exec.SetErrorPresenter(graph.PresentError)
	fast := fastpath.New(fastpath.Config{App: a, Schema: es, MaxDepth: 20, MaxComplexity: 100000})

	writer := app.Identity{TenantID: "t1", ProjectIDs: []string{"p1"}, Permissions: []app.Permission{app.PermissionAuditWrite}}
	reader := app.Identity{TenantID: "t1", ProjectIDs: []string{"p1"}, Permissions: []app.Permission{app.PermissionAuditRead}, ExpiresAt: time.Now().Add(time.Hour)}
	var drafts []domain.AuditEventDraft
	for i := range 6 {
		d := domain.AuditEventDraft{
			ProjectID: "p1", Action: []string{"device.updated", "user.login"}[i%2], OccurredAt: time.Now(),
			Subject:  domain.Subject{Type: domain.SubjectUser, ID: fmt.Sprintf("u%d", i%3), DisplayName: "Ada <&> \"x\""},
			Resource: domain.Resource{Type: "device", ID: "d1"}, Outcome: domain.OutcomeSuccess,
			Details: json.RawMessage(`{"n":1.50,"s":"é\u2028"}`),
		}
		if i%2 == 0 {
			d.Governance = &domain.Governance{Reason: "r", Risk: domain.RiskHigh}
			d.EvidenceDigests = []domain.EvidenceDigest{{Algorithm: "sha256", Value: "ab"}}
		}
		drafts = append(drafts, d)
	}
	_, err := a.RecordAuditEvents(context.Background(), writer, app.RecordAuditEventsInput{Events: drafts})
	require.NoError(t, err)

	const all = `id tenantId projectId sequence action occurredAt recordedAt subject { type id displayName }
		resource { type id } outcome governance { reason ticket risk confirmedBy }
		correlation { traceId requestId causationId } evidenceDigests { algorithm value label } details chainHash`
	cases := []struct {
		name   string
		query  string
		vars   map[string]any
		n      int
		served bool
	}{
		{"all fields", `subscription { auditEventRecorded(projectId: "p1", afterSequence: "0") { ` + all + ` } }`, nil, 6, true},
		{"alias, fragment, typename, variables", `subscription S($p: ID!, $a: Uint64, $f: AuditEventFilter) { e: auditEventRecorded(projectId: $p, afterSequence: $a, filter: $f) { __typename ...F s: sequence } } fragment F on AuditEvent { action subject { id } }`,
			map[string]any{"p": "p1", "a": "1", "f": map[string]any{"action": "user.*", "outcome": []any{"SUCCESS"}}}, 3, true},
		{"skip and include with variables falls back", `subscription($y: Boolean!) { auditEventRecorded(projectId: "p1", afterSequence: "4") { sequence @include(if: $y) action @skip(if: $y) } }`,
			map[string]any{"y": true}, 2, false},
		{"literal skip and include", `subscription { auditEventRecorded(projectId: "p1", afterSequence: "4") { sequence @include(if: true) action @skip(if: true) } }`, nil, 2, true},
		{"variable default falls back", `subscription($a: Uint64 = "3") { auditEventRecorded(projectId: "p1", afterSequence: $a) { sequence } }`, nil, 3, false},
		{"outcome not a list falls back", `subscription($f: AuditEventFilter) { auditEventRecorded(projectId: "p1", afterSequence: "0", filter: $f) { sequence } }`,
			map[string]any{"f": map[string]any{"outcome": "SUCCESS"}}, 6, false},
		{"other project falls back", `subscription { auditEventRecorded(projectId: "p2", afterSequence: "0") { sequence } }`, nil, 1, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(graphql.StartOperationTrace(app.ContextWithIdentity(context.Background(), reader)), 30*time.Second)
			defer cancel()
			params := &graphql.RawParams{Query: tc.query, Variables: tc.vars, ReadTime: graphql.TraceTiming{Start: graphql.Now(), End: graphql.Now()}}

			var want []string
			rc, errs := exec.CreateOperationContext(ctx, params)
			require.Empty(t, errs)
			responses, rctx := exec.DispatchOperation(ctx, rc)
			for len(want) < tc.n {
				resp := responses(rctx)
				require.NotNil(t, resp)
				b, err := json.Marshal(map[string]any{"data": resp.Data, "errors": resp.Errors})
				require.NoError(t, err)
				if len(resp.Errors) == 0 {
					b = append(append([]byte(`{"data":`), resp.Data...), '}')
				}
				want = append(want, string(b))
			}

			sub, ok := fast.Open(ctx, params, nil)
			require.Equal(t, tc.served, ok)
			if !ok {
				return
			}
			var got []string
			for len(got) < tc.n {
				// Alternately what is at hand and what is waited for.
				next := sub.Wait
				if len(got)%2 == 1 {
					next = sub.Next
				}
				payload, more := next(ctx)
				require.True(t, more)
				if payload != nil {
					got = append(got, string(payload))
				}
			}
			require.Equal(t, want, got)
			// Both subscriptions end with their context, whether or not
			// their results are still pulled.
			cancel()
			require.Eventually(t, func() bool { return hub.Subscribers() == 0 }, 10*time.Second, 5*time.Millisecond)
		})
	}
}

// TestSubscribeFastPathLeavesMissingRequiredVariables: a variable of a
// non-null type that is missing or null is an error of the executor
// ("must be defined"), also where the argument it is passed to is
// nullable; the fast path must not serve the subscription as if the
// argument were absent. Found by TestFastPathsMatchExecutorRandomly.
func TestSubscribeFastPathLeavesMissingRequiredVariables(t *testing.T) {
	rig := newCoverageRig()
	query := `subscription($p: ID!, $a: Uint64!) { auditEventRecorded(projectId: $p, afterSequence: $a) { sequence } }`
	for _, vars := range []map[string]any{{"p": "p1"}, {"p": "p1", "a": nil}} {
		served, _, _ := rig.serve(t, ast.Subscription, query, vars)
		require.False(t, served, "%v", vars)
	}
	served, _, _ := rig.serve(t, ast.Subscription, query, map[string]any{"p": "p1", "a": "3"})
	require.True(t, served)
}
