package server_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/auth"
	"github.com/aetheriot/aether-audit/checkpoint"
	"github.com/aetheriot/aether-audit/live"
	"github.com/aetheriot/aether-audit/server"
	"github.com/aetheriot/aether-audit/store"
	"github.com/aetheriot/aether-audit/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

const (
	tenantA  = "tenant-a"
	tenantB  = "tenant-b"
	projectA = "proj-1"
	projectB = "proj-2"
)

// documentedCodes is the public set of error codes (app.Code*).
var documentedCodes = map[string]bool{
	"UNAUTHENTICATED": true, "FORBIDDEN": true, "NOT_FOUND": true, "BAD_USER_INPUT": true,
	"IDEMPOTENCY_CONFLICT": true, "CONFIRMATION_REQUIRED": true, "INVALID_STATE": true,
	"QUOTA_EXCEEDED": true, "RATE_LIMITED": true, "INTERNAL": true,
}

// eventFields selects every field of an AuditEvent.
const eventFields = `fragment E on AuditEvent {
  id tenantId projectId sequence action occurredAt recordedAt
  subject { type id displayName }
  resource { type id }
  outcome
  governance { reason ticket risk confirmedBy }
  correlation { traceId requestId causationId }
  evidenceDigests { algorithm value label }
  details
  chainHash
  chainVersion
  recordedBy { issuer subject tokenId clientId }
}`

const recordEventMutation = `mutation($in: RecordAuditEventInput!) {
  recordAuditEvent(input: $in) { event { ...E } }
}` + "\n" + eventFields

const recordEventsMutation = `mutation($in: RecordAuditEventsInput!) {
  recordAuditEvents(input: $in) { events { ...E } }
}` + "\n" + eventFields

const listEventsQuery = `query($p: ID!, $first: Int, $after: String, $order: AuditOrder, $filter: AuditEventFilter) {
  auditEvents(projectId: $p, first: $first, after: $after, order: $order, filter: $filter) {
    edges { cursor node { ...E } }
    pageInfo { hasNextPage endCursor }
  }
}` + "\n" + eventFields

// testVerifier returns an HS256 verifier of secret, closed when the test
// ends.
// testKeyRing is a fresh checkpoint key ring.
func testKeyRing(tb testing.TB) *checkpoint.KeyRing {
	tb.Helper()
	key, err := checkpoint.GenerateKey()
	require.NoError(tb, err)
	ring, err := checkpoint.NewKeyRing(key)
	require.NoError(tb, err)
	return ring
}

func testVerifier(tb testing.TB, secret []byte) *auth.Verifier {
	tb.Helper()
	v, err := auth.NewVerifier(context.Background(), auth.VerifierConfig{HMACSecret: secret})
	require.NoError(tb, err)
	tb.Cleanup(v.Close)
	return v
}

// testHub runs a live hub over pool, as a process does, until the test
// ends, and waits until it listens.
func testHub(tb testing.TB, pool *pgxpool.Pool, st live.Store, cfg live.Config) *live.Hub {
	tb.Helper()
	hub := live.New(pool, st, cfg)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); hub.Run(ctx) }()
	tb.Cleanup(func() { stop(); <-done })
	require.Eventually(tb, hub.Listening, 10*time.Second, 5*time.Millisecond)
	return hub
}

// testBundle is what a test of this file gets from setup.
type testBundle struct {
	server *server.Server
	// app is the server's app, for work its workers would do (fan-outs,
	// export runs), which these servers run none of.
	app    *app.App
	url    string
	secret []byte
	// ready is what Config.Ready answers; nil means ready.
	ready *atomic.Pointer[error]
	// hub is the app's live hub.
	hub *live.Hub
	// pool is the database's, for what a test does behind the service's
	// back (locks, tampering).
	pool *pgxpool.Pool
}

// setup serves a fresh server over a fresh database on a real socket.
// mutate, when given, adjusts the server configuration.
func setup(t *testing.T, mutate func(*server.Config)) *testBundle {
	t.Helper()
	return setupApp(t, app.Config{}, mutate)
}

// setupApp is setup with an app configuration (its logger, live feed and
// export watcher are set here); the app is at hand in the bundle.
func setupApp(t *testing.T, appCfg app.Config, mutate func(*server.Config)) *testBundle {
	t.Helper()
	pool := storetest.NewPool(t)
	secret := []byte("0123456789abcdef0123456789abcdef-server-test")
	verifier := testVerifier(t, secret)

	b := &testBundle{secret: secret, ready: &atomic.Pointer[error]{}, pool: pool}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	hub := testHub(t, pool, store.New(pool), live.Config{Logger: logger})
	appCfg.Logger, appCfg.Live, appCfg.ExportWatch = logger, hub, hub
	b.hub = hub
	if appCfg.Checkpoints == nil {
		appCfg.Checkpoints = testKeyRing(t)
	}
	b.app = app.New(store.New(pool), appCfg)
	cfg := server.Config{
		App:      b.app,
		Verifier: verifier,
		Logger:   logger,
		Ready: func(context.Context) error {
			if p := b.ready.Load(); p != nil {
				return *p
			}
			return nil
		},
	}
	if mutate != nil {
		mutate(&cfg)
	}
	b.server = server.New(cfg)
	srv := httptest.NewServer(b.server)
	t.Cleanup(srv.Close)
	b.url = srv.URL
	return b
}

// tokenOpts describes a token; zero fields take the defaults of token.
type tokenOpts struct {
	tenant   string
	projects []string
	perms    []app.Permission
	ttl      time.Duration
	now      time.Time
}

// token mints a token for tenant A, project A, audit:read and audit:write
// unless opts says otherwise.
func (b *testBundle) token(t *testing.T, opts tokenOpts) string {
	t.Helper()
	if opts.tenant == "" {
		opts.tenant = tenantA
	}
	if opts.projects == nil {
		opts.projects = []string{projectA}
	}
	if opts.perms == nil {
		opts.perms = []app.Permission{app.PermissionAuditRead, app.PermissionAuditWrite}
	}
	if opts.ttl == 0 {
		opts.ttl = time.Hour
	}
	if opts.now.IsZero() {
		opts.now = time.Now()
	}
	tok, err := auth.MintHS256(b.secret, auth.TokenRequest{
		Subject: "tester", TenantID: opts.tenant, ProjectIDs: opts.projects, Permissions: opts.perms, TTL: opts.ttl,
	}, opts.now)
	require.NoError(t, err)
	return tok
}

// do sends req with the bearer token (none when empty), failing the test
// on a transport error. The caller closes the body.
func do(t *testing.T, req *http.Request, token string) *http.Response {
	t.Helper()
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	ctx, cancel := context.WithTimeout(req.Context(), 60*time.Second)
	t.Cleanup(cancel)
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	require.NoError(t, err)
	t.Cleanup(func() { _ = resp.Body.Close() })
	return resp
}

type gqlError struct {
	Message    string         `json:"message"`
	Extensions map[string]any `json:"extensions"`
}

type gqlResult struct {
	Status int             `json:"-"`
	Header http.Header     `json:"-"`
	Data   json.RawMessage `json:"data"`
	Errors []gqlError      `json:"errors"`
	Raw    []byte          `json:"-"`
}

// code is extensions.code of the only error; it fails the test unless
// there is exactly one error.
func (r *gqlResult) code(t *testing.T) string {
	t.Helper()
	require.Len(t, r.Errors, 1, "errors of %s", r.Raw)
	code, _ := r.Errors[0].Extensions["code"].(string)
	return code
}

// decode unmarshals data into v, failing on any error in the response.
func (r *gqlResult) decode(t *testing.T, v any) {
	t.Helper()
	require.Empty(t, r.Errors, "errors in %s", r.Raw)
	require.NoError(t, json.Unmarshal(r.Data, v), "data: %s", r.Data)
}

func readGraphQL(t *testing.T, resp *http.Response) *gqlResult {
	t.Helper()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	res := &gqlResult{Status: resp.StatusCode, Header: resp.Header, Raw: raw}
	require.NoError(t, json.Unmarshal(raw, res), "body: %s", raw)
	return res
}

