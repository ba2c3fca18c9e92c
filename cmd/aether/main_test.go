package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/auth"
	"github.com/aetheriot/aether-audit/migrations"
	"github.com/aetheriot/aether-audit/store"
	"github.com/aetheriot/aether-audit/store/storetest"
)

// aetherBin is the path of the aether binary TestMain builds.
var aetherBin string

// TestMain builds the binary once, then runs the tests against a real
// PostgreSQL.
func TestMain(m *testing.M) {
	dir, err := binDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, "creating binary folder:", err)
		os.Exit(1)
	}
	aetherBin = filepath.Join(dir, "aether")
	build := exec.Command("go", "build", "-o", aetherBin, "./")
	build.Dir = "."
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building aether: %v\n%s", err, out)
		os.Exit(1)
	}
	storetest.Main(m)
}

// binDir returns a new folder for the built binary. storetest.Main exits
// the process, so nothing of ours runs after the tests: under `go test` the
// folder is made inside the test binary's own work folder, which the go
// command removes afterwards.
func binDir() (string, error) {
	parent := ""
	if exe := filepath.Dir(os.Args[0]); strings.Contains(exe, "go-build") {
		parent = exe
	}
	return os.MkdirTemp(parent, "aether-bin-")
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

// process is a running aether command.
type process struct {
	cmd            *exec.Cmd
	stdout, stderr *syncBuffer
	done           chan struct{}
}

// baseEnv is the test's environment without any setting of aether, so that
// the commands see only what a test gives them.
func baseEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "AETHER_") || strings.HasPrefix(kv, "DATABASE_URL=") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// start runs the binary with args and env (added to baseEnv). The process
// is killed, if still running, when the test ends.
func start(t *testing.T, env []string, args ...string) *process {
	t.Helper()
	p := &process{
		cmd:    exec.Command(aetherBin, args...),
		stdout: &syncBuffer{},
		stderr: &syncBuffer{},
		done:   make(chan struct{}),
	}
	p.cmd.Env = append(baseEnv(), env...)
	p.cmd.Stdout = p.stdout
	p.cmd.Stderr = p.stderr
	require.NoError(t, p.cmd.Start())
	go func() {
		_ = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("aether %s stderr:\n%s", strings.Join(args, " "), p.stderr.String())
		}
	})
	return p
}

// exited reports whether the process has ended.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// wait waits up to timeout for the process to end and returns its exit
// code.
func (p *process) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(timeout):
		require.FailNow(t, "process did not exit", "aether %s still running after %s; stderr:\n%s",
			strings.Join(p.cmd.Args[1:], " "), timeout, p.stderr.String())
		return -1
	}
}

// run runs the binary to completion and returns its output and exit code.
func run(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	p := start(t, env, args...)
	code = p.wait(t, 60*time.Second)
	return p.stdout.String(), p.stderr.String(), code
}

// dataDir returns a fresh data dir, searchable as the embedded PostgreSQL
// would need it.
func dataDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.Chmod(dir, 0o755))
	return dir
}

// mintToken runs `aether token` and returns the token it printed.
func mintToken(t *testing.T, dataDir string, args ...string) string {
	t.Helper()
	stdout, stderr, code := run(t, nil, append([]string{"token", "--data-dir", dataDir}, args...)...)
	require.Equal(t, 0, code, "stderr: %s", stderr)
	tok, ok := strings.CutSuffix(stdout, "\n")
	require.True(t, ok, "stdout %q is not one line", stdout)
	require.NotContains(t, tok, "\n", "stdout %q is not one line", stdout)
	return tok
}

