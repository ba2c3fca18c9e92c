package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/store/storetest"
)

func TestTracingConfigured(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env  map[string]string
		want bool
	}{
		{nil, false},
		{map[string]string{"OTEL_SERVICE_NAME": "x"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, true},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, true},
		{map[string]string{"OTEL_TRACES_EXPORTER": "console"}, true},
		{map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, false},
		{map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, false},
		{map[string]string{"OTEL_SDK_DISABLED": "false", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, true},
	} {
		require.Equal(t, tc.want, tracingConfigured(func(k string) string { return tc.env[k] }), "%v", tc.env)
	}
}

// TestServeOperatorSurfaces runs `aether serve` with a separate metrics
// listener and tracing to the console exporter.
func TestServeOperatorSurfaces(t *testing.T) {
	t.Parallel()
	stdout, stderr, code := run(t, nil, "serve", "--help")
	require.Equal(t, 0, code, "stderr: %s", stderr)
	require.Contains(t, stdout, "AETHER_METRICS_ADDR")
	require.Contains(t, stdout, "OTEL_")

	dir := dataDir(t)
	addr, metricsAddr := freeAddr(t), freeAddr(t)
	base := "http://" + addr
	p := start(t, []string{
		"DATABASE_URL=" + storetest.NewDatabase(t),
		"AETHER_ADDR=" + addr,
		"AETHER_METRICS_ADDR=" + metricsAddr,
		"AETHER_OPERATOR_TENANTS=ops",
		"AETHER_DATA_DIR=" + dir,
		"AETHER_LOG_LEVEL=warn",
		"OTEL_TRACES_EXPORTER=console",
		"OTEL_BSP_SCHEDULE_DELAY=50",
	}, "serve")
	awaitReady(t, p, base, 60*time.Second)
	client := &http.Client{Timeout: 10 * time.Second}
	get := func(url, token string) (int, string) {
		req, err := http.NewRequest(http.MethodGet, url, nil)
		require.NoError(t, err)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(body)
	}

	code, _ = get(base+"/metrics", "")
	require.Equal(t, http.StatusUnauthorized, code)
	code, _ = get(base+"/metrics", mintToken(t, dir, "--tenant", "acme", "--project", "plant-1"))
	require.Equal(t, http.StatusForbidden, code)
	admin := mintToken(t, dir, "--tenant", "ops", "--project", "*", "--permissions", "admin")
	code, body := get(base+"/metrics", admin)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `aether_http_requests_total{code="401",method="GET",route="/metrics"} 1`)
	code, body = get("http://"+metricsAddr+"/metrics", "")
	require.Equal(t, http.StatusOK, code, "the separate listener needs no token")
	require.Contains(t, body, "aether_live_subscribers 0")
	code, _ = get("http://"+metricsAddr+"/graphql", "")
	require.Equal(t, http.StatusNotFound, code, "the separate listener serves only /metrics")

	code, _ = get(base+"/riverui/api/jobs?state=completed", admin)
	require.Equal(t, http.StatusOK, code)

	// A traced request: the event carries the incoming trace, and the
	// console exporter prints the request's and the command's spans.
	const traceID = "0af7651916cd43dd8448eb211c80319c"
	writer := mintToken(t, dir, "--tenant", "acme", "--project", "plant-1", "--permissions", "audit:write")
	body2, err := json.Marshal(map[string]any{
		"query": `mutation($in: RecordAuditEventInput!) { recordAuditEvent(input: $in) { event { correlation { traceId } } } }`,
		"variables": map[string]any{"in": map[string]any{
			"projectId": "plant-1", "action": "device.rebooted", "occurredAt": time.Now().UTC().Format(time.RFC3339Nano),
			"subject": map[string]any{"type": "SERVICE", "id": "s"}, "resource": map[string]any{"type": "device", "id": "d"}, "outcome": "SUCCESS",
		}},
	})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, base+"/graphql", bytes.NewReader(body2))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+writer)
	req.Header.Set("Traceparent", "00-"+traceID+"-b7ad6b7169203331-01")
	resp, err := client.Do(req)
	require.NoError(t, err)
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Contains(t, string(raw), `"traceId":"`+traceID+`"`)
	require.Eventually(t, func() bool {
		out := p.stdout.String()
		return strings.Contains(out, `"Name":"POST /graphql"`) && strings.Contains(out, `"Name":"app.RecordAuditEvent"`) &&
			strings.Contains(out, traceID)
	}, 30*time.Second, 20*time.Millisecond, "stdout:\n%s", p.stdout.String())

	// Shutdown stops the metrics listener too.
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, 0, p.wait(t, 30*time.Second), "stderr:\n%s", p.stderr.String())
	_, err = client.Get("http://" + metricsAddr + "/metrics")
	require.Error(t, err, "metrics listener still serving after exit")
}