// graphql POSTs one operation.
func (b *testBundle) graphql(t *testing.T, token, query string, vars map[string]any, header ...string) *gqlResult {
	t.Helper()
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	require.NoError(t, err)
	return b.graphqlRaw(t, token, body, header...)
}

// graphqlRaw POSTs body as is; header holds name, value pairs.
func (b *testBundle) graphqlRaw(t *testing.T, token string, body []byte, header ...string) *gqlResult {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, b.url+"/graphql", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return readGraphQL(t, do(t, req, token))
}

// graphqlGet sends one operation as a GET request.
func (b *testBundle) graphqlGet(t *testing.T, token, query string, vars map[string]any) *gqlResult {
	t.Helper()
	q := url.Values{"query": {query}}
	if vars != nil {
		v, err := json.Marshal(vars)
		require.NoError(t, err)
		q.Set("variables", string(v))
	}
	req, err := http.NewRequest(http.MethodGet, b.url+"/graphql?"+q.Encode(), nil)
	require.NoError(t, err)
	return readGraphQL(t, do(t, req, token))
}

// eventInput is a valid RecordAuditEventInput.
func eventInput(project, action string) map[string]any {
	return map[string]any{
		"projectId":  project,
		"action":     action,
		"occurredAt": "2026-01-02T03:04:05.123456Z",
		"subject":    map[string]any{"type": "USER", "id": "user-1", "displayName": "Ada"},
		"resource":   map[string]any{"type": "device", "id": "dev-1"},
		"outcome":    "SUCCESS",
		"details":    map[string]any{"firmware": "1.2.3", "n": 7},
	}
}

// event is an AuditEvent as the API returns it.
type event struct {
	ID          string `json:"id"`
	TenantID    string `json:"tenantId"`
	ProjectID   string `json:"projectId"`
	Sequence    string `json:"sequence"`
	Action      string `json:"action"`
	ChainHash   string `json:"chainHash"`
	Correlation *struct {
		TraceID   string `json:"traceId"`
		RequestID string `json:"requestId"`
	} `json:"correlation"`
}

// record appends events in one recordAuditEvents call and returns them.
func (b *testBundle) record(t *testing.T, token string, events ...map[string]any) []event {
	t.Helper()
	res := b.graphql(t, token, recordEventsMutation, map[string]any{"in": map[string]any{"events": events}})
	var data struct {
		RecordAuditEvents struct{ Events []event } `json:"recordAuditEvents"`
	}
	res.decode(t, &data)
	require.Len(t, data.RecordAuditEvents.Events, len(events))
	return data.RecordAuditEvents.Events
}

// recordN appends n events with the given action to project A.
func (b *testBundle) recordN(t *testing.T, token string, n int, action string) []event {
	t.Helper()
	events := make([]map[string]any, n)
	for i := range events {
		events[i] = eventInput(projectA, action)
	}
	return b.record(t, token, events...)
}

type connection struct {
	Edges []struct {
		Cursor string `json:"cursor"`
		Node   event  `json:"node"`
	} `json:"edges"`
	PageInfo struct {
		HasNextPage bool    `json:"hasNextPage"`
		EndCursor   *string `json:"endCursor"`
	} `json:"pageInfo"`
}

func (c connection) sequences() []string {
	out := make([]string, len(c.Edges))
	for i, e := range c.Edges {
		out[i] = e.Node.Sequence
	}
	return out
}

// list runs auditEvents for project A with vars added to the defaults.
func (b *testBundle) list(t *testing.T, token string, vars map[string]any) connection {
	t.Helper()
	all := map[string]any{"p": projectA}
	for k, v := range vars {
		all[k] = v
	}
	res := b.graphql(t, token, listEventsQuery, all)
	var data struct {
		AuditEvents connection `json:"auditEvents"`
	}
	res.decode(t, &data)
	return data.AuditEvents
}

// count returns how many events project A holds, as seen by token.
func (b *testBundle) count(t *testing.T, token string) int {
	t.Helper()
	return len(b.list(t, token, map[string]any{"first": 500}).Edges)
}

func seqs(from, to int) []string {
	var out []string
	for i := from; i <= to; i++ {
		out = append(out, strconv.Itoa(i))
	}
	return out
}

func TestGraphQLRecordAuditEvent(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	tok := b.token(t, tokenOpts{})

	res := b.graphql(t, tok, recordEventMutation, map[string]any{"in": eventInput(projectA, "device.firmware.updated")})
	require.Equal(t, http.StatusOK, res.Status)
	require.Empty(t, res.Errors, "%s", res.Raw)

	// The raw JSON carries the sequence as a string, not a number.
	var raw struct {
		RecordAuditEvent struct {
			Event map[string]any `json:"event"`
		} `json:"recordAuditEvent"`
	}
	require.NoError(t, json.Unmarshal(res.Data, &raw))
	ev := raw.RecordAuditEvent.Event
	require.Equal(t, "1", ev["sequence"])
	require.Equal(t, tenantA, ev["tenantId"])
	require.Equal(t, projectA, ev["projectId"])
	require.Equal(t, "device.firmware.updated", ev["action"])
	require.Equal(t, "2026-01-02T03:04:05.123456Z", ev["occurredAt"])
	require.Equal(t, map[string]any{"firmware": "1.2.3", "n": float64(7)}, ev["details"])
	require.Equal(t, []any{}, ev["evidenceDigests"])
	require.Nil(t, ev["governance"])
	require.Nil(t, ev["correlation"])

	hash, _ := ev["chainHash"].(string)
	require.Len(t, hash, 64)
	_, err := hex.DecodeString(hash)
	require.NoError(t, err)
	require.Equal(t, strings.ToLower(hash), hash)

	// A second event follows with sequence 2 and a different chain hash.
	second := b.record(t, tok, eventInput(projectA, "device.firmware.updated"))
	require.Equal(t, "2", second[0].Sequence)
	require.NotEqual(t, hash, second[0].ChainHash)
}

func TestGraphQLRecordAuditEventsBatch(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	tok := b.token(t, tokenOpts{})

	got := b.record(t, tok,
		eventInput(projectA, "device.a.one"),
		eventInput(projectA, "device.b.two"),
		eventInput(projectA, "device.c.three"),
	)
	require.Equal(t, []string{"1", "2", "3"}, []string{got[0].Sequence, got[1].Sequence, got[2].Sequence})
	require.Equal(t, []string{"device.a.one", "device.b.two", "device.c.three"},
		[]string{got[0].Action, got[1].Action, got[2].Action})
	ids := map[string]bool{got[0].ID: true, got[1].ID: true, got[2].ID: true}
	require.Len(t, ids, 3, "every event gets its own id")

	// The stored order matches the returned one.
	conn := b.list(t, tok, nil)
	require.Equal(t, []string{"1", "2", "3"}, conn.sequences())
	require.Equal(t, got[1].ID, conn.Edges[1].Node.ID)
}

