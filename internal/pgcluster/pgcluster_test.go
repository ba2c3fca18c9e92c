package pgcluster

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// skipWithoutBinaries skips the test when PostgreSQL is not installed.
func skipWithoutBinaries(t *testing.T) {
	t.Helper()
	if _, err := FindBinaries(); errors.Is(err, ErrNoBinaries) {
		t.Skip("PostgreSQL server binaries not installed")
	}
}

// clusterDir returns a fresh folder for a cluster. When the test runs as
// root the server runs as another user, which must be able to enter every
// parent folder; t.TempDir's per-test parent folder is mode 0700, so it is
// opened up here.
func clusterDir(t *testing.T) string {
	t.Helper()
	tmp := t.TempDir() // <TMPDIR>/<TestName><random>/<NNN>
	if os.Geteuid() == 0 {
		require.NoError(t, os.Chmod(tmp, 0o755))
		require.NoError(t, os.Chmod(filepath.Dir(tmp), 0o755))
	}
	return filepath.Join(tmp, "pg")
}

func startCluster(t *testing.T, ctx context.Context, dir string) *Cluster {
	t.Helper()
	c, err := Start(ctx, Options{DataDir: dir})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	return c
}

func TestFindBinaries(t *testing.T) {
	dir, err := FindBinaries()
	if errors.Is(err, ErrNoBinaries) {
		t.Skip("PostgreSQL server binaries not installed")
	}
	require.NoError(t, err)
	for _, name := range []string{"initdb", "pg_ctl", "postgres"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		require.NoError(t, err)
		require.NotZero(t, fi.Mode().Perm()&0o111, "%s is not executable", name)
	}
}

func TestNewestDebianBinDir(t *testing.T) {
	root := t.TempDir()
	mk := func(version string, programs ...string) string {
		bin := filepath.Join(root, version, "bin")
		require.NoError(t, os.MkdirAll(bin, 0o755))
		for _, p := range programs {
			require.NoError(t, os.WriteFile(filepath.Join(bin, p), nil, 0o755))
		}
		return bin
	}
	require.Empty(t, newestDebianBinDir(root))
	mk("9.6", serverPrograms...)
	want := mk("15", serverPrograms...)
	mk("16", "pg_ctl") // incomplete: skipped
	mk("notaversion", serverPrograms...)
	require.Equal(t, want, newestDebianBinDir(root))
}

func TestErrNoBinariesMessage(t *testing.T) {
	msg := ErrNoBinaries.Error()
	require.NotContains(t, msg, "\n")
	require.Contains(t, msg, "apt-get install postgresql")
	require.Contains(t, msg, "brew install postgresql")
	require.Contains(t, msg, "DATABASE_URL")
}

func TestSocketDirFor(t *testing.T) {
	short := "/var/lib/aether"
	dir, inDataDir, err := socketDirFor(short, "/tmp")
	require.NoError(t, err)
	require.True(t, inDataDir)
	require.Equal(t, "/var/lib/aether/run", dir)

	long := "/" + strings.Repeat("x", 120)
	dir, inDataDir, err = socketDirFor(long, "/tmp")
	require.NoError(t, err)
	require.False(t, inDataDir)
	require.True(t, strings.HasPrefix(dir, "/tmp/aether-pg-"), dir)
	require.LessOrEqual(t, len(filepath.Join(dir, socketFileName)), maxSocketPathLen)

	// Deterministic per data dir, distinct across data dirs.
	again, _, err := socketDirFor(long, "/tmp")
	require.NoError(t, err)
	require.Equal(t, dir, again)
	other, _, err := socketDirFor(long+"y", "/tmp")
	require.NoError(t, err)
	require.NotEqual(t, dir, other)

	// Exactly at the limit stays in the data dir; one byte more moves out.
	edge := "/" + strings.Repeat("e", maxSocketPathLen-len("/run/"+socketFileName)-1)
	dir, inDataDir, err = socketDirFor(edge, "/tmp")
	require.NoError(t, err)
	require.True(t, inDataDir)
	require.Len(t, filepath.Join(dir, socketFileName), maxSocketPathLen)
	_, inDataDir, err = socketDirFor(edge+"e", "/tmp")
	require.NoError(t, err)
	require.False(t, inDataDir)

	// A comma in the data dir moves the socket out too.
	_, inDataDir, err = socketDirFor("/srv/a,b", "/tmp")
	require.NoError(t, err)
	require.False(t, inDataDir)

	// A too-long temp dir falls back to /tmp.
	dir, _, err = socketDirFor(long, "/"+strings.Repeat("t", 100))
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(dir, "/tmp/aether-pg-"), dir)
}

func TestConnURL(t *testing.T) {
	u := connURL("/tmp/a dir+&=?%x", "my db")
	require.True(t, strings.HasPrefix(u, "postgres://postgres@/my%20db?host=%2Ftmp%2Fa%20dir"), u)
	cfg, err := pgxpool.ParseConfig(u)
	require.NoError(t, err)
	require.Equal(t, "/tmp/a dir+&=?%x", cfg.ConnConfig.Host)
	require.Equal(t, uint16(5432), cfg.ConnConfig.Port)
	require.Equal(t, "postgres", cfg.ConnConfig.User)
	require.Equal(t, "my db", cfg.ConnConfig.Database)
	require.Nil(t, cfg.ConnConfig.TLSConfig)
}

