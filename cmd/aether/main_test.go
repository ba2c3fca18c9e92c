package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
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
// the commands see only what a test gives them, but for development mode
// (AETHER_DEV=true, as make run sets it): serve then accepts the tokens
// aether token mints. A test's own AETHER_DEV comes later and wins.
func baseEnv() []string {
	env := []string{"AETHER_DEV=true"}
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
	return startIn(t, "", env, args...)
}

// startIn is start with the working directory dir ("" for the test's).
func startIn(t *testing.T, dir string, env []string, args ...string) *process {
	t.Helper()
	p := &process{
		cmd:    exec.Command(aetherBin, args...),
		stdout: &syncBuffer{},
		stderr: &syncBuffer{},
		done:   make(chan struct{}),
	}
	p.cmd.Dir = dir
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

// served is `aether serve` on a fresh database, answering /readyz.
type served struct {
	p         *process
	addr, dir string
	base      string // http://addr
	db        string // its DATABASE_URL
}

// serveReady starts `aether serve` on a fresh database, a free loopback
// address and a fresh data dir, with env added, and waits until it is
// ready.
func serveReady(t *testing.T, env ...string) served {
	t.Helper()
	s := served{dir: dataDir(t), addr: freeAddr(t), db: storetest.NewDatabase(t)}
	s.base = "http://" + s.addr
	s.p = start(t, append([]string{
		"DATABASE_URL=" + s.db,
		"AETHER_ADDR=" + s.addr,
		"AETHER_DATA_DIR=" + s.dir,
		"AETHER_LOG_LEVEL=warn",
	}, env...), "serve")
	awaitReady(t, s.p, s.base, 60*time.Second)
	return s
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
	s := serveReady(t)
	p, dir, base := s.p, s.dir, s.base

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

// awaitExportReady polls dataExport until the export is READY, failing if it
// fails or the deadline passes, and returns its contentDigest and
// byteLength.
func awaitExportReady(t *testing.T, base, token, id string, timeout time.Duration) (digest string, length int64) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		data, errs := postGraphQL(t, base, token, `query($id: ID!) {
  dataExport(id: $id) { state contentDigest byteLength failureReason }
}`, map[string]any{"id": id})
		require.Empty(t, errs)
		var q struct {
			DataExport struct {
				State         string
				ContentDigest *string
				ByteLength    *string
				FailureReason *string
			}
		}
		require.NoError(t, json.Unmarshal(data, &q), "data %s", data)
		e := q.DataExport
		require.NotEqual(t, "FAILED", e.State, "export failed: %v", e.FailureReason)
		if e.State == "READY" {
			require.NotNil(t, e.ContentDigest)
			require.NotNil(t, e.ByteLength)
			n, err := strconv.ParseInt(*e.ByteLength, 10, 64)
			require.NoError(t, err)
			return *e.ContentDigest, n
		}
		require.True(t, time.Now().Before(deadline), "export %s still %s after %s", id, e.State, timeout)
		time.Sleep(100 * time.Millisecond)
	}
}

// fileDigest returns sha256:<hex> of a file's content and its length.
func fileDigest(t *testing.T, path string) (string, int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:]), int64(len(b))
}