func TestGraphQLTraceparent(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	tok := b.token(t, tokenOpts{})
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	body, err := json.Marshal(map[string]any{"query": recordEventsMutation, "variables": map[string]any{"in": map[string]any{
		"events": []any{
			eventInput(projectA, "device.no.trace"),
			func() map[string]any {
				in := eventInput(projectA, "device.own.trace")
				in["correlation"] = map[string]any{"traceId": "0af7651916cd43dd8448eb211c80319c", "requestId": "req-1"}
				return in
			}(),
		},
	}}})
	require.NoError(t, err)

	res := b.graphqlRaw(t, tok, body, "traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
	var data struct {
		RecordAuditEvents struct{ Events []event } `json:"recordAuditEvents"`
	}
	res.decode(t, &data)
	evs := data.RecordAuditEvents.Events
	require.Len(t, evs, 2)
	require.NotNil(t, evs[0].Correlation)
	require.Equal(t, traceID, evs[0].Correlation.TraceID, "filled from traceparent")
	require.NotNil(t, evs[1].Correlation)
	require.Equal(t, "0af7651916cd43dd8448eb211c80319c", evs[1].Correlation.TraceID, "the input's own trace id wins")
	require.Equal(t, "req-1", evs[1].Correlation.RequestID)

	// Without (or with an invalid) traceparent nothing is filled in.
	for _, tp := range []string{"", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", "garbage"} {
		res := b.graphql(t, tok, recordEventMutation, map[string]any{"in": eventInput(projectA, "device.no.trace")}, "traceparent", tp)
		var one struct {
			RecordAuditEvent struct{ Event event } `json:"recordAuditEvent"`
		}
		res.decode(t, &one)
		require.Nil(t, one.RecordAuditEvent.Event.Correlation, "traceparent %q", tp)
	}
}

func TestGraphQLAuditEventsPagination(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	tok := b.token(t, tokenOpts{})
	b.recordN(t, tok, 5, "device.firmware.updated")

	t.Run("OldestFirst", func(t *testing.T) {
		var got []string
		var after any
		pages := 0
		for {
			conn := b.list(t, tok, map[string]any{"first": 2, "after": after})
			pages++
			require.LessOrEqual(t, len(conn.Edges), 2)
			got = append(got, conn.sequences()...)
			if !conn.PageInfo.HasNextPage {
				break
			}
			require.NotNil(t, conn.PageInfo.EndCursor)
			require.Equal(t, conn.Edges[len(conn.Edges)-1].Cursor, *conn.PageInfo.EndCursor)
			after = *conn.PageInfo.EndCursor
			require.Less(t, pages, 10, "pagination does not end")
		}
		require.Equal(t, 3, pages)
		require.Equal(t, seqs(1, 5), got)
	})

	t.Run("NewestFirst", func(t *testing.T) {
		first := b.list(t, tok, map[string]any{"first": 2, "order": "NEWEST_FIRST"})
		require.Equal(t, []string{"5", "4"}, first.sequences())
		require.True(t, first.PageInfo.HasNextPage)
		second := b.list(t, tok, map[string]any{"first": 2, "order": "NEWEST_FIRST", "after": *first.PageInfo.EndCursor})
		require.Equal(t, []string{"3", "2"}, second.sequences())

		// A cursor of one order is refused in the other.
		res := b.graphql(t, tok, listEventsQuery, map[string]any{"p": projectA, "after": *first.PageInfo.EndCursor})
		require.Equal(t, "BAD_USER_INPUT", res.code(t))
	})

	t.Run("EmptyProject", func(t *testing.T) {
		other := b.token(t, tokenOpts{projects: []string{"*"}})
		res := b.graphql(t, other, listEventsQuery, map[string]any{"p": "never-used"})
		var data struct {
			AuditEvents connection `json:"auditEvents"`
		}
		res.decode(t, &data)
		require.Empty(t, data.AuditEvents.Edges)
		require.False(t, data.AuditEvents.PageInfo.HasNextPage)
		require.Nil(t, data.AuditEvents.PageInfo.EndCursor)
	})
}

func TestGraphQLAuditEventsFilterAction(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	tok := b.token(t, tokenOpts{})
	b.record(t, tok,
		eventInput(projectA, "device.firmware.updated"), // 1
		eventInput(projectA, "user.login"),              // 2
		eventInput(projectA, "device.boot"),             // 3
		eventInput(projectA, "devices.created"),         // 4: not under device.
		eventInput(projectA, "device-x.moved"),          // 5: not under device.
		eventInput(projectA, "device.firmware.failed"),  // 6
	)
	filter := func(action string) []string {
		return b.list(t, tok, map[string]any{"filter": map[string]any{"action": action}}).sequences()
	}
	require.Equal(t, []string{"1", "3", "6"}, filter("device.*"))
	require.Equal(t, []string{"1", "6"}, filter("device.firmware.*"))
	require.Equal(t, []string{"1"}, filter("device.firmware.updated"))
	require.Equal(t, []string{"4"}, filter("devices.created"))
	require.Empty(t, filter("device.firmware"))

	res := b.graphql(t, tok, listEventsQuery, map[string]any{"p": projectA, "filter": map[string]any{"action": "Device.*"}})
	require.Equal(t, "BAD_USER_INPUT", res.code(t))
}

func TestGraphQLAuditEventByID(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	tokA := b.token(t, tokenOpts{})
	recorded := b.record(t, tokA, eventInput(projectA, "device.firmware.updated"), eventInput(projectA, "device.boot"))

	const q = `query($p: ID!, $id: ID!) { auditEvent(projectId: $p, id: $id) { ...E } }` + "\n" + eventFields
	get := func(token, project, id string) *event {
		res := b.graphql(t, token, q, map[string]any{"p": project, "id": id})
		var data struct {
			AuditEvent *event `json:"auditEvent"`
		}
		res.decode(t, &data)
		return data.AuditEvent
	}

	got := get(tokA, projectA, recorded[1].ID)
	require.NotNil(t, got)
	require.Equal(t, recorded[1], *got)

	require.Nil(t, get(tokA, projectA, "0190f5f5-0000-7000-8000-000000000000"), "unknown id")
	require.Nil(t, get(tokA, projectA, "not-a-uuid"), "malformed id")

	// Another tenant with a project of the same name sees nothing: the
	// same null as a missing event.
	tokB := b.token(t, tokenOpts{tenant: tenantB})
	require.Nil(t, get(tokB, projectA, recorded[1].ID))
	require.Empty(t, b.list(t, tokB, nil).Edges)

	// The same tenant, but an event of another project of the token.
	tokAB := b.token(t, tokenOpts{projects: []string{projectA, projectB}})
	require.Nil(t, get(tokAB, projectB, recorded[1].ID))
}

func TestGraphQLVerifyAuditChain(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	tok := b.token(t, tokenOpts{})
	const q = `query($p: ID!, $from: Uint64, $to: Uint64) {
  verifyAuditChain(projectId: $p, fromSequence: $from, toSequence: $to) {
    valid complete resumeToken checkedCount firstInvalidSequence headSequence headHash
  }
}`
	type verification struct {
		Valid                bool    `json:"valid"`
		Complete             bool    `json:"complete"`
		ResumeToken          *string `json:"resumeToken"`
		CheckedCount         string  `json:"checkedCount"`
		FirstInvalidSequence *string `json:"firstInvalidSequence"`
		HeadSequence         string  `json:"headSequence"`
		HeadHash             string  `json:"headHash"`
	}
	verify := func(vars map[string]any) verification {
		all := map[string]any{"p": projectA}
		for k, v := range vars {
			all[k] = v
		}
		var data struct {
			VerifyAuditChain verification `json:"verifyAuditChain"`
		}
		b.graphql(t, tok, q, all).decode(t, &data)
		return data.VerifyAuditChain
	}

	empty := verify(nil)
	require.True(t, empty.Valid)
	require.Equal(t, "0", empty.CheckedCount)
	require.Equal(t, "0", empty.HeadSequence)

	events := b.recordN(t, tok, 7, "device.firmware.updated")
	all := verify(nil)
	require.True(t, all.Valid)
	require.Equal(t, "7", all.CheckedCount)
	require.Nil(t, all.FirstInvalidSequence)
	require.Equal(t, "7", all.HeadSequence)
	require.Equal(t, events[6].ChainHash, all.HeadHash)

	require.True(t, all.Complete)
	require.Nil(t, all.ResumeToken)

	part := verify(map[string]any{"from": "3", "to": "5"})
	require.True(t, part.Valid)
	require.Equal(t, "3", part.CheckedCount)

	// A resume token that no call issued is the client's mistake.
	res := b.graphql(t, tok, `query($p: ID!, $r: String) { verifyAuditChain(projectId: $p, resumeToken: $r) { valid } }`,
		map[string]any{"p": projectA, "r": "bm90LWEtdG9rZW4"})
	require.Equal(t, "BAD_USER_INPUT", res.code(t), "%s", res.Raw)
}

func TestGraphQLGet(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	tok := b.token(t, tokenOpts{})
	b.recordN(t, tok, 2, "device.firmware.updated")

	res := b.graphqlGet(t, tok, `query($p: ID!) { auditEvents(projectId: $p) { edges { node { sequence } } } }`, map[string]any{"p": projectA})
	require.Equal(t, http.StatusOK, res.Status)
	var data struct {
		AuditEvents connection `json:"auditEvents"`
	}
	res.decode(t, &data)
	require.Equal(t, []string{"1", "2"}, data.AuditEvents.sequences())

	// A mutation over GET is refused and not executed.
	res = b.graphqlGet(t, tok, recordEventMutation, map[string]any{"in": eventInput(projectA, "device.via.get")})
	require.Equal(t, http.StatusMethodNotAllowed, res.Status, "%s", res.Raw)
	require.Equal(t, "BAD_USER_INPUT", res.code(t))
	require.True(t, len(res.Data) == 0 || string(res.Data) == "null", "data: %s", res.Data)
	require.Equal(t, 2, b.count(t, tok), "the mutation was executed")

	// GET without a token is refused like POST.
	res = b.graphqlGet(t, "", `{ auditEvents(projectId: "proj-1") { edges { cursor } } }`, nil)
	require.Equal(t, http.StatusUnauthorized, res.Status)
	require.Equal(t, "UNAUTHENTICATED", res.code(t))
}

func TestGraphQLAuthErrors(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	const q = `{ auditEvents(projectId: "proj-1") { edges { cursor } } }`

	t.Run("NoToken", func(t *testing.T) {
		res := b.graphql(t, "", q, nil)
		require.Equal(t, http.StatusUnauthorized, res.Status)
		require.Equal(t, "UNAUTHENTICATED", res.code(t))
		require.Contains(t, res.Header.Get("WWW-Authenticate"), "Bearer")
	})

	t.Run("GarbageToken", func(t *testing.T) {
		res := b.graphql(t, "not.a.jwt", q, nil)
		require.Equal(t, http.StatusUnauthorized, res.Status)
		require.Equal(t, "UNAUTHENTICATED", res.code(t))
		require.Equal(t, "invalid token", res.Errors[0].Message)
	})

	t.Run("WrongSecret", func(t *testing.T) {
		tok, err := auth.MintHS256([]byte("another-secret-another-secret-another-secret"), auth.TokenRequest{
			Subject: "x", TenantID: tenantA, ProjectIDs: []string{projectA},
			Permissions: []app.Permission{app.PermissionAuditRead}, TTL: time.Hour,
		}, time.Now())
		require.NoError(t, err)
		res := b.graphql(t, tok, q, nil)
		require.Equal(t, http.StatusUnauthorized, res.Status)
		require.Equal(t, "UNAUTHENTICATED", res.code(t))
	})

	t.Run("ExpiredToken", func(t *testing.T) {
		tok := b.token(t, tokenOpts{ttl: time.Second, now: time.Now().Add(-time.Hour)})
		res := b.graphql(t, tok, q, nil)
		require.Equal(t, http.StatusUnauthorized, res.Status)
		require.Equal(t, "UNAUTHENTICATED", res.code(t))
		require.Equal(t, "token expired", res.Errors[0].Message)
	})

	t.Run("MissingPermission", func(t *testing.T) {
		writeOnly := b.token(t, tokenOpts{perms: []app.Permission{app.PermissionAuditWrite}})
		res := b.graphql(t, writeOnly, q, nil)
		require.Equal(t, "FORBIDDEN", res.code(t))

		readOnly := b.token(t, tokenOpts{perms: []app.Permission{app.PermissionAuditRead}})
		res = b.graphql(t, readOnly, recordEventMutation, map[string]any{"in": eventInput(projectA, "device.x.y")})
		require.Equal(t, "FORBIDDEN", res.code(t))
		require.Equal(t, 0, b.count(t, readOnly))

		// admin does not imply audit:read.
		admin := b.token(t, tokenOpts{perms: []app.Permission{app.PermissionAdmin}})
		res = b.graphql(t, admin, q, nil)
		require.Equal(t, "FORBIDDEN", res.code(t))
	})

	t.Run("ProjectNotInToken", func(t *testing.T) {
		tok := b.token(t, tokenOpts{})
		res := b.graphql(t, tok, `{ auditEvents(projectId: "proj-2") { edges { cursor } } }`, nil)
		require.Equal(t, "NOT_FOUND", res.code(t))

		res = b.graphql(t, tok, recordEventMutation, map[string]any{"in": eventInput(projectB, "device.x.y")})
		require.Equal(t, "NOT_FOUND", res.code(t))

		res = b.graphql(t, tok, `{ verifyAuditChain(projectId: "proj-2") { valid } }`, nil)
		require.Equal(t, "NOT_FOUND", res.code(t))

		res = b.graphql(t, tok, `{ auditEvent(projectId: "proj-2", id: "0190f5f5-0000-7000-8000-000000000000") { id } }`, nil)
		require.Equal(t, "NOT_FOUND", res.code(t))
	})
}

func TestGraphQLInvalidInput(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	tok := b.token(t, tokenOpts{})
	b.record(t, tok, eventInput(projectA, "device.firmware.updated"))

	for _, tt := range []struct {
		name   string
		mutate func(in map[string]any)
	}{
		{"BadAction", func(in map[string]any) { in["action"] = "Not Valid" }},
		{"DetailsArray", func(in map[string]any) { in["details"] = []any{1, 2} }},
		{"DetailsString", func(in map[string]any) { in["details"] = "text" }},
		{"OccurredAtMissing", func(in map[string]any) { delete(in, "occurredAt") }},
		{"OccurredAtMalformed", func(in map[string]any) { in["occurredAt"] = "yesterday" }},
		{"OccurredAtFarFuture", func(in map[string]any) {
			in["occurredAt"] = time.Now().Add(72 * time.Hour).UTC().Format(time.RFC3339)
		}},
		{"BadOutcome", func(in map[string]any) { in["outcome"] = "MAYBE" }},
		{"BadID", func(in map[string]any) { in["id"] = "not-a-uuid" }},
		{"BadTraceID", func(in map[string]any) { in["correlation"] = map[string]any{"traceId": "XYZ"} }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := eventInput(projectA, "device.firmware.updated")
			tt.mutate(in)
			res := b.graphql(t, tok, recordEventMutation, map[string]any{"in": in})
			require.Equal(t, "BAD_USER_INPUT", res.code(t), "%s", res.Raw)
			require.NotEqual(t, http.StatusInternalServerError, res.Status)

			// In a batch, one bad event refuses the whole batch.
			res = b.graphql(t, tok, recordEventsMutation, map[string]any{"in": map[string]any{
				"events": []any{eventInput(projectA, "device.good.one"), in},
			}})
			require.Equal(t, "BAD_USER_INPUT", res.code(t), "%s", res.Raw)
		})
	}
	// Nothing but the first event was recorded.
	require.Equal(t, 1, b.count(t, tok))

	t.Run("FieldNamesTheInput", func(t *testing.T) {
		in := eventInput(projectA, "Not Valid")
		res := b.graphql(t, tok, recordEventsMutation, map[string]any{"in": map[string]any{
			"events": []any{eventInput(projectA, "device.good.one"), in},
		}})
		require.Equal(t, "BAD_USER_INPUT", res.code(t))
		require.Equal(t, "events[1].action", res.Errors[0].Extensions["field"])
	})

	t.Run("EmptyBatch", func(t *testing.T) {
		res := b.graphql(t, tok, recordEventsMutation, map[string]any{"in": map[string]any{"events": []any{}}})
		require.Equal(t, "BAD_USER_INPUT", res.code(t))
	})

	t.Run("MalformedCursor", func(t *testing.T) {
		for _, cursor := range []string{"garbage!", "YWUxOng6MQ", strings.Repeat("A", 100)} {
			res := b.graphql(t, tok, listEventsQuery, map[string]any{"p": projectA, "after": cursor})
			require.Equal(t, "BAD_USER_INPUT", res.code(t), "cursor %q", cursor)
		}
	})

	t.Run("FirstOutOfRange", func(t *testing.T) {
		for _, first := range []int{0, -1, 501} {
			res := b.graphql(t, tok, listEventsQuery, map[string]any{"p": projectA, "first": first})
			require.Equal(t, "BAD_USER_INPUT", res.code(t), "first %d", first)
		}
	})

	t.Run("Uint64NotNumeric", func(t *testing.T) {
		res := b.graphql(t, tok, `{ verifyAuditChain(projectId: "proj-1", fromSequence: "abc") { valid } }`, nil)
		require.Equal(t, "BAD_USER_INPUT", res.code(t), "%s", res.Raw)

		res = b.graphql(t, tok, `query($f: Uint64) { verifyAuditChain(projectId: "proj-1", fromSequence: $f) { valid } }`,
			map[string]any{"f": "12x"})
		require.Equal(t, "BAD_USER_INPUT", res.code(t), "%s", res.Raw)

		res = b.graphql(t, tok, `query($f: Uint64) { verifyAuditChain(projectId: "proj-1", fromSequence: $f) { valid } }`,
			map[string]any{"f": "-1"})
		require.Equal(t, "BAD_USER_INPUT", res.code(t), "%s", res.Raw)

		res = b.graphql(t, tok, listEventsQuery, map[string]any{"p": projectA, "filter": map[string]any{"sequenceFrom": "one"}})
		require.Equal(t, "BAD_USER_INPUT", res.code(t), "%s", res.Raw)
	})

	t.Run("InvalidJSONBody", func(t *testing.T) {
		res := b.graphqlRaw(t, tok, []byte(`{"query": "{ auditEvents(projectId: \"proj-1\") { edges { cursor } } }", secret-body-text`))
		require.Equal(t, http.StatusBadRequest, res.Status)
		require.Equal(t, "BAD_USER_INPUT", res.code(t))
		require.NotContains(t, string(res.Raw), "secret-body-text", "the body is echoed back")
	})

	t.Run("SyntaxError", func(t *testing.T) {
		res := b.graphql(t, tok, `{ auditEvents(projectId: "proj-1") { edges { cursor }`, nil)
		require.NotEqual(t, http.StatusInternalServerError, res.Status)
		require.Equal(t, "BAD_USER_INPUT", res.code(t))
	})

	t.Run("UnknownField", func(t *testing.T) {
		res := b.graphql(t, tok, `{ auditEvents(projectId: "proj-1") { nope } }`, nil)
		require.Equal(t, "BAD_USER_INPUT", res.code(t))
	})

	require.Equal(t, 1, b.count(t, tok))
}