func TestToken(t *testing.T) {
	t.Parallel()
	dir := dataDir(t)

	before := time.Now()
	tok := mintToken(t, dir, "--tenant", "t", "--project", "p", "--permissions", "audit:read")
	parts := strings.Split(tok, ".")
	require.Len(t, parts, 3, "token %q", tok)
	for _, part := range parts {
		require.NotEmpty(t, part)
	}

	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	require.NoError(t, err)
	var claims struct {
		Sub         string   `json:"sub"`
		TenantID    string   `json:"tenant_id"`
		ProjectIDs  []string `json:"project_ids"`
		Permissions []string `json:"permissions"`
		Exp         int64    `json:"exp"`
		Iat         int64    `json:"iat"`
	}
	require.NoError(t, json.Unmarshal(payload, &claims), "payload %s", payload)
	require.Equal(t, "t", claims.TenantID)
	require.Equal(t, []string{"p"}, claims.ProjectIDs)
	require.Equal(t, []string{"audit:read"}, claims.Permissions)
	require.Equal(t, "dev", claims.Sub)
	exp := time.Unix(claims.Exp, 0)
	require.WithinRange(t, exp, before.Add(time.Hour-2*time.Second), time.Now().Add(time.Hour+time.Second))
	require.WithinRange(t, time.Unix(claims.Iat, 0), before.Add(-2*time.Second), time.Now().Add(time.Second))

	// The token is signed with the secret generated into the data dir,
	// which is kept private and reused.
	secretFile := filepath.Join(dir, "jwt-secret")
	info, err := os.Stat(secretFile)
	require.NoError(t, err)
	require.Equal(t, fs.FileMode(0o600), info.Mode().Perm())
	secret, err := auth.LoadOrCreateSecret(secretFile)
	require.NoError(t, err)
	verifier, err := auth.NewVerifier(context.Background(), auth.VerifierConfig{HMACSecret: secret})
	require.NoError(t, err)
	defer verifier.Close()
	id, err := verifier.Verify(tok)
	require.NoError(t, err)
	require.Equal(t, "t", id.TenantID)
	require.Equal(t, []app.Permission{app.PermissionAuditRead}, id.Permissions)

	// A second token from the same data dir verifies with the same secret.
	tok2 := mintToken(t, dir, "--tenant", "t2", "--project", "a", "--project", "b",
		"--permissions", "audit:read, audit:write", "--subject", "ci", "--ttl", "5m")
	id2, err := verifier.Verify(tok2)
	require.NoError(t, err)
	require.Equal(t, "t2", id2.TenantID)
	require.Equal(t, "ci", id2.Subject)
	require.Equal(t, []string{"a", "b"}, id2.ProjectIDs)
	require.Equal(t, []app.Permission{app.PermissionAuditRead, app.PermissionAuditWrite}, id2.Permissions)
	require.WithinDuration(t, time.Now().Add(5*time.Minute), id2.ExpiresAt, 5*time.Second)

	// A token from another data dir does not.
	other := mintToken(t, dataDir(t), "--tenant", "t", "--project", "p")
	_, err = verifier.Verify(other)
	require.Error(t, err)
}

func TestTokenErrors(t *testing.T) {
	t.Parallel()
	dir := dataDir(t)
	// Command line errors: usage goes to stderr, stdout stays empty.
	for _, args := range [][]string{
		{"--project", "p"}, // no tenant
		{"--tenant", "t"},  // no project
		{"--tenant", "t", "--project", "p", "--ttl", "soon"},
	} {
		stdout, stderr, code := run(t, nil, append([]string{"token", "--data-dir", dir}, args...)...)
		require.NotEqual(t, 0, code, "args %q", args)
		require.Empty(t, stdout, "args %q", args)
		require.Contains(t, stderr, "Usage:", "args %q", args)
	}
	// Refused token requests print nothing on stdout.
	for _, args := range [][]string{
		{"--tenant", " ", "--project", "p"},
		{"--tenant", "t", "--project", ""},
		{"--tenant", "t", "--project", "p", "--ttl=-1h"},
		{"--tenant", "t", "--project", "p", "--subject", " "},
	} {
		stdout, stderr, code := run(t, nil, append([]string{"token", "--data-dir", dir}, args...)...)
		require.NotEqual(t, 0, code, "args %q", args)
		require.Empty(t, stdout, "args %q", args)
		require.NotEmpty(t, stderr, "args %q", args)
	}

	// A short AETHER_JWT_SECRET is refused without echoing it.
	stdout, stderr, code := run(t, []string{"AETHER_JWT_SECRET=short-secret-value"},
		"token", "--data-dir", dir, "--tenant", "t", "--project", "p")
	require.NotEqual(t, 0, code)
	require.Empty(t, stdout)
	require.NotContains(t, stderr, "short-secret-value")
}