// TestExportDownload runs `aether serve`, exports a project's audit events
// and downloads the export with `aether export download`: the file matches
// the export's contentDigest and byteLength, whether named by -o, by the
// server (-o <folder>) or written to stdout; missing exports and refused
// tokens fail with a message and leave no file.
func TestExportDownload(t *testing.T) {
	t.Parallel()
	s := serveReady(t)
	dir, base := s.dir, s.base
	tok := mintToken(t, dir, "--tenant", "acme", "--project", "plant-1",
		"--permissions", "audit:read,audit:write,exports:read,exports:write,exports:download")

	now := time.Now().UTC()
	for i := range 5 {
		_, errs := postGraphQL(t, base, tok, `mutation($in: RecordAuditEventInput!) { recordAuditEvent(input: $in) { event { id } } }`,
			map[string]any{"in": map[string]any{
				"projectId": "plant-1", "action": "device.firmware.updated",
				"occurredAt": now.Add(-time.Duration(5-i) * time.Minute).Format(time.RFC3339Nano),
				"subject":    map[string]any{"type": "SERVICE", "id": "updater"},
				"resource":   map[string]any{"type": "device", "id": fmt.Sprintf("dev-%d", i)},
				"outcome":    "SUCCESS", "details": map[string]any{"version": "2.0.1"},
			}})
		require.Empty(t, errs)
	}
	requestExport := func(compression string) string {
		data, errs := postGraphQL(t, base, tok, `mutation($in: RequestDataExportInput!) { requestDataExport(input: $in) { export { id state } } }`,
			map[string]any{"in": map[string]any{
				"projectId": "plant-1", "kind": "AUDIT", "format": "NDJSON", "compression": compression,
				"from": now.Add(-time.Hour).Format(time.RFC3339), "to": now.Add(time.Hour).Format(time.RFC3339), "confirm": true,
			}})
		require.Empty(t, errs)
		var r struct {
			RequestDataExport struct{ Export struct{ ID, State string } }
		}
		require.NoError(t, json.Unmarshal(data, &r))
		require.NotEmpty(t, r.RequestDataExport.Export.ID)
		return r.RequestDataExport.Export.ID
	}
	gzID, plainID := requestExport("GZIP"), requestExport("NONE")
	gzDigest, gzLen := awaitExportReady(t, base, tok, gzID, 60*time.Second)
	plainDigest, plainLen := awaitExportReady(t, base, tok, plainID, 60*time.Second)

	env := []string{"AETHER_URL=" + base, "AETHER_TOKEN=" + tok}
	out := t.TempDir()

	// -o FILE, URL and token from the environment.
	file := filepath.Join(out, "audit.ndjson.gz")
	stdout, stderr, code := run(t, env, "export", "download", gzID, "-o", file)
	require.Equal(t, 0, code, "stderr: %s", stderr)
	require.Empty(t, stdout)
	require.Contains(t, stderr, "verified")
	digest, length := fileDigest(t, file)
	require.Equal(t, gzDigest, digest)
	require.Equal(t, gzLen, length)
	zr, err := gzip.NewReader(bytes.NewReader(mustRead(t, file)))
	require.NoError(t, err)
	plain, err := io.ReadAll(zr)
	require.NoError(t, err)
	require.Contains(t, string(plain), "device.firmware.updated")

	// -o FOLDER: the server's file name; --url and --token as flags.
	folder := filepath.Join(out, "into")
	require.NoError(t, os.Mkdir(folder, 0o755))
	_, stderr, code = run(t, nil, "export", "download", plainID, "-o", folder, "--url", base+"/", "--token", tok)
	require.Equal(t, 0, code, "stderr: %s", stderr)
	digest, length = fileDigest(t, filepath.Join(folder, "export-"+plainID+".ndjson"))
	require.Equal(t, plainDigest, digest)
	require.Equal(t, plainLen, length)

	// -o -: the bytes on stdout.
	stdout, stderr, code = run(t, env, "export", "download", plainID, "-o", "-")
	require.Equal(t, 0, code, "stderr: %s", stderr)
	sum := sha256.Sum256([]byte(stdout))
	require.Equal(t, plainDigest, "sha256:"+hex.EncodeToString(sum[:]))
	require.Len(t, stdout, int(plainLen))
	require.Equal(t, 5, strings.Count(stdout, `"action":"device.firmware.updated"`), "the 5 recorded events")

	// Missing, malformed and tampered ids fail with a message, and so do a
	// token without exports:download and no token at all; none leaves a
	// file behind.
	tampered := plainID[:len(plainID)-1] + string("0123456789abcdef"[(strings.IndexByte("0123456789abcdef", plainID[len(plainID)-1])+1)%16])
	readOnly := mintToken(t, dir, "--tenant", "acme", "--project", "plant-1", "--permissions", "exports:read")
	otherProject := mintToken(t, dir, "--tenant", "acme", "--project", "plant-2", "--permissions", "exports:read,exports:download")
	failed := filepath.Join(out, "failed")
	require.NoError(t, os.Mkdir(failed, 0o755))
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"nonexistent", env, []string{"00000000-0000-7000-8000-000000000000"}, "not found"},
		{"tampered", env, []string{tampered}, "not found"},
		{"malformed", env, []string{"not-an-id"}, "not found"},
		{"other project", []string{"AETHER_URL=" + base, "AETHER_TOKEN=" + otherProject}, []string{plainID}, "not found"},
		{"no download permission", []string{"AETHER_URL=" + base, "AETHER_TOKEN=" + readOnly}, []string{plainID}, "FORBIDDEN"},
		{"bad token", []string{"AETHER_URL=" + base, "AETHER_TOKEN=nope"}, []string{plainID}, "UNAUTHENTICATED"},
		{"no token", []string{"AETHER_URL=" + base}, []string{plainID}, "AETHER_TOKEN"},
	} {
		stdout, stderr, code := run(t, tc.env, append([]string{"export", "download", "-o", failed}, tc.args...)...)
		require.NotEqual(t, 0, code, tc.name)
		require.Empty(t, stdout, tc.name)
		require.Contains(t, stderr, tc.want, tc.name)
		require.NotContains(t, stderr, tok, tc.name)
	}
	entries, err := os.ReadDir(failed)
	require.NoError(t, err)
	require.Empty(t, entries, "failed downloads leave nothing behind")
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}