func TestGraphQLBodyLimit(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *server.Config) { c.MaxBodyBytes = 4096 })
	tok := b.token(t, tokenOpts{})

	big := eventInput(projectA, "device.firmware.updated")
	big["details"] = map[string]any{"blob": strings.Repeat("x", 5000)}
	body, err := json.Marshal(map[string]any{"query": recordEventMutation, "variables": map[string]any{"in": big}})
	require.NoError(t, err)
	require.Greater(t, len(body), 4096)

	t.Run("KnownLength", func(t *testing.T) {
		res := b.graphqlRaw(t, tok, body)
		require.Equal(t, http.StatusRequestEntityTooLarge, res.Status)
		require.Equal(t, "BAD_USER_INPUT", res.code(t))
	})

	t.Run("Chunked", func(t *testing.T) {
		// A reader of unknown length is sent chunked, without Content-Length.
		req, err := http.NewRequest(http.MethodPost, b.url+"/graphql", io.MultiReader(bytes.NewReader(body)))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		resp := do(t, req, tok)
		require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	})

	// A body under the limit passes.
	small := b.graphql(t, tok, recordEventMutation, map[string]any{"in": eventInput(projectA, "device.firmware.updated")})
	require.Empty(t, small.Errors, "%s", small.Raw)
	require.Equal(t, 1, b.count(t, tok), "the oversized request must not be recorded")
}

