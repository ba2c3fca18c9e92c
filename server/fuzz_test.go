package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/auth"
	"github.com/aetheriot/aether-audit/export"
	"github.com/aetheriot/aether-audit/secrets"
	"github.com/aetheriot/aether-audit/server"
	"github.com/aetheriot/aether-audit/store"
	"github.com/aetheriot/aether-audit/store/storetest"
)

// The fuzz targets of this file drive the real handlers in-process
// (ServeHTTP) over one real database per target and process, reused by
// every input: a fresh database per input would make fuzzing crawl. Each
// input must get a success or a refusal carrying one of the documented
// codes, with the status of that code, and never a 5xx (a panic in a
// handler would surface as one, or as INTERNAL in GraphQL). Their seed
// corpora are in testdata/fuzz/FuzzXxx and run with every go test.

// fuzzServer is the handler a fuzz target drives, with a token of tenant A
// for every project ("*"), holding every permission, so that any project id
// reaches the use cases.
type fuzzServer struct {
	handler http.Handler
	token   string
	// cursors are those of the events recorded at setup, oldest first.
	cursors []string
}

// fuzzDownloadKey signs the download capabilities of newFuzzServer's app.
var fuzzDownloadKey = []byte("0123456789abcdef0123456789abcdef-fuzz-download-key")

// newFuzzServer serves an app configured for webhooks and exports over a
// fresh database holding a few events of project A.
func newFuzzServer(tb testing.TB) *fuzzServer {
	tb.Helper()
	ctx := context.Background()
	pool := storetest.NewPool(tb)
	secret := []byte("0123456789abcdef0123456789abcdef-fuzz-test")
	verifier := testVerifier(tb, secret)
	box, err := secrets.NewBox(make([]byte, secrets.KeySize))
	require.NoError(tb, err)
	bucket, err := export.OpenBucket(ctx, "file://"+tb.TempDir())
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = bucket.Close() })

	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	application := app.New(store.New(pool), app.Config{
		Logger:   logger,
		Webhooks: app.WebhookConfig{Box: box},
		Exports:  app.ExportConfig{Bucket: bucket, DownloadKey: fuzzDownloadKey},
	})
	tok, err := auth.MintHS256(secret, auth.TokenRequest{
		Subject: "fuzzer", TenantID: tenantA, ProjectIDs: []string{app.AllProjects},
		Permissions: []app.Permission{
			app.PermissionAuditRead, app.PermissionAuditWrite,
			app.PermissionWebhooksRead, app.PermissionWebhooksWrite, app.PermissionDeliveriesRedrive,
			app.PermissionExportsRead, app.PermissionExportsWrite, app.PermissionExportsDownload,
		},
		// Long enough for any bounded fuzzing run.
		TTL: 24 * time.Hour,
	}, time.Now())
	require.NoError(tb, err)
	s := &fuzzServer{
		handler: server.New(server.Config{App: application, Verifier: verifier, Logger: logger}),
		token:   tok,
	}
	events := make([]any, 3)
	for i := range events {
		events[i] = eventInput(projectA, "device.reboot")
	}
	res := s.graphql(tb, recordEventsMutation, map[string]any{"in": map[string]any{"events": events}})
	require.Empty(tb, res.Errors, "recording the setup events: %s", res.Raw)
	page := s.graphql(tb, `{ auditEvents(projectId: "`+projectA+`") { edges { cursor } } }`, nil)
	var data struct {
		AuditEvents struct{ Edges []struct{ Cursor string } } `json:"auditEvents"`
	}
	require.NoError(tb, json.Unmarshal(page.Data, &data), "%s", page.Raw)
	for _, e := range data.AuditEvents.Edges {
		s.cursors = append(s.cursors, e.Cursor)
	}
	require.Len(tb, s.cursors, len(events))
	return s
}

