// Package storetest gives tests a real, freshly migrated PostgreSQL
// database of their own. It uses the server named by DATABASE_URL when set,
// else PostgreSQL at 127.0.0.1:5432 (user postgres) when reachable, else a
// private cluster started from the installed PostgreSQL binaries for the
// life of the test binary. Each test gets its own database cloned from a
// migrated template, so tests are isolated and run in any order.
//
// A test package that uses it runs its tests through Main:
//
//	func TestMain(m *testing.M) { storetest.Main(m) }
package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aetheriot/aether-audit/internal/pgcluster"
	"github.com/aetheriot/aether-audit/store"
)

var (
	setupOnce sync.Once
	setupErr  error
	adminURL  string // a database on the server we may CREATE DATABASE from
	template  string // name of the migrated template database
	cluster   *pgcluster.Cluster
	tempDir   string
)

// Main runs the package's tests and then drops the template database and
// stops the private cluster, if one was started.
func Main(m *testing.M) {
	os.Exit(Run(m))
}

// Run is Main without the exit: it runs the tests, cleans up as Main does,
// and returns the exit code, for a TestMain with work of its own after the
// tests.
func Run(m *testing.M) int {
	code := m.Run()
	ctx := context.Background()
	if template != "" && adminURL != "" {
		if conn, err := pgx.Connect(ctx, adminURL); err == nil {
			_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{template}.Sanitize()+" WITH (FORCE)")
			_ = conn.Close(ctx)
		}
	}
	if cluster != nil {
		_ = cluster.Stop(ctx)
	}
	if tempDir != "" {
		_ = os.RemoveAll(tempDir)
	}
	return code
}

// CreateDatabase creates a fresh migrated database outside any test, for a
// fixture a package's tests share (such as the server its Example functions
// talk to), and returns its URL and a function that drops it. Call it from
// TestMain under Run, which removes the template and the private cluster
// only after the tests.
func CreateDatabase(ctx context.Context) (dbURL string, drop func(), err error) {
	setupOnce.Do(func() { setupErr = setup() })
	if setupErr != nil {
		return "", nil, fmt.Errorf("test database: %w", setupErr)
	}
	name := "aether_shared_" + randomSuffix()
	if err := createDatabase(ctx, name, template); err != nil {
		return "", nil, err
	}
	return urlFor(name), func() {
		if conn, err := pgx.Connect(context.Background(), adminURL); err == nil {
			_, _ = conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
			_ = conn.Close(context.Background())
		}
	}, nil
}

func setup() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	switch {
	case os.Getenv("AETHER_TEST_DATABASE") == "private":
		if err := startPrivateCluster(ctx); err != nil {
			return err
		}
	case os.Getenv("DATABASE_URL") != "":
		adminURL = os.Getenv("DATABASE_URL")
	case store.Reachable(ctx, localURL):
		adminURL = localURL
	default:
		if err := startPrivateCluster(ctx); err != nil {
			return fmt.Errorf("no database reachable and starting a private cluster failed: %w", err)
		}
	}
	template = "aether_tmpl_" + randomSuffix()
	if err := createDatabase(ctx, template, ""); err != nil {
		return err
	}
	pool, err := pgxpool.New(ctx, urlFor(template))
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := store.Migrate(ctx, pool, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
		return fmt.Errorf("migrating template: %w", err)
	}
	return nil
}

// localURL is the PostgreSQL this kind of machine runs.
const localURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// startPrivateCluster starts a cluster for this test binary in a temporary
// folder, removed by Main.
func startPrivateCluster(ctx context.Context) error {
	dir, err := os.MkdirTemp("", "aether-test-pg-")
	if err != nil {
		return err
	}
	tempDir = dir
	// The server may run as another (unprivileged) user: it must reach the folder.
	if err := os.Chmod(dir, 0o755); err != nil {
		return err
	}
	c, err := pgcluster.Start(ctx, pgcluster.Options{DataDir: filepath.Join(dir, "pg"), Database: "postgres"})
	if err != nil {
		return err
	}
	cluster = c
	adminURL = c.URLFor("postgres")
	return nil
}