func TestGraphQLDepthLimit(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *server.Config) { c.MaxDepth = 2 })
	tok := b.token(t, tokenOpts{})

	shallow := b.graphql(t, tok, `{ auditEvent(projectId: "proj-1", id: "0190f5f5-0000-7000-8000-000000000000") { id } }`, nil)
	require.Empty(t, shallow.Errors, "%s", shallow.Raw)

	deep := b.graphql(t, tok, `{ auditEvents(projectId: "proj-1") { edges { node { id } } } }`, nil)
	require.Equal(t, "BAD_USER_INPUT", deep.code(t), "%s", deep.Raw)
	require.True(t, len(deep.Data) == 0 || string(deep.Data) == "null", "data: %s", deep.Data)

	// Fragments count too.
	frag := b.graphql(t, tok, `{ auditEvent(projectId: "proj-1", id: "x") { ...F } } fragment F on AuditEvent { subject { id } }`, nil)
	require.Equal(t, "BAD_USER_INPUT", frag.code(t), "%s", frag.Raw)

	// A deep mutation is refused before it runs.
	res := b.graphql(t, tok, recordEventMutation, map[string]any{"in": eventInput(projectA, "device.firmware.updated")})
	require.Equal(t, "BAD_USER_INPUT", res.code(t))
	res = b.graphql(t, tok, `mutation($in: RecordAuditEventInput!) { recordAuditEvent(input: $in) { __typename } }`,
		map[string]any{"in": eventInput(projectA, "device.firmware.updated")})
	require.Empty(t, res.Errors, "%s", res.Raw)
	var data struct {
		VerifyAuditChain struct {
			HeadSequence string `json:"headSequence"`
		} `json:"verifyAuditChain"`
	}
	b.graphql(t, tok, `{ verifyAuditChain(projectId: "proj-1") { headSequence } }`, nil).decode(t, &data)
	require.Equal(t, "1", data.VerifyAuditChain.HeadSequence, "only the shallow mutation ran")
}

func TestGraphQLComplexityLimit(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *server.Config) { c.ComplexityLimit = 5 })
	tok := b.token(t, tokenOpts{})

	ok := b.graphql(t, tok, `{ auditEvent(projectId: "proj-1", id: "0190f5f5-0000-7000-8000-000000000000") { id } }`, nil)
	require.Empty(t, ok.Errors, "%s", ok.Raw)

	res := b.graphql(t, tok, `{ auditEvent(projectId: "proj-1", id: "0190f5f5-0000-7000-8000-000000000000") {
  id tenantId projectId sequence action occurredAt recordedAt chainHash } }`, nil)
	code := res.code(t)
	require.True(t, documentedCodes[code], "code %q is not one of the documented set (%s)", code, res.Raw)
	require.True(t, len(res.Data) == 0 || string(res.Data) == "null", "data: %s", res.Data)
	require.Contains(t, res.Errors[0].Message, "complexity")
}