// serve runs req through the handler with the fuzz token (when auth) and a
// bounded context.
func (s *fuzzServer) serve(req *http.Request, auth bool) *httptest.ResponseRecorder {
	if auth {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	ctx, cancel := context.WithTimeout(req.Context(), time.Minute)
	defer cancel()
	rec := httptest.NewRecorder()
	s.handler.ServeHTTP(rec, req.WithContext(ctx))
	return rec
}

// graphql POSTs one operation; vars are encoded with encoding/json.
func (s *fuzzServer) graphql(tb testing.TB, query string, vars map[string]any, header ...string) *gqlResult {
	tb.Helper()
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	require.NoError(tb, err)
	req := httptest.NewRequest(http.MethodPost, "/graphql", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := s.serve(req, true)
	res := &gqlResult{Status: rec.Code, Header: rec.Header(), Raw: rec.Body.Bytes()}
	require.Less(tb, rec.Code, 500, "GraphQL answered %d: %s", rec.Code, res.Raw)
	require.NoError(tb, json.Unmarshal(res.Raw, res), "GraphQL body: %s", res.Raw)
	return res
}

// requireDocumentedErrors fails unless every GraphQL error carries a
// documented code other than INTERNAL (which stands for a bug or a panic:
// bad input is never an internal error).
func requireDocumentedErrors(tb testing.TB, res *gqlResult) {
	tb.Helper()
	for _, e := range res.Errors {
		code, _ := e.Extensions["code"].(string)
		require.True(tb, documentedCodes[code], "undocumented code %q in %s", code, res.Raw)
		require.NotEqual(tb, "INTERNAL", code, "bad input answered INTERNAL: %s", res.Raw)
	}
}

// requireRESTAnswer fails unless rec is a success with content type
// wantType, or a problem+json refusal with a documented code other than
// INTERNAL whose status is the code's own (or one of extraStatus, for the
// download's 403 and 410).
func requireRESTAnswer(tb testing.TB, rec *httptest.ResponseRecorder, wantType string, extraStatus ...int) {
	tb.Helper()
	body := rec.Body.Bytes()
	require.Less(tb, rec.Code, 500, "answered %d: %s", rec.Code, body)
	if rec.Code < 300 {
		require.True(tb, strings.HasPrefix(rec.Header().Get("Content-Type"), wantType),
			"content type %q: %s", rec.Header().Get("Content-Type"), body)
		return
	}
	require.Equal(tb, "application/problem+json", rec.Header().Get("Content-Type"), "%d: %s", rec.Code, body)
	var p problemBody
	require.NoError(tb, json.Unmarshal(body, &p), "problem body: %s", body)
	require.True(tb, documentedCodes[p.Code], "undocumented code %q: %s", p.Code, body)
	require.NotEqual(tb, "INTERNAL", p.Code, "bad input answered INTERNAL: %s", body)
	require.Equal(tb, rec.Code, p.Status, "%s", body)
	if app.Code(p.Code).HTTPStatus() != rec.Code {
		require.Contains(tb, extraStatus, rec.Code, "status %d for code %s: %s", rec.Code, p.Code, body)
	}
}

// jsonValue is s as a GraphQL variable: the JSON value s spells when it is
// valid JSON (numbers, objects, strings in quotes...), else s as a string.
// Either way the input reaches the server's coercion of variables.
func jsonValue(s string) any {
	if json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	return s
}

const fuzzListQuery = `query($p: ID!, $first: Int, $after: String, $order: AuditOrder, $filter: AuditEventFilter) {
  auditEvents(projectId: $p, first: $first, after: $after, order: $order, filter: $filter) {
    edges { cursor node { sequence action occurredAt outcome } }
    pageInfo { hasNextPage endCursor }
  }
}`

// FuzzAuditEventSearch sends one search (filters, time ranges, cursor,
// page size, order) both to REST GET /api/v1/audit/events, where each value
// is a query parameter as given (any bytes), and to GraphQL auditEvents,
// where each is a variable. Both must answer a page or BAD_USER_INPUT (or
// another documented refusal), never a 5xx or INTERNAL.
func FuzzAuditEventSearch(f *testing.F) {
	s := newFuzzServer(f)
	// projectId, action, subjectId, resourceType, resourceId, outcome,
	// occurredFrom, occurredTo, sequenceFrom, sequenceTo, cursor, limit,
	// order.
	f.Add(projectA, "device.*", "user-1", "device", "dev-1", "SUCCESS,failure", "2026-01-01T00:00:00Z", "2026-02-01T00:00:00Z", "1", "3", s.cursors[0], "2", "oldest")
	f.Add(projectA, "", "", "", "", "", "", "", "", "", s.cursors[1], "", "newest")
	f.Fuzz(func(t *testing.T, projectID, action, subjectID, resourceType, resourceID, outcome, occurredFrom, occurredTo,
		sequenceFrom, sequenceTo, cursor, limit, order string) {
		q := url.Values{"projectId": {projectID}}
		filter := map[string]any{}
		for _, p := range []struct{ name, value string }{
			{"action", action}, {"subjectId", subjectID}, {"resourceType", resourceType}, {"resourceId", resourceID},
			{"outcome", outcome}, {"occurredFrom", occurredFrom}, {"occurredTo", occurredTo},
			{"sequenceFrom", sequenceFrom}, {"sequenceTo", sequenceTo},
		} {
			if p.value == "" {
				continue
			}
			q.Set(p.name, p.value)
			if p.name == "outcome" && !json.Valid([]byte(p.value)) {
				var list []any
				for _, o := range strings.Split(p.value, ",") {
					list = append(list, o)
				}
				filter[p.name] = list
				continue
			}
			filter[p.name] = jsonValue(p.value)
		}
		vars := map[string]any{"p": jsonValue(projectID), "filter": filter}
		for _, p := range []struct{ rest, gql, value string }{
			{"cursor", "after", cursor}, {"limit", "first", limit}, {"order", "order", order},
		} {
			if p.value == "" {
				continue
			}
			q.Set(p.rest, p.value)
			vars[p.gql] = jsonValue(p.value)
		}

		req := httptest.NewRequest(http.MethodGet, "/api/v1/audit/events", nil)
		req.URL.RawQuery = q.Encode()
		rec := s.serve(req, true)
		requireRESTAnswer(t, rec, "application/json")
		if rec.Code == http.StatusOK {
			var list restList
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &list), "%s", rec.Body.Bytes())
		}

		res := s.graphql(t, fuzzListQuery, vars)
		requireDocumentedErrors(t, res)
		if len(res.Errors) == 0 {
			var data struct {
				AuditEvents *connection `json:"auditEvents"`
			}
			require.NoError(t, json.Unmarshal(res.Data, &data), "%s", res.Raw)
			require.NotNil(t, data.AuditEvents, "%s", res.Raw)
		}
	})
}