func TestServerOptions(t *testing.T) {
	require.Equal(t,
		`-c 'listen_addresses=' -c 'port=5432' -c 'unix_socket_directories="/tmp/it'\''s ""q"""'`,
		serverOptions(`/tmp/it's "q"`))
}

func TestClusterSurvivesRestart(t *testing.T) {
	skipWithoutBinaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	dir := clusterDir(t)

	c := startCluster(t, ctx, dir)
	require.True(t, strings.HasPrefix(c.URL(), "postgres://postgres@/aether?"), c.URL())
	fi, err := os.Stat(dir)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), fi.Mode().Perm())

	conn, err := pgx.Connect(ctx, c.URL())
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "CREATE TABLE notes (id int PRIMARY KEY, body text NOT NULL)")
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "INSERT INTO notes VALUES (1, 'kept across restarts')")
	require.NoError(t, err)
	var db string
	require.NoError(t, conn.QueryRow(ctx, "SELECT current_database()").Scan(&db))
	require.Equal(t, "aether", db)
	require.NoError(t, conn.Close(ctx))

	// A second Start while the server runs (as after a crash of the process
	// that started it) reuses the running server.
	c2, err := Start(ctx, Options{DataDir: dir})
	require.NoError(t, err)
	require.Equal(t, c.URL(), c2.URL())

	require.NoError(t, c.Stop(ctx))
	require.NoError(t, c.Stop(ctx), "Stop is idempotent")
	require.NoError(t, c2.Stop(ctx), "Stop of an already stopped server succeeds")
	_, err = pgx.Connect(ctx, c.URL())
	require.Error(t, err, "server still answers after Stop")

	c = startCluster(t, ctx, dir)
	conn, err = pgx.Connect(ctx, c.URL())
	require.NoError(t, err)
	defer conn.Close(ctx)
	var body string
	require.NoError(t, conn.QueryRow(ctx, "SELECT body FROM notes WHERE id = 1").Scan(&body))
	require.Equal(t, "kept across restarts", body)

	// Other databases on the same cluster.
	_, err = conn.Exec(ctx, "CREATE DATABASE other")
	require.NoError(t, err)
	other, err := pgx.Connect(ctx, c.URLFor("other"))
	require.NoError(t, err)
	require.NoError(t, other.QueryRow(ctx, "SELECT current_database()").Scan(&db))
	require.Equal(t, "other", db)
	require.NoError(t, other.Close(ctx))

	require.NoError(t, conn.Close(ctx))
	require.NoError(t, c.Stop(ctx))
}

func TestLongDataDirUsesShortSocketDir(t *testing.T) {
	skipWithoutBinaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	dir := filepath.Join(clusterDir(t), strings.Repeat("d", 60), strings.Repeat("e", 40))

	c, err := Start(ctx, Options{DataDir: dir, Database: "long"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	require.False(t, strings.HasPrefix(c.SocketDir(), dir), c.SocketDir())
	fi, err := os.Stat(c.SocketDir())
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), fi.Mode().Perm())

	conn, err := pgx.Connect(ctx, c.URL())
	require.NoError(t, err)
	var db string
	require.NoError(t, conn.QueryRow(ctx, "SELECT current_database()").Scan(&db))
	require.Equal(t, "long", db)
	require.NoError(t, conn.Close(ctx))

	require.NoError(t, c.Stop(ctx))
	_, err = os.Stat(c.SocketDir())
	require.ErrorIs(t, err, os.ErrNotExist, "empty socket dir in the temp dir is removed on Stop")
}

func TestStartAfterCrash(t *testing.T) {
	skipWithoutBinaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	dir := clusterDir(t)

	c := startCluster(t, ctx, dir)
	pidFile := filepath.Join(dir, "data", "postmaster.pid")
	data, err := os.ReadFile(pidFile)
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.SplitN(string(data), "\n", 2)[0])
	require.NoError(t, err)
	proc, err := os.FindProcess(pid)
	require.NoError(t, err)
	require.NoError(t, proc.Signal(syscall.SIGKILL))
	require.Eventually(t, func() bool { return proc.Signal(syscall.Signal(0)) != nil }, 10*time.Second, 20*time.Millisecond)
	_, err = os.Stat(pidFile)
	require.NoError(t, err, "a crashed postmaster leaves its pid file behind")

	c2 := startCluster(t, ctx, dir)
	conn, err := pgx.Connect(ctx, c2.URL())
	require.NoError(t, err)
	require.NoError(t, conn.Ping(ctx))
	require.NoError(t, conn.Close(ctx))
	require.NoError(t, c2.Stop(ctx))
	require.NoError(t, c.Stop(ctx))
}

func TestStartFailureQuotesServerLog(t *testing.T) {
	skipWithoutBinaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	dir := clusterDir(t)

	c := startCluster(t, ctx, dir)
	require.NoError(t, c.Stop(ctx))
	conf := filepath.Join(dir, "data", "postgresql.conf")
	f, err := os.OpenFile(conf, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString("\nnot_a_real_setting_xyz = 1\n")
	require.NoError(t, err)
	require.NoError(t, f.Close())

	_, err = Start(ctx, Options{DataDir: dir})
	require.Error(t, err)
	require.Contains(t, err.Error(), "last lines of "+filepath.Join(dir, "postgres.log"))
	require.Contains(t, err.Error(), "not_a_real_setting_xyz")
}
