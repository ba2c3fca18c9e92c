package chaos

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/internal/pgcluster"
)

// Tenant and project of every scenario.
const (
	tenant  = "chaos"
	project = "p1"
)

// allPermissions is what the scenarios' token may do.
const allPermissions = "audit:read,audit:write,webhooks:read,webhooks:write,deliveries:redrive,exports:read,exports:write,exports:download"

// deployment is what the processes of one scenario share: a database, the
// secrets, the export storage and a token.
type deployment struct {
	dbURL   string
	pool    *pgxpool.Pool
	blobDir string
	env     []string
	token   string
}

// newDeployment creates a fresh database on cluster and the settings every
// process of the test gets: short job-rescue and timeout settings so that a
// killed process's work is taken over within the test's time, webhooks to
// loopback over plain HTTP, and a short retry schedule.
func newDeployment(t *testing.T, cluster *pgcluster.Cluster) *deployment {
	t.Helper()
	ctx := context.Background()
	name := "chaos_" + strings.ToLower(randomHex(6))
	admin, err := pgx.Connect(ctx, cluster.URLFor("postgres"))
	require.NoError(t, err)
	_, err = admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	require.NoError(t, err)
	require.NoError(t, admin.Close(ctx))
	t.Cleanup(func() {
		// The database goes with the cluster of the PostgreSQL scenario.
		if admin, err := pgx.Connect(ctx, cluster.URLFor("postgres")); err == nil {
			_, _ = admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
			_ = admin.Close(ctx)
		}
	})
	d := &deployment{dbURL: cluster.URLFor(name), blobDir: t.TempDir()}
	cfg, err := pgxpool.ParseConfig(d.dbURL)
	require.NoError(t, err)
	cfg.MaxConns = 4
	d.pool, err = pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(d.pool.Close)
	d.env = []string{
		"DATABASE_URL=" + d.dbURL,
		"AETHER_JWT_SECRET=" + randomHex(32),
		"AETHER_MASTER_KEY=" + randomHex(32),
		"AETHER_CHECKPOINT_KEY=" + randomHex(32),
		"AETHER_BLOB_URL=file://" + d.blobDir,
		"AETHER_LOG_LEVEL=warn",
		"AETHER_WEBHOOK_ALLOW_HTTP=true",
		"AETHER_WEBHOOK_ALLOW_CIDRS=127.0.0.0/8",
		// A delivery job of n requests has n×timeout+30 s before it can
		// be rescued: keep it short so that the suite stays bounded.
		"AETHER_WEBHOOK_TIMEOUT=1s",
		"AETHER_WEBHOOK_MAX_IN_FLIGHT_PER_DESTINATION=32",
		"AETHER_WEBHOOK_RETRY_SCHEDULE=1s,1s,1s,2s,2s,2s,3s,3s,3s,5s",
		"AETHER_JOB_RESCUE_AFTER=5s",
		"AETHER_EXPORT_JOB_TIMEOUT=20s",
		"AETHER_SHUTDOWN_TIMEOUT=5s",
	}
	d.token = d.mintToken(t)
	return d
}

// mintToken runs `aether token` for the scenario's tenant and project.
func (d *deployment) mintToken(t *testing.T) string {
	t.Helper()
	cmd := exec.Command(aetherBin, "token", "--tenant", tenant, "--project", project,
		"--permissions", allPermissions, "--subject", "chaos", "--ttl", "1h", "--data-dir", t.TempDir())
	cmd.Env = append(baseEnv(), d.env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "aether token: %s", stderr.String())
	return strings.TrimSpace(string(out))
}

// seed appends n demo audit events with `aether seed`.
func (d *deployment) seed(t *testing.T, n int) {
	t.Helper()
	cmd := exec.Command(aetherBin, "seed", "--tenant", tenant, "--project", project,
		"--events", fmt.Sprint(n), "--batch", "1000", "--data-dir", t.TempDir())
	cmd.Env = append(baseEnv(), d.env...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "aether seed: %s", out)
}

