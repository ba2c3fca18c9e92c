package server_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/export"
	"github.com/aetheriot/aether-audit/jobargs"
	"github.com/aetheriot/aether-audit/jobs"
	"github.com/aetheriot/aether-audit/live"
	"github.com/aetheriot/aether-audit/metrics"
	"github.com/aetheriot/aether-audit/secrets"
	"github.com/aetheriot/aether-audit/server"
	"github.com/aetheriot/aether-audit/store"
	"github.com/aetheriot/aether-audit/store/storetest"
	"github.com/aetheriot/aether-audit/webhook"
)

// operatorBundle is a server wired like `aether serve`: metrics, tracing
// into an in-memory recorder, River workers with their spans, River UI,
// webhooks to loopback receivers and exports to a temporary folder.
type operatorBundle struct {
	*exportBundle
	metrics *metrics.Metrics
	spans   *tracetest.SpanRecorder
	river   *river.Client[pgx.Tx]
}

func setupOperator(t *testing.T, tracing bool) *operatorBundle {
	t.Helper()
	ctx := context.Background()
	pool := storetest.NewPool(t)
	secret := []byte("0123456789abcdef0123456789abcdef-operator-test")
	verifier := testVerifier(t, secret)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	st := store.New(pool)

	m := metrics.New(logger)
	m.ObserveJobs(func(ctx context.Context) ([]metrics.JobCount, error) {
		counts, err := st.CountUnfinishedRiverJobs(ctx)
		out := make([]metrics.JobCount, len(counts))
		for i, c := range counts {
			out[i] = metrics.JobCount{Queue: c.Queue, State: c.State, Kind: c.Kind, Count: c.Count, OldestScheduledAt: c.OldestScheduledAt}
		}
		return out, err
	}, 2*time.Second)
	b := &operatorBundle{metrics: m}
	var tp trace.TracerProvider
	var appTracer trace.Tracer
	if tracing {
		b.spans = tracetest.NewSpanRecorder()
		provider := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(b.spans))
		t.Cleanup(func() { _ = provider.Shutdown(context.Background()) })
		tp, appTracer = provider, provider.Tracer("app")
	}

	hub := testHub(t, pool, st, live.Config{Logger: logger, Observer: m})
	m.ObserveLiveSubscribers(hub.Subscribers)

	bucket, err := export.OpenBucket(ctx, "file://"+t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { _ = bucket.Close() })
	box, err := secrets.NewBox(make([]byte, secrets.KeySize))
	require.NoError(t, err)
	schedule, err := domain.ParseRetrySchedule("1s")
	require.NoError(t, err)
	loopback := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	application := app.New(st, app.Config{
		Logger: logger, Live: hub, ExportWatch: hub, Observer: m, Tracer: appTracer,
		Exports: app.ExportConfig{Bucket: bucket, DownloadKey: exportDownloadKey},
		Webhooks: app.WebhookConfig{Box: box, RetrySchedule: schedule,
			Sender:    webhook.NewSender(webhook.SenderConfig{Timeout: 5 * time.Second, AllowHTTP: true, AllowPrefixes: loopback}),
			URLPolicy: webhook.URLPolicy{AllowHTTP: true, AllowPrefixes: loopback}},
	})
	client, err := jobs.NewClient(pool, st, jobs.ClientConfig{Logger: logger, App: application,
		FetchCooldown: 10 * time.Millisecond, TracerProvider: tp})
	require.NoError(t, err)
	require.NoError(t, client.Start(ctx))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = client.Stop(ctx)
	})
	b.river = client

	tb := &testBundle{secret: secret, ready: &atomic.Pointer[error]{}, app: application}
	tb.server = server.New(server.Config{
		App: application, Verifier: verifier, Logger: logger,
		Metrics: m, TracerProvider: tp, River: client, OperatorTenants: []string{tenantA},
	})
	t.Cleanup(func() { tb.server.Shutdown(context.Background()) })
	srv := httptest.NewServer(tb.server)
	t.Cleanup(srv.Close)
	tb.url = srv.URL
	b.exportBundle = &exportBundle{testBundle: tb}
	return b
}

// adminToken is a token of tenant A with every permission, admin included.
func (b *operatorBundle) adminToken(t *testing.T) string {
	return b.token(t, tokenOpts{perms: append([]app.Permission{app.PermissionAdmin, app.PermissionWebhooksRead, app.PermissionWebhooksWrite}, allExportPerms...)})
}