// freeAddr returns a loopback address with a port that was free a moment
// ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// awaitReady polls base/readyz until it answers 200, failing if the
// process ends or the deadline passes first.
func awaitReady(t *testing.T, p *process, base string, timeout time.Duration) {
	t.Helper()
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(timeout)
	for {
		require.False(t, p.exited(), "aether serve exited early; stderr:\n%s", p.stderr.String())
		resp, err := client.Get(base + "/readyz")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		require.True(t, time.Now().Before(deadline), "not ready after %s (last error %v); stderr:\n%s", timeout, err, p.stderr.String())
		time.Sleep(50 * time.Millisecond)
	}
}

// postGraphQL sends one GraphQL operation and decodes the response.
func postGraphQL(t *testing.T, base, token, query string, vars map[string]any) (data json.RawMessage, errs []map[string]any) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, base+"/graphql", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var out struct {
		Data   json.RawMessage  `json:"data"`
		Errors []map[string]any `json:"errors"`
	}
	require.NoError(t, json.Unmarshal(raw, &out), "body %s", raw)
	return out.Data, out.Errors
}

func TestServe(t *testing.T) {
	t.Parallel()
	dir := dataDir(t)
	addr := freeAddr(t)
	base := "http://" + addr
	p := start(t, []string{
		"DATABASE_URL=" + storetest.NewDatabase(t),
		"AETHER_ADDR=" + addr,
		"AETHER_DATA_DIR=" + dir,
		"AETHER_LOG_LEVEL=warn",
	}, "serve")
	awaitReady(t, p, base, 60*time.Second)

	resp, err := http.Get(base + "/healthz")
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	// A token from `aether token` on the same data dir is accepted.
	tok := mintToken(t, dir, "--tenant", "acme", "--project", "plant-1", "--permissions", "audit:read,audit:write")

	data, errs := postGraphQL(t, base, tok, `mutation($in: RecordAuditEventInput!) {
  recordAuditEvent(input: $in) { event { id sequence action chainHash } }
}`, map[string]any{"in": map[string]any{
		"projectId":  "plant-1",
		"action":     "device.firmware.updated",
		"occurredAt": time.Now().UTC().Format(time.RFC3339Nano),
		"subject":    map[string]any{"type": "SERVICE", "id": "updater"},
		"resource":   map[string]any{"type": "device", "id": "dev-42"},
		"outcome":    "SUCCESS",
		"details":    map[string]any{"version": "2.0.1"},
	}})
	require.Empty(t, errs)
	var recorded struct {
		RecordAuditEvent struct {
			Event struct {
				ID, Sequence, Action, ChainHash string
			}
		}
	}
	require.NoError(t, json.Unmarshal(data, &recorded))
	ev := recorded.RecordAuditEvent.Event
	require.Equal(t, "1", ev.Sequence)
	require.Len(t, ev.ChainHash, 64)

	data, errs = postGraphQL(t, base, tok, `query($p: ID!, $id: ID!) {
  auditEvent(projectId: $p, id: $id) { id sequence action details }
}`, map[string]any{"p": "plant-1", "id": ev.ID})
	require.Empty(t, errs)
	require.JSONEq(t, fmt.Sprintf(`{"auditEvent":{"id":%q,"sequence":"1","action":"device.firmware.updated","details":{"version":"2.0.1"}}}`, ev.ID), string(data))

	// A token signed with another secret is refused.
	foreign := mintToken(t, dataDir(t), "--tenant", "acme", "--project", "plant-1")
	_, errs = postGraphQL(t, base, foreign, `{ auditEvents(projectId: "plant-1") { edges { cursor } } }`, nil)
	require.Len(t, errs, 1)
	require.Equal(t, map[string]any{"code": "UNAUTHENTICATED"}, errs[0]["extensions"])

	// SIGTERM shuts the server down cleanly.
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, 0, p.wait(t, 30*time.Second), "stderr:\n%s", p.stderr.String())
	_, err = (&http.Client{Timeout: 2 * time.Second}).Get(base + "/healthz")
	require.Error(t, err, "still serving after exit")
}