// syncBuffer is a bytes.Buffer safe for a writing process and a reading
// test.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// server is a running `aether serve`.
type server struct {
	name   string
	base   string // http://127.0.0.1:port
	cmd    *exec.Cmd
	pool   *pgxpool.Pool // the test's own connections to the database
	stderr *syncBuffer
	done   chan struct{}
}

// serve starts `aether serve` on a free loopback port and waits until it is
// ready. It is killed, if still running, when the test ends; its log is
// shown when the test failed.
func (d *deployment) serve(t *testing.T, name string) *server {
	t.Helper()
	addr := freeAddr(t)
	s := &server{name: name, base: "http://" + addr, stderr: &syncBuffer{}, done: make(chan struct{})}
	s.cmd = exec.Command(aetherBin, "serve")
	// Its connections carry its name, so that a kill can await their end.
	s.cmd.Env = append(append(baseEnv(), d.env...), "AETHER_ADDR="+addr, "AETHER_DATA_DIR="+t.TempDir(),
		"DATABASE_URL="+d.dbURL+"&application_name=aether-"+name)
	s.pool = d.pool
	s.cmd.Stdout = s.stderr
	s.cmd.Stderr = s.stderr
	require.NoError(t, s.cmd.Start())
	go func() {
		_ = s.cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(func() {
		if s.running() {
			_ = s.cmd.Process.Signal(syscall.SIGKILL)
			<-s.done
		}
		if t.Failed() {
			t.Logf("aether serve %s log:\n%s", s.name, s.stderr.String())
		}
	})
	s.awaitReadyz(t, http.StatusOK, 90*time.Second)
	return s
}

// kill sends SIGKILL to the process, waits for it to end, and then for
// PostgreSQL to end its connections: a statement it had sent (a COMMIT)
// may still complete until then.
func (s *server) kill(t *testing.T) {
	t.Helper()
	select {
	case <-s.done:
		return
	default:
	}
	require.NoError(t, s.cmd.Process.Signal(syscall.SIGKILL))
	<-s.done
	await(t, time.Minute, "PostgreSQL ends the killed process's connections", func() bool {
		var n int
		err := s.pool.QueryRow(context.Background(),
			`SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, "aether-"+s.name).Scan(&n)
		return err == nil && n == 0
	})
}

// running reports whether the process is still running.
func (s *server) running() bool {
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// readyz returns the status of GET /readyz, or 0 when there is no answer.
func (s *server) readyz() int {
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(s.base + "/readyz")
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode
}

// awaitReadyz polls /readyz until it answers want, failing if the process
// ends or the deadline passes first.
func (s *server) awaitReadyz(t *testing.T, want int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		require.True(t, s.running(), "aether serve %s exited; log:\n%s", s.name, s.stderr.String())
		got := s.readyz()
		if got == want {
			return
		}
		require.True(t, time.Now().Before(deadline), "/readyz of %s answered %d, not %d, for %s", s.name, got, want, timeout)
		time.Sleep(50 * time.Millisecond)
	}
}

// freeAddr returns a loopback address with a port free now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// gqlError is a GraphQL error response.
type gqlError struct{ errs []map[string]any }

func (e *gqlError) Error() string { return fmt.Sprintf("graphql errors: %v", e.errs) }

// graphql sends one operation to base and decodes its data into out. A
// transport failure, a non-200 answer or GraphQL errors are returned as an
// error, for the loops that expect failures while PostgreSQL is down.
func graphql(ctx context.Context, base, token, query string, vars map[string]any, out any) error {
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/graphql", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	var res struct {
		Data   json.RawMessage  `json:"data"`
		Errors []map[string]any `json:"errors"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return fmt.Errorf("HTTP %d: %s", resp.StatusCode, raw)
	}
	if len(res.Errors) > 0 {
		return &gqlError{res.Errors}
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d: %s", resp.StatusCode, raw)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(res.Data, out)
}

// mustGraphQL is graphql that fails the test on any error.
func mustGraphQL(t *testing.T, s *server, token, query string, vars map[string]any, out any) {
	t.Helper()
	require.NoError(t, graphql(context.Background(), s.base, token, query, vars, out))
}

// webhookSetup creates a destination at url and subs subscriptions of it to
// every "chaos.*" event, and returns the subscriptions' ids.
func webhookSetup(t *testing.T, s *server, token, url string, subs int) []string {
	t.Helper()
	var dest struct {
		CreateWebhookDestination struct {
			Destination struct{ ID string }
		}
	}
	mustGraphQL(t, s, token, `mutation($in: CreateWebhookDestinationInput!) {
		createWebhookDestination(input: $in) { destination { id } } }`,
		map[string]any{"in": map[string]any{"projectId": project, "url": url}}, &dest)
	var ids []string
	for range subs {
		var sub struct {
			CreateWebhookSubscription struct {
				Subscription struct{ ID string }
			}
		}
		mustGraphQL(t, s, token, `mutation($in: CreateWebhookSubscriptionInput!) {
			createWebhookSubscription(input: $in) { subscription { id } } }`,
			map[string]any{"in": map[string]any{"projectId": project,
				"destinationId": dest.CreateWebhookDestination.Destination.ID, "eventTypes": []string{"chaos.*"}}}, &sub)
		ids = append(ids, sub.CreateWebhookSubscription.Subscription.ID)
	}
	return ids
}

// recordEvents records n "chaos.tick" events in one batch through s.
func recordEvents(ctx context.Context, s *server, token string, n int) error {
	events := make([]map[string]any, n)
	now := time.Now().UTC().Format(time.RFC3339Nano)
	for i := range events {
		events[i] = map[string]any{
			"projectId": project, "action": "chaos.tick", "occurredAt": now, "outcome": "SUCCESS",
			"subject":  map[string]any{"type": "SERVICE", "id": "chaos"},
			"resource": map[string]any{"type": "probe", "id": randomHex(4)},
		}
	}
	return graphql(ctx, s.base, token, `mutation($in: RecordAuditEventsInput!) {
		recordAuditEvents(input: $in) { events { sequence } } }`,
		map[string]any{"in": map[string]any{"events": events}}, nil)
}

// await polls cond every 100 ms until it returns true, failing the test
// with what when timeout passes first. cond may fail the test itself.
func await(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		require.True(t, time.Now().Before(deadline), "after %s: %s", timeout, what)
		time.Sleep(100 * time.Millisecond)
	}
}

// count runs a SELECT count(*) style query and returns its number.
func count(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// pgServer is a private cluster that a test stops and starts.
type pgServer struct {
	dataDir string
	cluster *pgcluster.Cluster
}

// privateCluster starts a cluster of the test's own, for a scenario that
// stops PostgreSQL; it is stopped when the test ends.
func privateCluster(t *testing.T) *pgServer {
	t.Helper()
	// A short path keeps the socket inside the data dir.
	dir, err := os.MkdirTemp("", "chaos-pg-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(dir, 0o755))
	pg := &pgServer{dataDir: filepath.Join(dir, "pg")}
	t.Cleanup(func() {
		if pg.cluster != nil {
			_ = pg.cluster.Stop(context.Background())
		}
		_ = os.RemoveAll(dir)
	})
	pg.start(t)
	return pg
}

// start starts the cluster (again).
func (pg *pgServer) start(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := pgcluster.Start(ctx, pgcluster.Options{DataDir: pg.dataDir, Database: "postgres"})
	require.NoError(t, err)
	pg.cluster = c
}

// stop stops the cluster with a fast shutdown: open transactions are rolled
// back and every client is disconnected.
func (pg *pgServer) stop(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.NoError(t, pg.cluster.Stop(ctx))
	pg.cluster = nil
}