func TestGraphQLIdempotency(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	tok := b.token(t, tokenOpts{})

	t.Run("EventID", func(t *testing.T) {
		in := eventInput(projectA, "device.firmware.updated")
		in["id"] = "0190f5f5-1111-7000-8000-000000000001"
		first := b.record(t, tok, in)
		require.Equal(t, in["id"], first[0].ID)
		again := b.record(t, tok, in)
		require.Equal(t, first, again, "a resend returns the stored event")

		// Resent inside a batch, next to a new event.
		batch := b.record(t, tok, eventInput(projectA, "device.other.event"), in)
		require.Equal(t, first[0], batch[1])
		require.Equal(t, "2", batch[0].Sequence)

		changed := eventInput(projectA, "device.firmware.failed")
		changed["id"] = in["id"]
		res := b.graphql(t, tok, recordEventMutation, map[string]any{"in": changed})
		require.Equal(t, "IDEMPOTENCY_CONFLICT", res.code(t))

		changedDetails := eventInput(projectA, "device.firmware.updated")
		changedDetails["id"] = in["id"]
		changedDetails["details"] = map[string]any{"firmware": "9.9.9"}
		res = b.graphql(t, tok, recordEventMutation, map[string]any{"in": changedDetails})
		require.Equal(t, "IDEMPOTENCY_CONFLICT", res.code(t))

		// A batch holding a conflicting event is refused as a whole.
		res = b.graphql(t, tok, recordEventsMutation, map[string]any{"in": map[string]any{
			"events": []any{eventInput(projectA, "device.third.event"), changed},
		}})
		require.Equal(t, "IDEMPOTENCY_CONFLICT", res.code(t))
		require.Equal(t, 2, b.count(t, tok))
	})

	t.Run("BatchKey", func(t *testing.T) {
		start := b.count(t, tok)
		e1 := eventInput(projectA, "device.batch.one")
		e1["id"] = "0190f5f5-2222-7000-8000-000000000001"
		e2 := eventInput(projectA, "device.batch.two")
		e2["id"] = "0190f5f5-2222-7000-8000-000000000002"
		send := func(events ...any) *gqlResult {
			return b.graphql(t, tok, recordEventsMutation, map[string]any{"in": map[string]any{
				"events": events, "idempotencyKey": "batch-key-1",
			}})
		}
		type payload struct {
			RecordAuditEvents struct{ Events []event } `json:"recordAuditEvents"`
		}
		var first, again payload
		send(e1, e2).decode(t, &first)
		require.Len(t, first.RecordAuditEvents.Events, 2)
		send(e1, e2).decode(t, &again)
		require.Equal(t, first, again)

		res := send(e2, e1)
		require.Equal(t, "IDEMPOTENCY_CONFLICT", res.code(t), "another order is another request")
		e3 := eventInput(projectA, "device.batch.three")
		res = send(e1, e3)
		require.Equal(t, "IDEMPOTENCY_CONFLICT", res.code(t))
		require.Equal(t, start+2, b.count(t, tok))
	})

	t.Run("BatchKeyWithoutEventIDs", func(t *testing.T) {
		// The request fingerprint covers the events as sent, before the
		// server generates their ids, so an identical retry replays.
		start := b.count(t, tok)
		send := func() *gqlResult {
			return b.graphql(t, tok, recordEventsMutation, map[string]any{"in": map[string]any{
				"events":         []any{eventInput(projectA, "device.noid.one"), eventInput(projectA, "device.noid.two")},
				"idempotencyKey": "batch-key-2",
			}})
		}
		type payload struct {
			RecordAuditEvents struct{ Events []event } `json:"recordAuditEvents"`
		}
		var first, again payload
		send().decode(t, &first)
		send().decode(t, &again)
		require.Equal(t, first, again)
		require.Equal(t, start+2, b.count(t, tok))
	})
}

// problemBody is an RFC 9457 problem.
type problemBody struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	Code   string `json:"code"`
	Field  string `json:"field"`
}

// getPath sends GET path (with query) with token and optional header pairs.
func (b *testBundle) getPath(t *testing.T, token, path string, header ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, b.url+path, nil)
	require.NoError(t, err)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return do(t, req, token)
}

// requireProblem checks that resp is a problem+json answer of status and
// code and returns it.
func requireProblem(t *testing.T, resp *http.Response, status int, code string) problemBody {
	t.Helper()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, status, resp.StatusCode, "body: %s", raw)
	require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
	var p problemBody
	require.NoError(t, json.Unmarshal(raw, &p), "body: %s", raw)
	require.Equal(t, status, p.Status)
	require.Equal(t, code, p.Code)
	require.True(t, strings.HasSuffix(p.Type, "/"+code), "type %q", p.Type)
	return p
}

type restList struct {
	Events     []map[string]any `json:"events"`
	NextCursor *string          `json:"nextCursor"`
}

func (b *testBundle) restList(t *testing.T, token string, query url.Values) restList {
	t.Helper()
	resp := b.getPath(t, token, "/api/v1/audit/events?"+query.Encode())
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "body: %s", raw)
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	var l restList
	require.NoError(t, json.Unmarshal(raw, &l), "body: %s", raw)
	require.NotNil(t, l.Events, "events must be an array: %s", raw)
	return l
}

func restSeqs(l restList) []string {
	out := make([]string, len(l.Events))
	for i, e := range l.Events {
		s, _ := e["sequence"].(string)
		out[i] = s
	}
	return out
}

func TestRESTListAuditEvents(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	tok := b.token(t, tokenOpts{})

	full := eventInput(projectA, "device.firmware.updated")
	full["governance"] = map[string]any{"reason": "planned rollout", "ticket": "CHG-1", "risk": "HIGH", "confirmedBy": "bob"}
	full["correlation"] = map[string]any{"traceId": "4bf92f3577b34da6a3ce929d0e0e4736", "requestId": "r-1", "causationId": "c-1"}
	full["evidenceDigests"] = []any{map[string]any{"algorithm": "sha256", "value": strings.Repeat("ab", 32), "label": "image"}}
	full["details"] = map[string]any{"nested": map[string]any{"b": []any{1, "two", true, nil}, "a": 1.5}, "unicode": "é<>&"}
	b.record(t, tok, full)
	b.recordN(t, tok, 4, "user.login")

	t.Run("Paging", func(t *testing.T) {
		page := b.restList(t, tok, url.Values{"projectId": {projectA}, "limit": {"2"}})
		require.Equal(t, []string{"1", "2"}, restSeqs(page))
		require.NotNil(t, page.NextCursor)

		page = b.restList(t, tok, url.Values{"projectId": {projectA}, "limit": {"2"}, "cursor": {*page.NextCursor}})
		require.Equal(t, []string{"3", "4"}, restSeqs(page))
		require.NotNil(t, page.NextCursor)

		page = b.restList(t, tok, url.Values{"projectId": {projectA}, "limit": {"2"}, "cursor": {*page.NextCursor}})
		require.Equal(t, []string{"5"}, restSeqs(page))
		require.Nil(t, page.NextCursor)

		// The raw body spells a missing next cursor as null.
		resp := b.getPath(t, tok, "/api/v1/audit/events?projectId=proj-1&afterSequence=5")
		raw, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.JSONEq(t, `{"events":[],"nextCursor":null}`, string(raw))
	})

	t.Run("AfterSequence", func(t *testing.T) {
		page := b.restList(t, tok, url.Values{"projectId": {projectA}, "afterSequence": {"3"}})
		require.Equal(t, []string{"4", "5"}, restSeqs(page))
		require.Nil(t, page.NextCursor)

		page = b.restList(t, tok, url.Values{"projectId": {projectA}, "order": {"newest"}, "limit": {"2"}})
		require.Equal(t, []string{"5", "4"}, restSeqs(page))
	})

	t.Run("Filter", func(t *testing.T) {
		page := b.restList(t, tok, url.Values{"projectId": {projectA}, "action": {"device.*"}})
		require.Equal(t, []string{"1"}, restSeqs(page))
		page = b.restList(t, tok, url.Values{"projectId": {projectA}, "action": {"user.login"}, "sequenceFrom": {"4"}})
		require.Equal(t, []string{"4", "5"}, restSeqs(page))
	})

	t.Run("SameShapeAsGraphQL", func(t *testing.T) {
		for _, seq := range []string{"1", "2"} {
			res := b.graphql(t, tok, listEventsQuery, map[string]any{"p": projectA, "first": 1, "filter": map[string]any{"sequenceFrom": seq}})
			var data struct {
				AuditEvents struct {
					Edges []struct {
						Node map[string]any `json:"node"`
					} `json:"edges"`
				} `json:"auditEvents"`
			}
			res.decode(t, &data)
			require.Len(t, data.AuditEvents.Edges, 1)
			gql := data.AuditEvents.Edges[0].Node

			page := b.restList(t, tok, url.Values{"projectId": {projectA}, "limit": {"1"}, "sequenceFrom": {seq}})
			require.Len(t, page.Events, 1)
			require.Equal(t, gql, page.Events[0], "event %s differs between GraphQL and REST", seq)
			require.Equal(t, seq, page.Events[0]["sequence"])
		}
	})

	t.Run("BadRequests", func(t *testing.T) {
		for _, q := range []string{
			"projectId=proj-1&bogus=1",
			"projectId=proj-1&limit=0",
			"projectId=proj-1&limit=501",
			"projectId=proj-1&limit=-3",
			"projectId=proj-1&limit=ten",
			"limit=2",
			"projectId=",
			"projectId=proj-1&afterSequence=x",
			"projectId=proj-1&cursor=%21%21",
			"projectId=proj-1&order=sideways",
			"projectId=proj-1&occurredFrom=yesterday",
			"projectId=proj-1&projectId=proj-1",
			"projectId=proj-1&action=Bad",
		} {
			resp := b.getPath(t, tok, "/api/v1/audit/events?"+q)
			p := requireProblem(t, resp, http.StatusBadRequest, "BAD_USER_INPUT")
			require.NotEmpty(t, p.Detail, q)
		}
		resp := b.getPath(t, tok, "/api/v1/audit/events?projectId=proj-1&bogus=1")
		p := requireProblem(t, resp, http.StatusBadRequest, "BAD_USER_INPUT")
		require.Equal(t, "bogus", p.Field)
		resp = b.getPath(t, tok, "/api/v1/audit/events?projectId=proj-1&limit=501")
		p = requireProblem(t, resp, http.StatusBadRequest, "BAD_USER_INPUT")
		require.Equal(t, "limit", p.Field, "the problem names the REST parameter")
	})

	t.Run("OtherProject", func(t *testing.T) {
		resp := b.getPath(t, tok, "/api/v1/audit/events?projectId=proj-2")
		requireProblem(t, resp, http.StatusNotFound, "NOT_FOUND")
	})

	t.Run("OtherTenant", func(t *testing.T) {
		tokB := b.token(t, tokenOpts{tenant: tenantB})
		page := b.restList(t, tokB, url.Values{"projectId": {projectA}})
		require.Empty(t, page.Events)
	})

	t.Run("Forbidden", func(t *testing.T) {
		writeOnly := b.token(t, tokenOpts{perms: []app.Permission{app.PermissionAuditWrite}})
		resp := b.getPath(t, writeOnly, "/api/v1/audit/events?projectId=proj-1")
		requireProblem(t, resp, http.StatusForbidden, "FORBIDDEN")
	})

	t.Run("NoToken", func(t *testing.T) {
		resp := b.getPath(t, "", "/api/v1/audit/events?projectId=proj-1")
		require.Contains(t, resp.Header.Get("WWW-Authenticate"), "Bearer")
		requireProblem(t, resp, http.StatusUnauthorized, "UNAUTHENTICATED")

		expired := b.token(t, tokenOpts{ttl: time.Second, now: time.Now().Add(-time.Hour)})
		resp = b.getPath(t, expired, "/api/v1/audit/events?projectId=proj-1")
		p := requireProblem(t, resp, http.StatusUnauthorized, "UNAUTHENTICATED")
		require.Equal(t, "token expired", p.Detail)
	})
}