// metricValue is the value of the metric family name's series with labels
// (a subset): a counter's or gauge's value, a histogram's count; 0 when
// there is no such series.
func metricValue(t *testing.T, reg prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	total := 0.0
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue series
				}
			}
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				total += m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				total += m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				total += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return total
}

func TestMetricsEndpointAdminOnly(t *testing.T) {
	b := setupOperator(t, false)

	resp := b.getPath(t, "", "/metrics")
	requireProblem(t, resp, http.StatusUnauthorized, "UNAUTHENTICATED")
	resp = b.getPath(t, b.token(t, tokenOpts{}), "/metrics")
	requireProblem(t, resp, http.StatusForbidden, "FORBIDDEN")
	// An admin of a tenant that is not an operator tenant sees no
	// process-wide figures, and without operator tenants nobody does.
	resp = b.getPath(t, b.token(t, tokenOpts{tenant: tenantB, perms: []app.Permission{app.PermissionAdmin}}), "/metrics")
	requireProblem(t, resp, http.StatusForbidden, "FORBIDDEN")

	resp = b.getPath(t, b.adminToken(t), "/metrics")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	// The refused requests above were counted by route, never raw path.
	require.Contains(t, string(body), `aether_http_requests_total{code="401",method="GET",route="/metrics"} 1`)
	require.Contains(t, string(body), `aether_http_requests_total{code="403",method="GET",route="/metrics"} 2`)
	require.Contains(t, string(body), "go_goroutines")
	require.Contains(t, string(body), "process_cpu_seconds_total")

	// The separate listener's handler serves the same registry without a token.
	separate := httptest.NewServer(b.server.MetricsHandler())
	t.Cleanup(separate.Close)
	res, err := http.Get(separate.URL)
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	body, err = io.ReadAll(res.Body)
	require.NoError(t, err)
	require.Contains(t, string(body), `aether_http_requests_total{code="200",method="GET",route="/metrics"}`)
}