// migrationVersions lists the versions of the embedded migrations.
func migrationVersions(t *testing.T) []int64 {
	t.Helper()
	entries, err := fs.ReadDir(migrations.FS, ".")
	require.NoError(t, err)
	var out []int64
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		prefix, _, ok := strings.Cut(e.Name(), "_")
		require.True(t, ok, "migration %s", e.Name())
		v, err := strconv.ParseInt(prefix, 10, 64)
		require.NoError(t, err, "migration %s", e.Name())
		out = append(out, v)
	}
	require.NotEmpty(t, out)
	return out
}

func TestMigrateConcurrently(t *testing.T) {
	t.Parallel()
	dbURL := storetest.NewEmptyDatabase(t)
	env := []string{"DATABASE_URL=" + dbURL, "AETHER_DATA_DIR=" + dataDir(t)}

	procs := []*process{start(t, env, "migrate"), start(t, env, "migrate")}
	for _, p := range procs {
		require.Equal(t, 0, p.wait(t, 60*time.Second), "stderr:\n%s", p.stderr.String())
	}

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer conn.Close(ctx)

	appliedCounts := func() map[int64]int {
		rows, err := conn.Query(ctx, `SELECT version_id, count(*) FROM goose_db_version WHERE is_applied GROUP BY version_id`)
		require.NoError(t, err)
		counts := map[int64]int{}
		for rows.Next() {
			var v int64
			var n int
			require.NoError(t, rows.Scan(&v, &n))
			counts[v] = n
		}
		require.NoError(t, rows.Err())
		return counts
	}
	counts := appliedCounts()
	for _, v := range migrationVersions(t) {
		require.Equal(t, 1, counts[v], "migration %d applied %d times (all: %v)", v, counts[v], counts)
	}
	for v, n := range counts {
		require.Equal(t, 1, n, "version %d recorded %d times", v, n)
	}

	for _, table := range []string{"river_job", "river_leader", "river_migration", "river_queue", "audit_events"} {
		var exists bool
		require.NoError(t, conn.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, table).Scan(&exists))
		require.True(t, exists, "table %s missing", table)
	}
	var riverVersions, riverDistinct int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*), count(DISTINCT version) FROM river_migration`).Scan(&riverVersions, &riverDistinct))
	require.Positive(t, riverVersions)
	require.Equal(t, riverDistinct, riverVersions, "a river migration was recorded twice")

	// Migrating an up-to-date database changes nothing.
	_, stderr, code := run(t, env, "migrate")
	require.Equal(t, 0, code, "stderr: %s", stderr)
	require.Equal(t, counts, appliedCounts())
}

func TestServeHelp(t *testing.T) {
	t.Parallel()
	stdout, stderr, code := run(t, nil, "serve", "--help")
	require.Equal(t, 0, code, "stderr: %s", stderr)
	for _, env := range []string{"DATABASE_URL", "AETHER_ADDR", "AETHER_JWT_SECRET", "AETHER_DATA_DIR", "AETHER_JWKS_URL"} {
		require.Contains(t, stdout, env)
	}
}

func TestUnknownCommand(t *testing.T) {
	t.Parallel()
	stdout, stderr, code := run(t, nil, "no-such-command")
	require.NotEqual(t, 0, code)
	require.Contains(t, stdout+stderr, "no-such-command")
}

// TestSeed appends demo events through the application path: they are
// dense, chained and visible to a reader; a non-terminal gets no progress bar.
func TestSeed(t *testing.T) {
	t.Parallel()
	dbURL := storetest.NewDatabase(t)
	env := []string{"DATABASE_URL=" + dbURL}
	stdout, stderr, code := run(t, env, "seed", "--tenant", "acme", "--project", "plant-1", "--events", "1234", "--batch", "500")
	require.Equal(t, 0, code, "stderr: %s", stderr)
	require.Empty(t, stdout)
	require.Contains(t, stderr, "seeded 1234 events into acme/plant-1")

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var n, maxSeq int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*), max(sequence) FROM audit_events
		WHERE tenant_id = 'acme' AND project_id = 'plant-1'`).Scan(&n, &maxSeq))
	require.Equal(t, 1234, n)
	require.Equal(t, 1234, maxSeq)

	a := app.New(store.New(mustPool(t, dbURL)), app.Config{})
	v, err := a.VerifyAuditChain(ctx, app.Identity{TenantID: "acme", ProjectIDs: []string{"plant-1"},
		Permissions: []app.Permission{app.PermissionAuditRead}}, "plant-1", nil, nil)
	require.NoError(t, err)
	require.True(t, v.Valid)
	require.Equal(t, uint64(1234), v.CheckedCount)

	_, stderr, code = run(t, env, "seed", "--tenant", "acme", "--project", "plant-1", "--events", "0")
	require.NotEqual(t, 0, code)
	require.Contains(t, stderr, "--events")
}

func mustPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// TestTwoProcessesShareTheLiveFeed runs two `aether serve` processes on one
// database: an event recorded through A reaches a WebSocket subscriber of
// B, and after A is killed, B still delivers events recorded through it.
func TestTwoProcessesShareTheLiveFeed(t *testing.T) {
	t.Parallel()
	dir := dataDir(t)
	dbURL := storetest.NewDatabase(t)
	serve := func() (*process, string) {
		addr := freeAddr(t)
		p := start(t, []string{"DATABASE_URL=" + dbURL, "AETHER_ADDR=" + addr, "AETHER_DATA_DIR=" + dir, "AETHER_LOG_LEVEL=warn"}, "serve")
		awaitReady(t, p, "http://"+addr, 60*time.Second)
		return p, addr
	}
	a, addrA := serve()
	_, addrB := serve()
	tok := mintToken(t, dir, "--tenant", "acme", "--project", "plant-1", "--permissions", "audit:read,audit:write")

	d := websocket.Dialer{Subprotocols: []string{"graphql-transport-ws"}, HandshakeTimeout: 10 * time.Second}
	conn, resp, err := d.Dial("ws://"+addrB+"/graphql", nil)
	require.NoError(t, err)
	resp.Body.Close()
	defer conn.Close()
	require.NoError(t, conn.WriteJSON(map[string]any{"type": "connection_init", "payload": map[string]any{"Authorization": "Bearer " + tok}}))
	next := func() map[string]any {
		for {
			require.NoError(t, conn.SetReadDeadline(time.Now().Add(30*time.Second)))
			var msg map[string]any
			require.NoError(t, conn.ReadJSON(&msg))
			if msg["type"] == "ping" {
				require.NoError(t, conn.WriteJSON(map[string]any{"type": "pong"}))
				continue
			}
			return msg
		}
	}
	require.Equal(t, "connection_ack", next()["type"])
	require.NoError(t, conn.WriteJSON(map[string]any{"id": "1", "type": "subscribe", "payload": map[string]any{
		"query":     `subscription { auditEventRecorded(projectId: "plant-1", afterSequence: "0") { sequence } }`,
		"variables": map[string]any{},
	}}))
	record := func(addr string) {
		_, errs := postGraphQL(t, "http://"+addr, tok, `mutation($in: RecordAuditEventInput!) { recordAuditEvent(input: $in) { event { sequence } } }`,
			map[string]any{"in": map[string]any{
				"projectId": "plant-1", "action": "device.firmware.updated", "occurredAt": time.Now().UTC().Format(time.RFC3339Nano),
				"subject": map[string]any{"type": "SERVICE", "id": "updater"}, "resource": map[string]any{"type": "device", "id": "d"},
				"outcome": "SUCCESS",
			}})
		require.Empty(t, errs)
	}
	sequence := func() string {
		msg := next()
		require.Equal(t, "next", msg["type"], "%v", msg)
		return msg["payload"].(map[string]any)["data"].(map[string]any)["auditEventRecorded"].(map[string]any)["sequence"].(string)
	}
	record(addrA)
	require.Equal(t, "1", sequence(), "recorded through A, delivered by B")

	require.NoError(t, a.cmd.Process.Kill())
	record(addrB)
	require.Equal(t, "2", sequence(), "B carries on without A")
}
