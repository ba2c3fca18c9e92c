// Package aethertest runs the real aether binary for the tests of packages
// that talk to Aether Audit only over its public API (client, outbox, the
// relay command): it builds cmd/aether once per test binary, serves it on a
// loopback port over a fresh database (store/storetest), and mints tokens
// the server accepts. It is for tests only.
//
// A test package that uses it runs its tests through Main:
//
//	func TestMain(m *testing.M) { aethertest.Main(m) }
package aethertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/auth"
	"github.com/aetheriot/aether-audit/store/storetest"
)

// bin is the aether binary Main builds.
var bin string

// Main builds the aether binary, then runs the package's tests through
// storetest.Run and exits.
func Main(m *testing.M) {
	os.Exit(run(m, false))
}

// MainWithExampleServer is Main that also serves one server for the
// package's Example functions while the tests run, and hands it to them as
// a program would get it: AETHER_URL is its base URL and AETHER_TOKEN a
// token of tenant "example" for every project with every permission.
func MainWithExampleServer(m *testing.M) {
	os.Exit(run(m, true))
}

func run(m *testing.M, exampleServer bool) int {
	parent := ""
	if exe := filepath.Dir(os.Args[0]); strings.Contains(exe, "go-build") {
		parent = exe // the go command removes its work folder afterwards
	}
	dir, err := os.MkdirTemp(parent, "aethertest-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "aethertest:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	bin = filepath.Join(dir, "aether")
	build := exec.Command("go", "build", "-o", bin, "github.com/aetheriot/aether-audit/cmd/aether")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "aethertest: building aether: %v\n%s", err, out)
		return 1
	}
	if exampleServer {
		stop, err := startExampleServer(dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, "aethertest: example server:", err)
			return 1
		}
		defer stop()
	}
	return storetest.Run(m)
}

// startExampleServer serves a shared database for the Example functions
// and sets AETHER_URL and AETHER_TOKEN.
func startExampleServer(dir string) (func(), error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dbURL, drop, err := storetest.CreateDatabase(ctx)
	if err != nil {
		return nil, err
	}
	inst, err := newInstance(dbURL, filepath.Join(dir, "example"))
	if err != nil {
		drop()
		return nil, err
	}
	if err := inst.start(); err != nil {
		drop()
		return nil, err
	}
	tok, err := inst.token("example", []string{app.AllProjects}, AllPermissions, "example", time.Hour)
	if err != nil {
		inst.kill()
		drop()
		return nil, err
	}
	os.Setenv("AETHER_URL", inst.url)
	os.Setenv("AETHER_TOKEN", tok)
	return func() {
		inst.kill()
		drop()
	}, nil
}

// Bin is the path of the built aether binary, for tests that run its
// other commands (aether relay).
func Bin() string { return bin }

// Server is an `aether serve` of one test, running or stopped.
type Server struct {
	// URL is the server's base URL, http://127.0.0.1:port; it stays the
	// same across restarts.
	URL string
	// DatabaseURL is the server's own database.
	DatabaseURL string

	inst *instance
}

// Start serves a fresh database on a free loopback port with env (AETHER_*
// settings, which win over the defaults) and waits until it is ready. The
// process is killed when the test ends; its log is shown if the test
// failed.
func Start(t testing.TB, env ...string) *Server {
	t.Helper()
	dbURL := storetest.NewDatabase(t)
	inst, err := newInstance(dbURL, t.TempDir(), env...)
	if err != nil {
		t.Fatalf("aethertest: %v", err)
	}
	s := &Server{URL: inst.url, DatabaseURL: dbURL, inst: inst}
	t.Cleanup(func() {
		inst.kill()
		if t.Failed() {
			t.Logf("aether serve log:\n%s", inst.logText())
		}
	})
	s.Restart(t)
	return s
}

// Restart starts the server again (a running one is killed first) on the
// same address and database, and waits until it is ready.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	if err := s.inst.start(); err != nil {
		t.Fatalf("aethertest: %v", err)
	}
}

// Kill ends the server with SIGKILL, as a crash would, and waits for the
// process to end. It does nothing when the server is not running.
func (s *Server) Kill(t testing.TB) { s.inst.kill() }

// Stop ends the server with SIGTERM (a graceful shutdown: WebSockets close
// with 1001) and waits for the process to end.
func (s *Server) Stop(t testing.TB) { s.inst.stop() }

// Log is what the server's processes have written so far.
func (s *Server) Log() string { return s.inst.logText() }

// Token mints a token the server accepts: tenant, projects (app.AllProjects
// for every one), comma-separated permissions, subject, lifetime.
func (s *Server) Token(t testing.TB, tenant string, projects []string, permissions, subject string, ttl time.Duration) string {
	t.Helper()
	tok, err := s.inst.token(tenant, projects, permissions, subject, ttl)
	if err != nil {
		t.Fatalf("aethertest: %v", err)
	}
	return tok
}

// AllPermissions are every permission a token of the tests may hold.
const AllPermissions = "audit:read,audit:write,webhooks:read,webhooks:write,deliveries:redrive,exports:read,exports:write,exports:download,history:write,admin"

// Await polls cond every 20 ms until it holds, failing the test with what
// after timeout.
func Await(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// token mints an HS256 token with the instance's secret.
func (in *instance) token(tenant string, projects []string, permissions, subject string, ttl time.Duration) (string, error) {
	var perms []app.Permission
	for p := range strings.SplitSeq(permissions, ",") {
		if p = strings.TrimSpace(p); p != "" {
			perms = append(perms, app.Permission(p))
		}
	}
	return auth.MintHS256(in.secret, auth.TokenRequest{
		Subject: subject, TenantID: tenant, ProjectIDs: projects, Permissions: perms, TTL: ttl,
	}, time.Now())
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