// sseEvent is one Server-Sent Event.
type sseEvent struct {
	id, event, data string
}

// readSSE reads a whole event stream, requiring every event to be exactly
// "id: <n>\nevent: audit\ndata: <json>\n\n".
func readSSE(t *testing.T, body io.Reader) []sseEvent {
	t.Helper()
	r := bufio.NewReaderSize(body, 1<<16)
	var out []sseEvent
	for {
		line, err := r.ReadString('\n')
		if errors.Is(err, io.EOF) {
			require.Empty(t, line, "stream ends inside an event")
			return out
		}
		require.NoError(t, err)
		id, ok := strings.CutPrefix(line, "id: ")
		require.True(t, ok, "expected an id line, got %q", line)
		ev, err := r.ReadString('\n')
		require.NoError(t, err)
		require.Equal(t, "event: audit\n", ev)
		data, err := r.ReadString('\n')
		require.NoError(t, err)
		d, ok := strings.CutPrefix(data, "data: ")
		require.True(t, ok, "expected a data line, got %q", data)
		blank, err := r.ReadString('\n')
		require.NoError(t, err)
		require.Equal(t, "\n", blank)
		out = append(out, sseEvent{id: strings.TrimSuffix(id, "\n"), event: "audit", data: strings.TrimSuffix(d, "\n")})
	}
}

// stream opens the SSE endpoint and returns its events once it ends.
func (b *testBundle) stream(t *testing.T, token, query string, header ...string) []sseEvent {
	t.Helper()
	resp := b.getPath(t, token, "/api/v1/audit/events/stream?"+query, header...)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	return readSSE(t, resp.Body)
}

func requireDense(t *testing.T, events []sseEvent, from, to int) {
	t.Helper()
	require.Len(t, events, to-from+1)
	for i, e := range events {
		want := strconv.Itoa(from + i)
		require.Equal(t, want, e.id, "event %d", i)
		var body struct {
			Sequence string `json:"sequence"`
		}
		require.NoError(t, json.Unmarshal([]byte(e.data), &body))
		require.Equal(t, want, body.Sequence)
	}
}

func TestSSEStream(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	tok := b.token(t, tokenOpts{})
	b.recordN(t, tok, 4, "device.firmware.updated")

	t.Run("All", func(t *testing.T) {
		events := b.stream(t, tok, "projectId=proj-1")
		requireDense(t, events, 1, 4)

		// The data is the same event JSON as REST.
		page := b.restList(t, tok, url.Values{"projectId": {projectA}, "limit": {"1"}})
		var data map[string]any
		require.NoError(t, json.Unmarshal([]byte(events[0].data), &data))
		require.Equal(t, page.Events[0], data)
	})

	t.Run("LastEventID", func(t *testing.T) {
		requireDense(t, b.stream(t, tok, "projectId=proj-1", "Last-Event-ID", "2"), 3, 4)
		requireDense(t, b.stream(t, tok, "projectId=proj-1&afterSequence=1"), 2, 4)
		require.Empty(t, b.stream(t, tok, "projectId=proj-1", "Last-Event-ID", "4"))
	})

	t.Run("Filter", func(t *testing.T) {
		b.record(t, tok, eventInput(projectA, "user.login"))
		events := b.stream(t, tok, "projectId=proj-1&action=user.*")
		require.Len(t, events, 1)
		require.Equal(t, "5", events[0].id)
	})

	t.Run("Refusals", func(t *testing.T) {
		for _, v := range []string{"abc", "-1", "1.5"} {
			resp := b.getPath(t, tok, "/api/v1/audit/events/stream?projectId=proj-1", "Last-Event-ID", v)
			requireProblem(t, resp, http.StatusBadRequest, "BAD_USER_INPUT")
		}
		requireProblem(t, b.getPath(t, tok, "/api/v1/audit/events/stream?projectId=proj-1&limit=5"), http.StatusBadRequest, "BAD_USER_INPUT")
		requireProblem(t, b.getPath(t, tok, "/api/v1/audit/events/stream"), http.StatusBadRequest, "BAD_USER_INPUT")
		requireProblem(t, b.getPath(t, tok, "/api/v1/audit/events/stream?projectId=proj-2"), http.StatusNotFound, "NOT_FOUND")
		resp := b.getPath(t, "", "/api/v1/audit/events/stream?projectId=proj-1")
		require.Contains(t, resp.Header.Get("WWW-Authenticate"), "Bearer")
		requireProblem(t, resp, http.StatusUnauthorized, "UNAUTHENTICATED")
	})
}

func TestSSEStreamManyPages(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	tok := b.token(t, tokenOpts{})
	const total, batch = 1200, 400
	for i := 0; i < total/batch; i++ {
		got := b.recordN(t, tok, batch, "device.telemetry.sampled")
		require.Equal(t, strconv.Itoa(i*batch+1), got[0].Sequence)
	}

	requireDense(t, b.stream(t, tok, "projectId=proj-1"), 1, total)
	// Resuming right at and around a page boundary.
	requireDense(t, b.stream(t, tok, "projectId=proj-1", "Last-Event-ID", "499"), 500, total)
	requireDense(t, b.stream(t, tok, "projectId=proj-1", "Last-Event-ID", "500"), 501, total)
	requireDense(t, b.stream(t, tok, "projectId=proj-1", "Last-Event-ID", "1000"), 1001, total)
}