// FuzzAuditEventStreamResume opens the SSE snapshot stream
// (/api/v1/audit/events/stream) with an arbitrary Last-Event-ID header and
// afterSequence parameter: it must stream (text/event-stream, every id
// after the resume point) or refuse with BAD_USER_INPUT, never a 5xx.
func FuzzAuditEventStreamResume(f *testing.F) {
	s := newFuzzServer(f)
	f.Add("1", "")
	f.Add("", "2")
	f.Fuzz(func(t *testing.T, lastEventID, afterSequence string) {
		q := url.Values{"projectId": {projectA}}
		if afterSequence != "" {
			q.Set("afterSequence", afterSequence)
		}
		req := httptest.NewRequest(http.MethodGet, "/api/v1/audit/events/stream", nil)
		req.URL.RawQuery = q.Encode()
		if lastEventID != "" {
			req.Header.Set("Last-Event-ID", lastEventID)
		}
		rec := s.serve(req, true)
		requireRESTAnswer(t, rec, "text/event-stream")
		if rec.Code != http.StatusOK {
			return
		}
		var after uint64
		if strings.TrimSpace(lastEventID) != "" {
			after, _ = strconv.ParseUint(strings.TrimSpace(lastEventID), 10, 64)
		} else if afterSequence != "" {
			after, _ = strconv.ParseUint(afterSequence, 10, 64)
		}
		for _, e := range readSSE(t, rec.Body) {
			seq, err := strconv.ParseUint(e.id, 10, 64)
			require.NoError(t, err, "event id %q", e.id)
			require.Greater(t, seq, after, "resumed after %d", after)
		}
	})
}

// FuzzRecordAuditEvent records one event through GraphQL
// recordAuditEvents, with arbitrary text fields, occurredAt, details and
// idempotency key: it must be recorded, or refused with a documented code
// (BAD_USER_INPUT, IDEMPOTENCY_CONFLICT), never INTERNAL or a 5xx. The
// details value is sent as the JSON it spells when it is valid JSON, else
// as a string. A recorded event's details are an object of at most
// domain.MaxDetailsBytes bytes.
func FuzzRecordAuditEvent(f *testing.F) {
	s := newFuzzServer(f)
	// projectId, action, subjectId, displayName, resourceType, resourceId,
	// outcome, occurredAt, reason, requestId, details, idempotencyKey.
	f.Add(projectA, "device.reboot", "user-1", "Ada", "device", "dev-1", "SUCCESS", "2026-01-02T03:04:05Z", "maintenance", "req-1", `{"n":1}`, "")
	f.Fuzz(func(t *testing.T, projectID, action, subjectID, displayName, resourceType, resourceID, outcome, occurredAt,
		reason, requestID, details, idempotencyKey string) {
		ev := map[string]any{
			"projectId":   jsonValue(projectID),
			"action":      action,
			"occurredAt":  occurredAt,
			"subject":     map[string]any{"type": "USER", "id": subjectID, "displayName": displayName},
			"resource":    map[string]any{"type": resourceType, "id": resourceID},
			"outcome":     outcome,
			"governance":  map[string]any{"reason": reason},
			"correlation": map[string]any{"requestId": requestID},
			"details":     jsonValue(details),
		}
		in := map[string]any{"events": []any{ev}}
		if idempotencyKey != "" {
			in["idempotencyKey"] = idempotencyKey
		}
		res := s.graphql(t, recordEventsMutation, map[string]any{"in": in})
		requireDocumentedErrors(t, res)
		if len(res.Errors) > 0 {
			return
		}
		var data struct {
			RecordAuditEvents struct {
				Events []struct {
					Action  string          `json:"action"`
					Details json.RawMessage `json:"details"`
				} `json:"events"`
			} `json:"recordAuditEvents"`
		}
		require.NoError(t, json.Unmarshal(res.Data, &data), "%s", res.Raw)
		require.Len(t, data.RecordAuditEvents.Events, 1, "%s", res.Raw)
		got := data.RecordAuditEvents.Events[0]
		require.True(t, bytes.HasPrefix(bytes.TrimSpace(got.Details), []byte("{")), "details %s", got.Details)
	})
}