// TestSeedHistory seeds alarm and telemetry history besides the audit
// events: every row is stored, over the audit events' time span, in
// well-formed alarm lifecycles and regular telemetry series.
func TestSeedHistory(t *testing.T) {
	t.Parallel()
	dbURL := storetest.NewDatabase(t)
	env := []string{"DATABASE_URL=" + dbURL}
	before := time.Now()
	stdout, stderr, code := run(t, env, "seed", "--tenant", "acme", "--project", "plant-1", "--events", "300",
		"--alarms", "100", "--telemetry", "100", "--history-batch", "30")
	require.Equal(t, 0, code, "stderr: %s", stderr)
	require.Empty(t, stdout)
	require.Contains(t, stderr, "seeded 300 events into acme/plant-1")
	require.Contains(t, stderr, "seeded 100 alarm history entries into acme/plant-1")
	require.Contains(t, stderr, "seeded 100 telemetry points")

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer conn.Close(ctx)

	var events int
	var firstEvent time.Time
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*), min(occurred_at) FROM audit_events
		WHERE tenant_id = 'acme' AND project_id = 'plant-1'`).Scan(&events, &firstEvent))
	require.Equal(t, 300, events)
	spanStart := before.Add(-300 * 3 * time.Second)
	inSpan := func(what string, ts ...time.Time) {
		for _, tm := range ts {
			require.False(t, tm.Before(spanStart.Add(-time.Second)) || tm.After(time.Now()), "%s at %s outside [%s, now]", what, tm, spanStart)
		}
	}

	var alarms, alarmIDs, devices int
	var first, last time.Time
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*), count(DISTINCT alarm_id), count(DISTINCT device_id), min(occurred_at), max(occurred_at)
		FROM alarm_history WHERE tenant_id = 'acme' AND project_id = 'plant-1'`).Scan(&alarms, &alarmIDs, &devices, &first, &last))
	require.Equal(t, 100, alarms)
	require.Greater(t, alarmIDs, 30)
	require.Greater(t, devices, 1)
	inSpan("alarm", first, last)
	// Every alarm starts RAISED, and is acknowledged or cleared at most once.
	var badAlarms int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM (
		SELECT alarm_id,
		       (array_agg(state ORDER BY occurred_at, CASE state WHEN 'RAISED' THEN 0 WHEN 'ACKNOWLEDGED' THEN 1 ELSE 2 END))[1] AS first_state,
		       count(*) FILTER (WHERE state = 'RAISED') AS raised,
		       count(*) FILTER (WHERE state = 'ACKNOWLEDGED') AS acked,
		       count(*) FILTER (WHERE state = 'CLEARED') AS cleared,
		       count(DISTINCT severity) AS severities
		FROM alarm_history WHERE tenant_id = 'acme' AND project_id = 'plant-1' GROUP BY alarm_id) a
		WHERE first_state <> 'RAISED' OR raised <> 1 OR acked > 1 OR cleared > 1 OR severities <> 1`).Scan(&badAlarms))
	require.Zero(t, badAlarms)

	var points, series, units int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*), count(DISTINCT (device_id, metric)), count(DISTINCT unit), min(occurred_at), max(occurred_at)
		FROM telemetry_history WHERE tenant_id = 'acme' AND project_id = 'plant-1'`).Scan(&points, &series, &units, &first, &last))
	require.Equal(t, 100, points)
	require.Greater(t, series, 5)
	require.Equal(t, 3, units)
	inSpan("telemetry", first, last)
	// Regular intervals: one distinct gap between a series' points.
	var gaps int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(DISTINCT gap) FROM (
		SELECT occurred_at - lag(occurred_at) OVER (PARTITION BY device_id, metric ORDER BY occurred_at) AS gap
		FROM telemetry_history WHERE tenant_id = 'acme' AND project_id = 'plant-1') g WHERE gap IS NOT NULL`).Scan(&gaps))
	require.Equal(t, 1, gaps)
	var temps int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM telemetry_history
		WHERE tenant_id = 'acme' AND project_id = 'plant-1' AND metric = 'temperature' AND unit = '°C' AND value BETWEEN 10 AND 35`).Scan(&temps))
	require.Positive(t, temps)

	// History alone, without audit events, into another project.
	_, stderr, code = run(t, env, "seed", "--tenant", "acme", "--project", "plant-2", "--events", "0", "--telemetry", "24")
	require.Equal(t, 0, code, "stderr: %s", stderr)
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM telemetry_history WHERE tenant_id = 'acme' AND project_id = 'plant-2'`).Scan(&points))
	require.Equal(t, 24, points)
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM audit_events WHERE tenant_id = 'acme' AND project_id = 'plant-2'`).Scan(&events))
	require.Zero(t, events)

	for _, args := range [][]string{{"--alarms", "-1"}, {"--telemetry", "5", "--history-batch", "5001"}} {
		_, stderr, code = run(t, env, append([]string{"seed", "--tenant", "acme", "--project", "plant-1"}, args...)...)
		require.NotEqual(t, 0, code, "args %q", args)
		require.Contains(t, stderr, args[len(args)-2], "args %q", args)
	}
}