func createDatabase(ctx context.Context, name, fromTemplate string) error {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("connecting to test server: %w", err)
	}
	defer conn.Close(ctx)
	sql := "CREATE DATABASE " + pgx.Identifier{name}.Sanitize()
	if fromTemplate != "" {
		sql += " TEMPLATE " + pgx.Identifier{fromTemplate}.Sanitize()
	}
	if _, err := conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("creating test database: %w", err)
	}
	return nil
}

// urlFor returns adminURL with its database replaced by name.
func urlFor(name string) string {
	if strings.Contains(adminURL, "://") {
		u, err := url.Parse(adminURL)
		if err == nil {
			u.Path = "/" + name
			return u.String()
		}
	}
	// key=value DSN
	return adminURL + " dbname=" + name
}

func randomSuffix() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// NewDatabase creates a fresh migrated database for t, dropped when t ends,
// and returns its connection URL.
func NewDatabase(t testing.TB) string {
	t.Helper()
	return newDatabase(t, "aether_t_", true)
}

// NewEmptyDatabase creates a database for t without any migration applied,
// dropped when t ends, and returns its connection URL: for tests of
// migrating itself.
func NewEmptyDatabase(t testing.TB) string {
	t.Helper()
	return newDatabase(t, "aether_empty_", false)
}

func newDatabase(t testing.TB, prefix string, migrated bool) string {
	t.Helper()
	setupOnce.Do(func() { setupErr = setup() })
	if setupErr != nil {
		t.Fatalf("test database: %v", setupErr)
	}
	name := prefix + randomSuffix()
	from := ""
	if migrated {
		from = template
	}
	ctx := context.Background()
	if err := createDatabase(ctx, name, from); err != nil {
		t.Fatalf("test database: %v", err)
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(ctx, adminURL)
		if err != nil {
			return
		}
		defer conn.Close(ctx)
		_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	})
	return urlFor(name)
}

// NewPool creates a fresh migrated database for t and returns a pool on it,
// closed when t ends.
func NewPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(NewDatabase(t))
	if err != nil {
		t.Fatalf("test database: %v", err)
	}
	cfg.MaxConns = 20
	store.ConfigurePool(cfg)
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("test database: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// NewAppRoleDatabase creates a fresh migrated database for t, and a runtime
// role of its own granted on it (store.GrantAppRole), both dropped when t
// ends. It returns the owner's connection URL (the server's superuser, as
// for NewDatabase), the runtime role's URL (the same server and database,
// logged in as the role, without password: the test server trusts local
// connections) and the role's name.
func NewAppRoleDatabase(t testing.TB) (ownerURL, appURL, role string) {
	t.Helper()
	role = "aether_app_t_" + randomSuffix()
	ctx := context.Background()
	// Registered first, so run last: after the database, which holds the
	// role's privileges, is dropped.
	t.Cleanup(func() { dropRole(ctx, role) })
	ownerURL = NewDatabase(t)
	conn, err := pgx.Connect(ctx, ownerURL)
	if err != nil {
		t.Fatalf("test database: %v", err)
	}
	defer conn.Close(ctx)
	if err := store.GrantAppRole(ctx, conn, store.AppRole{Name: role}); err != nil {
		t.Fatalf("test database: %v", err)
	}
	return ownerURL, URLAs(t, ownerURL, role), role
}

// URLAs returns connURL with its user replaced by role.
func URLAs(t testing.TB, connURL, role string) string {
	t.Helper()
	if !strings.Contains(connURL, "://") {
		return connURL + " user=" + role
	}
	u, err := url.Parse(connURL)
	if err != nil {
		t.Fatalf("test database: %v", err)
	}
	u.User = url.User(role)
	return u.String()
}

// DropRole drops a role that a test created on the test server (e.g.
// through aether migrate --app-role), ignoring errors: call it after the
// databases that hold the role's privileges are gone.
func DropRole(role string) { dropRole(context.Background(), role) }

func dropRole(ctx context.Context, role string) {
	if adminURL == "" {
		return
	}
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return
	}
	defer conn.Close(ctx)
	_, _ = conn.Exec(ctx, "DROP ROLE IF EXISTS "+pgx.Identifier{role}.Sanitize())
}