func TestHealth(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)

	resp := b.getPath(t, "", "/healthz")
	require.Equal(t, http.StatusOK, resp.StatusCode)

	resp = b.getPath(t, "", "/readyz")
	require.Equal(t, http.StatusOK, resp.StatusCode)

	notReady := fmt.Errorf("database unreachable")
	b.ready.Store(&notReady)
	resp = b.getPath(t, "", "/readyz")
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NotContains(t, string(raw), "database unreachable", "the cause is logged, not shown")

	// /healthz does not depend on readiness.
	resp = b.getPath(t, "", "/healthz")
	require.Equal(t, http.StatusOK, resp.StatusCode)

	b.ready.Store(nil)
	resp = b.getPath(t, "", "/readyz")
	require.Equal(t, http.StatusOK, resp.StatusCode)

	for _, path := range []string{"/nope", "/api/v1/audit", "/api/v1/audit/events/other"} {
		p := requireProblem(t, b.getPath(t, "", path), http.StatusNotFound, "NOT_FOUND")
		require.NotEmpty(t, p.Detail)
	}

	// Only GET serves the REST endpoint.
	req, err := http.NewRequest(http.MethodPost, b.url+"/api/v1/audit/events?projectId=proj-1", strings.NewReader("{}"))
	require.NoError(t, err)
	resp = do(t, req, b.token(t, tokenOpts{}))
	require.NotEqual(t, http.StatusOK, resp.StatusCode)
}

// TestGraphQLComplexityScalesWithPageSize: a connection costs its selection
// times its page size, so the default limit admits the largest page with
// every field while a lower limit refuses large pages but not small ones.
func TestGraphQLComplexityScalesWithPageSize(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	tok := b.token(t, tokenOpts{})
	res := b.graphql(t, tok, listEventsQuery, map[string]any{"p": projectA, "first": 500})
	require.Empty(t, res.Errors, "%s", res.Raw)

	small := setup(t, func(c *server.Config) { c.ComplexityLimit = 2000 })
	tok = small.token(t, tokenOpts{})
	res = small.graphql(t, tok, listEventsQuery, map[string]any{"p": projectA, "first": 500})
	require.Equal(t, "BAD_USER_INPUT", res.code(t), "%s", res.Raw)
	require.Contains(t, res.Errors[0].Message, "complexity")
	res = small.graphql(t, tok, listEventsQuery, map[string]any{"p": projectA, "first": 10})
	require.Empty(t, res.Errors, "%s", res.Raw)
}

// TestGraphQLRequestGate: requests the transports cannot take get a coded
// error too.
func TestGraphQLRequestGate(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	tok := b.token(t, tokenOpts{})
	for _, tc := range []struct {
		method, contentType string
		status              int
	}{
		{http.MethodPost, "text/plain", http.StatusUnsupportedMediaType},
		{http.MethodPost, "", http.StatusUnsupportedMediaType},
		{http.MethodPut, "application/json", http.StatusMethodNotAllowed},
		{http.MethodDelete, "", http.StatusMethodNotAllowed},
	} {
		req, err := http.NewRequest(tc.method, b.url+"/graphql", strings.NewReader(`{"query":"{ __typename }"}`))
		require.NoError(t, err)
		if tc.contentType != "" {
			req.Header.Set("Content-Type", tc.contentType)
		}
		resp := do(t, req, tok)
		raw, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, tc.status, resp.StatusCode, "%s %s: %s", tc.method, tc.contentType, raw)
		var body struct {
			Errors []struct {
				Extensions struct {
					Code string `json:"code"`
				} `json:"extensions"`
			} `json:"errors"`
		}
		require.NoError(t, json.Unmarshal(raw, &body))
		require.Len(t, body.Errors, 1)
		require.Equal(t, "BAD_USER_INPUT", body.Errors[0].Extensions.Code)
	}
}

// TestRESTProblemsNameRESTParameters: errors of the shared query name the
// REST parameter the client sent, not the GraphQL argument.
func TestRESTProblemsNameRESTParameters(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	tok := b.token(t, tokenOpts{})
	for query, field := range map[string]string{
		"projectId=proj-1&cursor=bm9wZQ":               "cursor",
		"projectId=proj-1&action=Not.Valid":            "action",
		"projectId=proj-1&outcome=MAYBE":               "outcome",
		"projectId=proj-1&sequenceFrom=5&sequenceTo=4": "sequenceTo",
	} {
		resp := b.getPath(t, tok, "/api/v1/audit/events?"+query)
		p := requireProblem(t, resp, http.StatusBadRequest, "BAD_USER_INPUT")
		require.Equal(t, field, p.Field, query)
	}
}

// syncBuffer is a log sink safe for concurrent writers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// TestInternalErrorsRevealNothing: when the database fails, every interface
// answers INTERNAL with a generic message, and the cause goes to the log only.
func TestInternalErrorsRevealNothing(t *testing.T) {
	t.Parallel()
	broken := storetest.NewPool(t)
	broken.Close()
	var logs syncBuffer
	b := setup(t, func(c *server.Config) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		c.App = app.New(store.New(broken), app.Config{Logger: c.Logger})
	})
	tok := b.token(t, tokenOpts{})

	for name, res := range map[string]*gqlResult{
		"query":    b.graphql(t, tok, `{ auditEvents(projectId: "proj-1") { edges { cursor } } }`, nil),
		"mutation": b.graphql(t, tok, recordEventMutation, map[string]any{"in": eventInput(projectA, "device.registered")}),
	} {
		require.Equal(t, "INTERNAL", res.code(t), "%s: %s", name, res.Raw)
		require.Equal(t, "internal error", res.Errors[0].Message, name)
		require.NotContains(t, string(res.Raw), "closed", name)
	}
	resp := b.getPath(t, tok, "/api/v1/audit/events?projectId=proj-1")
	p := requireProblem(t, resp, http.StatusInternalServerError, "INTERNAL")
	require.Equal(t, "internal error", p.Detail)
	require.Contains(t, logs.String(), "closed pool", "the cause is logged")
}

// TestGraphQLAutomaticPersistedQueries: a query registered with its hash can
// then be sent by hash alone; an unknown hash asks for the query.
func TestGraphQLAutomaticPersistedQueries(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	tok := b.token(t, tokenOpts{})
	query := `{ auditEvents(projectId: "proj-1") { edges { cursor } } }`
	sum := sha256.Sum256([]byte(query))
	ext := map[string]any{"persistedQuery": map[string]any{"version": 1, "sha256Hash": hex.EncodeToString(sum[:])}}

	send := func(body map[string]any) *gqlResult {
		raw, err := json.Marshal(body)
		require.NoError(t, err)
		return b.graphqlRaw(t, tok, raw)
	}
	res := send(map[string]any{"extensions": ext})
	require.NotEmpty(t, res.Errors)
	require.Contains(t, res.Errors[0].Message, "PersistedQueryNotFound")

	res = send(map[string]any{"query": query, "extensions": ext})
	require.Empty(t, res.Errors, "%s", res.Raw)
	res = send(map[string]any{"extensions": ext})
	require.Empty(t, res.Errors, "%s", res.Raw)
	require.Contains(t, string(res.Data), "auditEvents")
}

// TestGraphQLIntrospectionSwitch: introspection is on by default and can be
// switched off.
func TestGraphQLIntrospectionSwitch(t *testing.T) {
	t.Parallel()
	const q = `{ __schema { queryType { name } } }`
	on := setup(t, nil)
	res := on.graphql(t, on.token(t, tokenOpts{}), q, nil)
	require.Empty(t, res.Errors, "%s", res.Raw)
	require.Contains(t, string(res.Data), `"Query"`)

	off := setup(t, func(c *server.Config) { c.DisableIntrospection = true })
	res = off.graphql(t, off.token(t, tokenOpts{}), q, nil)
	require.NotEmpty(t, res.Errors, "%s", res.Raw)
	require.Equal(t, "BAD_USER_INPUT", res.code(t))
}