// TestServeNeedsTokenVerification: serve refuses to start (before it opens
// the database) without a way to verify tokens an operator chose: the
// generated development secret only with --dev, and a JWKS URL only with
// an issuer and an audience.
func TestServeNeedsTokenVerification(t *testing.T) {
	t.Parallel()
	dir := dataDir(t)
	for _, tc := range []struct {
		name string
		env  []string
		want string
	}{
		{"nothing configured", []string{"AETHER_DEV=false"}, "--dev (AETHER_DEV=true)"},
		{"JWKS without issuer or audience", []string{"AETHER_DEV=false", "AETHER_JWKS_URL=https://issuer.example/jwks.json"}, "--jwks-url needs --jwt-issuer and --jwt-audience"},
		{"JWKS without audience", []string{"AETHER_JWKS_URL=https://issuer.example/jwks.json", "AETHER_JWT_ISSUER=https://issuer.example"}, "--jwks-url needs --jwt-issuer and --jwt-audience"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := append([]string{"AETHER_DATA_DIR=" + dir, "DATABASE_URL=postgres://nobody@127.0.0.1:1/none"}, tc.env...)
			stdout, stderr, code := run(t, env, "serve")
			require.NotEqual(t, 0, code)
			require.Empty(t, stdout)
			require.Contains(t, stderr, tc.want)
		})
	}
}