const (
	fuzzSubscriptionsQuery = `query($p: ID!, $first: Int, $after: String) {
  webhookSubscriptions(projectId: $p, first: $first, after: $after) { edges { cursor } pageInfo { hasNextPage endCursor } }
}`
	fuzzDeliveriesQuery = `query($p: ID!, $first: Int, $after: String) {
  webhookDeliveries(projectId: $p, first: $first, after: $after) { edges { cursor } pageInfo { hasNextPage endCursor } }
}`
	fuzzExportsQuery = `query($p: ID!, $first: Int, $after: String) {
  dataExports(projectId: $p, first: $first, after: $after) { edges { cursor } pageInfo { hasNextPage endCursor } }
}`
)

// FuzzRecordListCursor pages the lists keyed by record id (webhook
// subscriptions, webhook deliveries, data exports) with an arbitrary after
// cursor and page size: each must answer a page or BAD_USER_INPUT, never
// INTERNAL or a 5xx.
func FuzzRecordListCursor(f *testing.F) {
	s := newFuzzServer(f)
	f.Add(app.IDCursor(uuid.MustParse("0190f3a4-0000-7000-8000-000000000001")), "10")
	f.Fuzz(func(t *testing.T, after, first string) {
		vars := map[string]any{"p": projectA, "after": jsonValue(after)}
		if first != "" {
			vars["first"] = jsonValue(first)
		}
		for _, q := range []string{fuzzSubscriptionsQuery, fuzzDeliveriesQuery, fuzzExportsQuery} {
			requireDocumentedErrors(t, s.graphql(t, q, vars))
		}
	})
}

// FuzzExportDownload requests GET /api/v1/exports/download/{token} with an
// arbitrary token (escaped into the path), and with a capability genuinely
// signed for an arbitrary export id, tenant and expiry: the answer is 403
// (forged, tampered or unknown) or 410 (expired), as problem+json, never a
// 5xx.
func FuzzExportDownload(f *testing.F) {
	s := newFuzzServer(f)
	f.Add("not-a-token", []byte("0123456789abcdef"), tenantA, int64(4102444800))
	f.Fuzz(func(t *testing.T, token string, exportID []byte, tenant string, expiresAt int64) {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.URL.Path = "/api/v1/exports/download/" + token
		req.URL.RawPath = ""
		rec := s.serve(req, false)
		if rec.Code == http.StatusMovedPermanently || rec.Code == http.StatusTemporaryRedirect {
			// The mux redirects a path with "." or ".." segments or
			// doubled slashes to its clean form: no capability is read.
			p := req.URL.Path
			require.NotEqual(t, path.Clean(p), p, "redirected a clean path")
			require.NotEmpty(t, rec.Header().Get("Location"))
		} else {
			requireRESTAnswer(t, rec, "", http.StatusForbidden, http.StatusGone)
			require.NotEqual(t, http.StatusOK, rec.Code, "an unsigned token downloaded: %q", token)
		}

		if len(tenant) > export.MaxCapabilityTenantLen {
			return
		}
		var id uuid.UUID
		copy(id[:], exportID)
		signed := export.SignDownload(fuzzDownloadKey, id, tenant, time.Unix(expiresAt, 0))
		req = httptest.NewRequest(http.MethodGet, "/api/v1/exports/download/"+signed, nil)
		rec = s.serve(req, false)
		requireRESTAnswer(t, rec, "", http.StatusForbidden, http.StatusGone)
		require.NotEqual(t, http.StatusOK, rec.Code, "export %s of tenant %q does not exist", id, tenant)
	})
}
