package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/internal/pgcluster"
	"github.com/aetheriot/aether-audit/store/storetest"
)

// privilegedWarning starts the line serve logs when its login can change
// history.
const privilegedWarning = "STORAGE IS PRIVILEGED"

// scrapeMetrics returns the body of /metrics on the metrics listener.
func scrapeMetrics(t *testing.T, metricsAddr string) string {
	t.Helper()
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get("http://" + metricsAddr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	return string(body)
}

// serveAndScrape starts serve with env, waits until it is ready, records
// one event through GraphQL (an append, as that login) and returns the
// process with its /metrics body.
func serveAndScrape(t *testing.T, env ...string) (*process, string) {
	t.Helper()
	dir := dataDir(t)
	addr, metricsAddr := freeAddr(t), freeAddr(t)
	p := start(t, append([]string{"AETHER_ADDR=" + addr, "AETHER_METRICS_ADDR=" + metricsAddr,
		"AETHER_DATA_DIR=" + dir, "AETHER_LOG_LEVEL=info"}, env...), "serve")
	awaitReady(t, p, "http://"+addr, 2*time.Minute)
	tok := mintToken(t, dir, "--tenant", "acme", "--project", "plant-1", "--permissions", "audit:write")
	_, errs := postGraphQL(t, "http://"+addr, tok, `mutation($in: RecordAuditEventInput!) { recordAuditEvent(input: $in) { event { sequence } } }`,
		map[string]any{"in": map[string]any{
			"projectId": "plant-1", "action": "device.updated", "occurredAt": time.Now().UTC().Format(time.RFC3339Nano),
			"subject": map[string]any{"type": "USER", "id": "u1"}, "resource": map[string]any{"type": "device", "id": "d1"},
			"outcome": "SUCCESS", "details": map[string]any{},
		}})
	require.Empty(t, errs)
	return p, scrapeMetrics(t, metricsAddr)
}

// TestMigrateAppRoleAndServe: aether migrate --app-role creates the runtime
// role and its grants, twice without harm; serve as the superuser warns and
// reports aether_storage_privileged 1; serve with --app-role (migrating as
// the owner) and serve with a DATABASE_URL of the runtime role both append
// as that role and report 0.
func TestMigrateAppRoleAndServe(t *testing.T) {
	t.Parallel()
	suffix := make([]byte, 6)
	_, _ = rand.Read(suffix)
	role := "aether_app_cmd_" + hex.EncodeToString(suffix)
	t.Cleanup(func() { storetest.DropRole(role) }) // after the database is dropped
	dbURL := storetest.NewEmptyDatabase(t)
	env := []string{"DATABASE_URL=" + dbURL, "AETHER_DATA_DIR=" + dataDir(t)}

	stdout, stderr, code := run(t, nil, "migrate", "--help")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "AETHER_APP_ROLE")
	require.Contains(t, stdout, "AETHER_APP_ROLE_PASSWORD")

	_, stderr, code = run(t, env, "migrate", "--app-role", role)
	require.Equal(t, 0, code, "stderr:\n%s", stderr)
	require.Contains(t, stderr, "granted the runtime role its privileges")
	// Again, with a password this time (the environment only): no change
	// but the password, which is never logged.
	_, stderr, code = run(t, append(env, "AETHER_APP_ROLE="+role, "AETHER_APP_ROLE_PASSWORD=pw-not-in-logs"), "migrate")
	require.Equal(t, 0, code, "stderr:\n%s", stderr)
	require.NotContains(t, stderr, "pw-not-in-logs")

	ctx := context.Background()
	appURL := storetest.URLAs(t, dbURL, role)
	conn, err := pgx.Connect(ctx, appURL)
	require.NoError(t, err)
	for _, stmt := range []string{"DELETE FROM audit_events", "TRUNCATE audit_events", "ALTER TABLE audit_events DISABLE TRIGGER ALL", "DROP TABLE audit_events"} {
		_, err := conn.Exec(ctx, stmt)
		var pgErr *pgconn.PgError
		require.True(t, errors.As(err, &pgErr), "%s: %v", stmt, err)
		require.Equal(t, "42501", pgErr.Code, "%s: %v", stmt, err)
	}
	require.NoError(t, conn.Close(ctx))

	// The superuser: loud warning, gauge 1.
	p, metrics := serveAndScrape(t, "DATABASE_URL="+dbURL)
	require.Contains(t, metrics, "\naether_storage_privileged 1\n")
	require.Contains(t, p.stderr.String(), privilegedWarning)

	// --app-role: migrates as the owner, serves as the role.
	p, metrics = serveAndScrape(t, "DATABASE_URL="+dbURL, "AETHER_APP_ROLE="+role)
	require.Contains(t, metrics, "\naether_storage_privileged 0\n")
	require.NotContains(t, p.stderr.String(), privilegedWarning)
	require.Contains(t, p.stderr.String(), "serving as the runtime role")

	// DATABASE_URL of the runtime role itself, migrations being current.
	p, metrics = serveAndScrape(t, "DATABASE_URL="+appURL)
	require.Contains(t, metrics, "\naether_storage_privileged 0\n")
	require.NotContains(t, p.stderr.String(), privilegedWarning)

	// Both appends were made by the runtime role: it is what connected.
	owner, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer owner.Close(ctx)
	var events int
	require.NoError(t, owner.QueryRow(ctx, "SELECT count(*) FROM audit_events").Scan(&events))
	require.Equal(t, 3, events)
}

// TestServeEmbeddedAsRuntimeRole: serve on the embedded database sets up
// the runtime role itself and serves as it.
func TestServeEmbeddedAsRuntimeRole(t *testing.T) {
	t.Parallel()
	if _, err := pgcluster.FindBinaries(); errors.Is(err, pgcluster.ErrNoBinaries) {
		t.Skip("PostgreSQL server binaries not installed")
	}
	p, metrics := serveAndScrape(t)
	require.Contains(t, metrics, "\naether_storage_privileged 0\n")
	require.NotContains(t, p.stderr.String(), privilegedWarning)
	require.Contains(t, p.stderr.String(), `msg="serving as the runtime role" role=aether_app`)
	// Stop it cleanly, so that the embedded cluster stops with it.
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, 0, p.wait(t, time.Minute), "stderr:\n%s", p.stderr.String())
}