func TestMetricsMoveWithOperations(t *testing.T) {
	b := setupOperator(t, false)
	reg := b.metrics.Registry()
	token := b.adminToken(t)

	// Ingest through the record fast path (it bypasses gqlgen).
	res := b.graphql(t, token, `mutation Ingest($in: RecordAuditEventInput!) { recordAuditEvent(input: $in) { event { sequence } } }`,
		map[string]any{"in": eventInput(projectA, "device.rebooted")})
	require.Empty(t, res.Errors)
	require.Equal(t, 1.0, metricValue(t, reg, "aether_graphql_operations_total", map[string]string{"type": "mutation", "name": "Ingest", "outcome": "ok"}))
	require.Equal(t, 1.0, metricValue(t, reg, "aether_graphql_operation_duration_seconds", map[string]string{"type": "mutation", "name": "Ingest"}))

	// A query through gqlgen with the auditEvents fast path inside it, and
	// one without it; a failing one.
	res = b.graphql(t, token, `query Page($p: ID!) { auditEvents(projectId: $p, first: 5) { edges { node { sequence } } } }`, map[string]any{"p": projectA})
	require.Empty(t, res.Errors)
	res = b.graphql(t, token, `query Verify { verifyAuditChain(projectId: "`+projectA+`") { valid } }`, nil)
	require.Empty(t, res.Errors)
	res = b.graphql(t, token, `query Verify { verifyAuditChain(projectId: "`+projectA+`", fromSequence: "x") { valid } }`, nil)
	require.NotEmpty(t, res.Errors)
	require.Equal(t, 1.0, metricValue(t, reg, "aether_graphql_operations_total", map[string]string{"type": "query", "name": "Page", "outcome": "ok"}))
	require.Equal(t, 1.0, metricValue(t, reg, "aether_graphql_operations_total", map[string]string{"type": "query", "name": "Verify", "outcome": "ok"}))
	require.Equal(t, 4.0, metricValue(t, reg, "aether_http_requests_total", map[string]string{"route": "/graphql", "method": "POST"}))

	// A webhook attempt to a loopback receiver, and its delivery lag.
	received := make(chan struct{}, 10)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNoContent)
		received <- struct{}{}
	}))
	t.Cleanup(receiver.Close)
	ctx := context.Background()
	admin := app.Identity{Subject: "ops", TenantID: tenantA, ProjectIDs: []string{projectA},
		Permissions: []app.Permission{app.PermissionWebhooksWrite, app.PermissionAuditWrite}}
	dest, err := b.app.CreateWebhookDestination(ctx, admin, app.CreateWebhookDestinationInput{ProjectID: projectA, URL: receiver.URL + "/hook"})
	require.NoError(t, err)
	_, err = b.app.CreateWebhookSubscription(ctx, admin, app.CreateWebhookSubscriptionInput{
		ProjectID: projectA, DestinationID: dest.Destination.ID.String(), EventTypes: []string{"device.*"}})
	require.NoError(t, err)
	b.record(t, token, eventInput(projectA, "device.updated"))
	select {
	case <-received:
	case <-time.After(time.Minute):
		t.Fatal("the webhook was not delivered")
	}
	require.Eventually(t, func() bool {
		return metricValue(t, reg, "aether_webhook_attempts_total", map[string]string{"outcome": "succeeded"}) == 1 &&
			metricValue(t, reg, "aether_webhook_delivery_lag_seconds", nil) == 1
	}, time.Minute, 10*time.Millisecond)

	// An export run, its duration and its size.
	e := b.requestExport(t, token, exportInput(nil))
	require.Eventually(t, func() bool {
		return metricValue(t, reg, "aether_export_duration_seconds", map[string]string{"kind": "audit", "outcome": "ready"}) == 1
	}, time.Minute, 10*time.Millisecond)
	ready := b.getExport(t, token, e.ID)
	require.NotNil(t, ready)
	require.NotNil(t, ready.ByteLength)
	require.Equal(t, 1.0, metricValue(t, reg, "aether_export_bytes", map[string]string{"kind": "audit"}))
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() == "aether_export_bytes" {
			require.Equal(t, *ready.ByteLength, jsonUint(f.GetMetric()[0].GetHistogram().GetSampleSum()))
		}
	}

	// Queue depth at scrape time: a job scheduled far ahead stays counted.
	_, err = b.river.Insert(ctx, jobargs.PruneIdempotencyKeysArgs{}, &river.InsertOpts{ScheduledAt: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	require.GreaterOrEqual(t, metricValue(t, reg, "aether_river_jobs", map[string]string{"queue": river.QueueDefault, "state": "scheduled"}), 1.0)
	require.GreaterOrEqual(t, metricValue(t, reg, "aether_outbox_jobs", map[string]string{"kind": jobargs.PruneIdempotencyKeysArgs{}.Kind()}), 1.0)

	// Live subscribers and the hub's fan-out lag.
	stream, err := b.app.SubscribeAuditEvents(ctx, app.Identity{TenantID: tenantA, ProjectIDs: []string{projectA},
		Permissions: []app.Permission{app.PermissionAuditRead}}, app.SubscribeAuditEventsInput{ProjectID: projectA})
	require.NoError(t, err)
	require.Equal(t, 1.0, metricValue(t, reg, "aether_live_subscribers", nil))
	lagBefore := metricValue(t, reg, "aether_live_fanout_lag_seconds", nil)
	b.record(t, token, eventInput(projectA, "user.login"))
	nctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_, err = stream.Next(nctx)
	require.NoError(t, err)
	// The subscriber may read the event before the feed's read of it is
	// observed (it also reads the store itself): await the observation.
	require.Eventually(t, func() bool {
		return metricValue(t, reg, "aether_live_fanout_lag_seconds", nil) > lagBefore
	}, time.Minute, 10*time.Millisecond)
	stream.Close()
	require.Equal(t, 0.0, metricValue(t, reg, "aether_live_subscribers", nil))
}

// jsonUint renders a float sum as the decimal string the API uses.
func jsonUint(f float64) string {
	b, _ := json.Marshal(uint64(f))
	return string(b)
}

func TestMetricsOperationNamesBounded(t *testing.T) {
	m := metrics.New(slog.New(slog.NewTextHandler(io.Discard, nil)))
	for i := range metrics.MaxOperationNames + 50 {
		m.GraphQLOperation("query", "Op"+strings.Repeat("x", i%3)+string(rune('A'+i%26))+itoa(i), false, time.Millisecond)
	}
	m.GraphQLOperation("query", strings.Repeat("L", metrics.MaxOperationNameLength+1), false, time.Millisecond)
	m.GraphQLOperation("query", "", false, time.Millisecond)
	families, err := m.Registry().Gather()
	require.NoError(t, err)
	names := map[string]bool{}
	for _, f := range families {
		if f.GetName() == "aether_graphql_operations_total" {
			for _, s := range f.GetMetric() {
				for _, l := range s.GetLabel() {
					if l.GetName() == "name" {
						names[l.GetValue()] = true
					}
				}
			}
		}
	}
	require.Len(t, names, metrics.MaxOperationNames+2) // + other, anonymous
	require.True(t, names[metrics.OperationOther])
	require.True(t, names[metrics.OperationAnonymous])
	require.Equal(t, 51.0, metricValue(t, m.Registry(), "aether_graphql_operations_total", map[string]string{"name": metrics.OperationOther}))
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

func TestRiverUIAdminOnly(t *testing.T) {
	b := setupOperator(t, false)
	admin := b.adminToken(t)
	plain := b.token(t, tokenOpts{})

	requireProblem(t, b.getPath(t, "", "/riverui/api/jobs?state=completed"), http.StatusUnauthorized, "UNAUTHENTICATED")
	requireProblem(t, b.getPath(t, plain, "/riverui/api/jobs?state=completed"), http.StatusForbidden, "FORBIDDEN")
	otherAdmin := b.token(t, tokenOpts{tenant: tenantB, perms: []app.Permission{app.PermissionAdmin}})
	requireProblem(t, b.getPath(t, otherAdmin, "/riverui/api/jobs?state=completed"), http.StatusForbidden, "FORBIDDEN")

	// A job for the list: an export's run completes.
	e := b.requestExport(t, admin, exportInput(nil))
	require.Eventually(t, func() bool { return b.getExport(t, admin, e.ID).State == "READY" }, time.Minute, 20*time.Millisecond)

	resp := b.getPath(t, admin, "/riverui/api/jobs?state=completed&limit=50")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var list struct {
		Data []struct {
			Kind  string `json:"kind"`
			State string `json:"state"`
		} `json:"data"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&list))
	kinds := map[string]bool{}
	for _, j := range list.Data {
		kinds[j.Kind] = true
	}
	require.True(t, kinds[jobargs.DataExportJobArgs{}.Kind()], "jobs: %+v", list.Data)

	// The UI's page itself.
	resp = b.getPath(t, admin, "/riverui/")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, resp.Header.Get("Content-Type"), "text/html")

	// A browser without a token is sent to the sign-in.
	req, _ := http.NewRequest(http.MethodGet, b.url+"/riverui/jobs", nil)
	req.Header.Set("Accept", "text/html")
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := noRedirect.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	require.Equal(t, "/riverui/sign-in", res.Header.Get("Location"))
}

func TestRiverUIBrowserSignIn(t *testing.T) {
	b := setupOperator(t, false)
	admin := b.adminToken(t)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	signIn := func(token, origin string) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, b.url+"/riverui/sign-in", strings.NewReader(url.Values{"token": {token}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		res, err := noRedirect.Do(req)
		require.NoError(t, err)
		t.Cleanup(func() { _ = res.Body.Close() })
		return res
	}

	page := b.getPath(t, "", "/riverui/sign-in")
	require.Equal(t, http.StatusOK, page.StatusCode)
	require.Contains(t, page.Header.Get("Content-Security-Policy"), "default-src 'none'")

	require.Equal(t, http.StatusForbidden, signIn(b.token(t, tokenOpts{}), b.url).StatusCode, "a non-admin token")
	require.Empty(t, signIn(b.token(t, tokenOpts{}), b.url).Cookies())
	require.Equal(t, http.StatusUnauthorized, signIn("not-a-token", b.url).StatusCode)
	requireProblem(t, signIn(admin, "https://evil.example"), http.StatusForbidden, "FORBIDDEN")

	res := signIn(admin, b.url)
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	require.Equal(t, "/riverui/", res.Header.Get("Location"))
	cookies := res.Cookies()
	require.Len(t, cookies, 1)
	c := cookies[0]
	require.Equal(t, server.RiverUICookie, c.Name)
	require.True(t, c.HttpOnly)
	require.Equal(t, http.SameSiteStrictMode, c.SameSite)
	require.Equal(t, "/riverui/", c.Path)
	require.False(t, c.Secure, "plain http test server")
	require.WithinDuration(t, time.Now().Add(time.Hour), c.Expires, 2*time.Minute)
	require.NotContains(t, c.Value, admin, "the cookie is an opaque session id, not the token")
	require.NotContains(t, admin, c.Value)

	withCookie := func(method, path, origin string, body io.Reader) *http.Response {
		req, _ := http.NewRequest(method, b.url+path, body)
		req.AddCookie(&http.Cookie{Name: c.Name, Value: c.Value})
		req.Header.Set("Content-Type", "application/json")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		t.Cleanup(func() { _ = res.Body.Close() })
		return res
	}
	require.Equal(t, http.StatusOK, withCookie(http.MethodGet, "/riverui/api/jobs?state=completed", "", nil).StatusCode)

	// A state change with the cookie must come from our own origin.
	job, err := b.river.Insert(context.Background(), jobargs.PruneIdempotencyKeysArgs{}, &river.InsertOpts{ScheduledAt: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	cancelBody := func() io.Reader { return strings.NewReader(`{"ids":["` + itoa(int(job.Job.ID)) + `"]}`) }
	requireProblem(t, withCookie(http.MethodPost, "/riverui/api/jobs/cancel", "https://evil.example", cancelBody()), http.StatusForbidden, "FORBIDDEN")
	requireProblem(t, withCookie(http.MethodPost, "/riverui/api/jobs/cancel", "", cancelBody()), http.StatusForbidden, "FORBIDDEN")
	got, err := b.river.JobGet(context.Background(), job.Job.ID)
	require.NoError(t, err)
	require.NotEqual(t, "cancelled", string(got.State))
	require.Equal(t, http.StatusOK, withCookie(http.MethodPost, "/riverui/api/jobs/cancel", b.url, cancelBody()).StatusCode)
	got, err = b.river.JobGet(context.Background(), job.Job.ID)
	require.NoError(t, err)
	require.Equal(t, "cancelled", string(got.State))

	// A cookie that names no session (here, a token, as cookies once held)
	// is refused and dropped.
	req, _ := http.NewRequest(http.MethodGet, b.url+"/riverui/api/jobs?state=completed", nil)
	req.AddCookie(&http.Cookie{Name: server.RiverUICookie, Value: admin})
	res, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusUnauthorized, res.StatusCode)
	require.Len(t, res.Cookies(), 1)
	require.Equal(t, -1, res.Cookies()[0].MaxAge)

	// Signing out drops the cookie and ends the session on the server: the
	// old cookie no longer works.
	req, _ = http.NewRequest(http.MethodPost, b.url+"/riverui/sign-out", nil)
	req.Header.Set("Origin", b.url)
	req.AddCookie(&http.Cookie{Name: c.Name, Value: c.Value})
	res, err = noRedirect.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	require.Equal(t, -1, res.Cookies()[0].MaxAge)
	requireProblem(t, withCookie(http.MethodGet, "/riverui/api/jobs?state=completed", "", nil), http.StatusUnauthorized, "UNAUTHENTICATED")
}

func TestTracingSpansAndTraceID(t *testing.T) {
	b := setupOperator(t, true)
	token := b.adminToken(t)

	// An incoming traceparent continues its trace: the request span, the
	// command span under it, and the event's traceId are all of it.
	const incoming = "4bf92f3577b34da6a3ce929d0e0e4736"
	res := b.graphql(t, token, `mutation Ingest($in: RecordAuditEventInput!) { recordAuditEvent(input: $in) { event { correlation { traceId } } } }`,
		map[string]any{"in": eventInput(projectA, "device.rebooted")}, "Traceparent", "00-"+incoming+"-00f067aa0ba902b7-01")
	var data struct {
		RecordAuditEvent struct {
			Event struct {
				Correlation struct {
					TraceID string `json:"traceId"`
				} `json:"correlation"`
			} `json:"event"`
		} `json:"recordAuditEvent"`
	}
	res.decode(t, &data)
	require.Equal(t, incoming, data.RecordAuditEvent.Event.Correlation.TraceID)
	request := findSpan(t, b.spans, "POST /graphql", incoming)
	require.Equal(t, trace.SpanKindServer, request.SpanKind())
	command := findSpan(t, b.spans, "app.RecordAuditEvent", incoming)
	require.Equal(t, request.SpanContext().SpanID(), command.Parent().SpanID())

	// Without a traceparent a new trace starts, and the event carries it.
	res = b.graphql(t, token, `mutation Ingest2($in: RecordAuditEventInput!) { recordAuditEvent(input: $in) { event { correlation { traceId } } } }`,
		map[string]any{"in": eventInput(projectA, "device.rebooted")})
	res.decode(t, &data)
	fresh := data.RecordAuditEvent.Event.Correlation.TraceID
	require.Len(t, fresh, 32)
	require.NotEqual(t, incoming, fresh)
	reqSpan := findSpan(t, b.spans, "POST /graphql", fresh)
	findSpan(t, b.spans, "app.RecordAuditEvent", fresh)
	require.Contains(t, reqSpan.Attributes(), attribute.String("aether.tenant_id", tenantA), "the request's span names the tenant")

	// A download's capability never reaches a span: its route does.
	resp := b.getPath(t, "", "/api/v1/exports/download/some-capability-token")
	require.NotEqual(t, http.StatusOK, resp.StatusCode)
	for _, s := range b.spans.Ended() {
		require.NotContains(t, s.Name(), "some-capability-token")
		for _, a := range s.Attributes() {
			require.NotContains(t, a.Value.Emit(), "some-capability-token")
		}
	}
	require.Eventually(t, func() bool { return hasSpan(b.spans, "GET /api/v1/exports/download/{token}") }, 10*time.Second, 10*time.Millisecond)

	// A job gets its span, and the command it runs one under it.
	e := b.requestExport(t, token, exportInput(nil))
	require.Eventually(t, func() bool { return b.getExport(t, token, e.ID).State == "READY" }, time.Minute, 20*time.Millisecond)
	require.Eventually(t, func() bool { return hasSpan(b.spans, "app.RunDataExport") }, 10*time.Second, 10*time.Millisecond)
	var job, run sdktrace.ReadOnlySpan
	for _, s := range b.spans.Ended() {
		switch s.Name() {
		case "river.work/" + jobargs.DataExportJobArgs{}.Kind():
			job = s
		case "app.RunDataExport":
			run = s
		}
	}
	require.NotNil(t, job, "the job's span")
	require.Equal(t, job.SpanContext().SpanID(), run.Parent().SpanID())
}

// findSpan returns the ended span named name of trace traceID, waiting
// for it (a request's span ends just after its response), failing when
// there is none.
func findSpan(t *testing.T, rec *tracetest.SpanRecorder, name, traceID string) sdktrace.ReadOnlySpan {
	t.Helper()
	var found sdktrace.ReadOnlySpan
	var names []string
	deadline := time.Now().Add(10 * time.Second)
	for found == nil && time.Now().Before(deadline) {
		names = names[:0]
		for _, s := range rec.Ended() {
			if s.Name() == name && s.SpanContext().TraceID().String() == traceID {
				found = s
			}
			names = append(names, s.Name()+"@"+s.SpanContext().TraceID().String())
		}
		if found == nil {
			time.Sleep(5 * time.Millisecond) // polling the recorder
		}
	}
	require.NotNil(t, found, "no span %q in trace %s; spans: %v", name, traceID, names)
	return found
}

func hasSpan(rec *tracetest.SpanRecorder, name string) bool {
	for _, s := range rec.Ended() {
		if s.Name() == name {
			return true
		}
	}
	return false
}

// TestOperatorSurfacesFailClosed: without operator tenants no admin reaches
// /metrics; "*" lets any tenant's admin in.
func TestOperatorSurfacesFailClosed(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, tc := range []struct {
		tenants []string
		want    int
	}{{nil, http.StatusForbidden}, {[]string{"*"}, http.StatusOK}} {
		b := setup(t, func(c *server.Config) { c.Metrics, c.OperatorTenants = metrics.New(logger), tc.tenants })
		resp := b.getPath(t, b.token(t, tokenOpts{tenant: tenantB, perms: []app.Permission{app.PermissionAdmin}}), "/metrics")
		if tc.want == http.StatusOK {
			require.Equal(t, http.StatusOK, resp.StatusCode)
			resp.Body.Close()
			continue
		}
		requireProblem(t, resp, tc.want, "FORBIDDEN")
	}
}
