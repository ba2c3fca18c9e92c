// Package pgcluster runs a private PostgreSQL cluster from the PostgreSQL
// server binaries installed on the machine.
//
// It exists so that `aether serve` works without any database configuration
// (it is used when DATABASE_URL is unset) and so that the test suite can run
// on machines where no database server is reachable. The cluster lives
// inside a caller-chosen directory (or, when the process is root and the
// unprivileged user the server runs as cannot reach that directory, in a
// private folder chosen for it; see Start), accepts connections only on a
// Unix-domain socket (it never listens on TCP, so it cannot clash with a
// system server on port 5432), and trusts every local connection as the
// superuser "postgres". It is meant for development and tests, not for
// production deployments.
//
// A cluster directory has the following layout:
//
//	<DataDir>/data          the PostgreSQL data directory (PGDATA)
//	<DataDir>/postgres.log  the server log, appended to on every start
//	<DataDir>/run           the socket directory, unless its path is too
//	                        long for a Unix socket (see Start)
//
// When the cluster lives in a private folder instead, that folder has the
// data, postgres.log and run entries, and DataDir keeps the lock file and
// the file cluster-location naming the folder.
//
// Data survives restarts: starting a cluster on a directory that already
// holds one reuses the existing data.
package pgcluster

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ErrNoBinaries is returned, wrapped, by FindBinaries and Start when no
// folder holding the PostgreSQL server binaries initdb, pg_ctl and postgres
// can be found. Test for it with errors.Is.
var ErrNoBinaries = errors.New("the PostgreSQL server programs initdb, pg_ctl and postgres " +
	"were not found on PATH, in the folder reported by `pg_config --bindir`, or in " +
	"/usr/lib/postgresql/<version>/bin; install the PostgreSQL server (for example " +
	"`apt-get install postgresql` on Debian or Ubuntu, `dnf install postgresql-server` " +
	"on Fedora or RHEL, or `brew install postgresql` on macOS), or set DATABASE_URL " +
	"to the connection URL of an existing PostgreSQL server")

// DefaultDatabase is the database Start creates when Options.Database is
// empty.
const DefaultDatabase = "aether"

const (
	// port is the port number in the socket file name. The cluster does
	// not listen on TCP, so the number only names the socket file.
	port = 5432

	// maxSocketPathLen is the longest socket file path (directory plus
	// "/.s.PGSQL.5432") Start accepts. The kernel limit is 107 bytes
	// (sizeof(sun_path) minus the terminating NUL); the margin keeps clear
	// of platforms with a smaller limit.
	maxSocketPathLen = 100

	// socketFileName is the name of the server's socket file.
	socketFileName = ".s.PGSQL.5432"

	// startTimeoutSeconds is the pg_ctl -t value for start and stop.
	startTimeoutSeconds = 60

	// logTailLines is how many lines of postgres.log are quoted in the
	// error when the server fails to start.
	logTailLines = 20
)

// debianRoot is the folder holding Debian's versioned PostgreSQL
// installations, /usr/lib/postgresql/<version>/bin. It is a variable so
// tests can point it elsewhere.
var debianRoot = "/usr/lib/postgresql"

// serverPrograms are the programs a binary folder must hold.
var serverPrograms = []string{"initdb", "pg_ctl", "postgres"}

// FindBinaries returns the folder holding the PostgreSQL server programs
// initdb, pg_ctl and postgres. It looks, in order:
//
//   - in the folder on PATH that holds pg_ctl, which must also hold initdb
//     and postgres (symbolic links are fine);
//   - in the folder printed by `pg_config --bindir`;
//   - in the newest versioned Debian folder /usr/lib/postgresql/<N>/bin,
//     comparing version numbers numerically.
//
// When none of these holds all three programs, FindBinaries returns an error
// wrapping ErrNoBinaries.
func FindBinaries() (dir string, err error) {
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		if d := filepath.Dir(p); hasServerPrograms(d) {
			return d, nil
		}
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		if d := strings.TrimSpace(string(out)); d != "" && hasServerPrograms(d) {
			return d, nil
		}
	}
	if d := newestDebianBinDir(debianRoot); d != "" {
		return d, nil
	}
	return "", fmt.Errorf("locating PostgreSQL: %w", ErrNoBinaries)
}

// hasServerPrograms reports whether dir holds executable initdb, pg_ctl and
// postgres files, following symbolic links.
func hasServerPrograms(dir string) bool {
	for _, name := range serverPrograms {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
			return false
		}
	}
	return true
}

// newestDebianBinDir returns root/<N>/bin for the highest version N whose
// bin folder holds the server programs, or "" when there is none. Versions
// are dotted numbers ("9.6", "15") compared numerically; other names are
// ignored.
func newestDebianBinDir(root string) string {
	matches, _ := filepath.Glob(filepath.Join(root, "*", "bin"))
	var best string
	var bestVer []int
	for _, m := range matches {
		ver, ok := parseVersion(filepath.Base(filepath.Dir(m)))
		if !ok || !hasServerPrograms(m) {
			continue
		}
		if best == "" || compareVersions(ver, bestVer) > 0 {
			best, bestVer = m, ver
		}
	}
	return best
}

// parseVersion parses a dotted version number such as "15" or "9.6".
func parseVersion(s string) ([]int, bool) {
	var ver []int
	for part := range strings.SplitSeq(s, ".") {
		n, err := strconv.Atoi(part)
		if err != nil || n < 0 {
			return nil, false
		}
		ver = append(ver, n)
	}
	return ver, true
}

// compareVersions compares two dotted version numbers, returning -1, 0 or
// +1. Missing components count as zero.
func compareVersions(a, b []int) int {
	for i := range max(len(a), len(b)) {
		var x, y int
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if x != y {
			if x < y {
				return -1
			}
			return 1
		}
	}
	return 0
}

// Options configures Start.
type Options struct {
	// DataDir is the folder the cluster lives in. It is required, and is
	// created (mode 0700, with missing parents mode 0755) if missing. A
	// relative path is resolved against the working directory. It must
	// not contain the characters " $ ` \ or a newline, which pg_ctl
	// cannot quote. When the process is root and the server's user cannot
	// reach DataDir, the cluster lives in a private folder instead (see
	// Start and Cluster.Dir).
	DataDir string

	// Database is the database Start creates if it does not exist yet and
	// the one URL connects to. It defaults to DefaultDatabase ("aether").
	Database string

	// Logger receives progress messages (initializing, starting,
	// stopping). It is optional; when nil nothing is logged.
	Logger *slog.Logger
}

// Cluster is a running private PostgreSQL cluster started by Start. Its
// methods are safe for concurrent use.
type Cluster struct {
	dir       string // absolute Options.DataDir: holds the lock file
	home      string // where the cluster lives: dir, or a private folder (see place)
	pgdata    string // home/data
	logFile   string // home/postgres.log
	socketDir string
	binDir    string
	database  string
	log       *slog.Logger
	acct      *account // the account the server runs as; nil means the current one

	mu      sync.Mutex
	stopped bool
	// joined is true when Start found the server already running.
	joined bool
}

// Start starts the PostgreSQL cluster that lives in opts.DataDir, creating
// it first if needed, and returns once it accepts connections and the
// database opts.Database exists.
//
// On first use Start runs initdb (superuser "postgres", trust
// authentication, UTF8 encoding, C locale). The server is started with
// pg_ctl and listens only on a Unix socket in <DataDir>/run (or the run
// folder of the private folder described below); when that path would make
// the socket file path longer than 100 bytes, the socket goes in a private
// folder under os.TempDir() named after a hash of the cluster's folder
// instead. If a server started earlier on the same DataDir is still
// running (for example after the starting process crashed), Start reuses it
// rather than failing; Stop then stops it. Concurrent Starts on the same
// DataDir, even from different processes, are serialised and share one
// server, so stopping any of the returned clusters stops it for all.
//
// PostgreSQL refuses to run as root. When the current process is root,
// Start runs the server as the system user "postgres" if it exists, or
// else as the system user "aether-pg", which it creates with useradd, and
// gives that user ownership of the cluster's folder and the socket folder.
// When that user cannot reach DataDir, because a parent folder (for
// example /root, mode 0700) is not searchable by it, and DataDir holds no
// cluster yet, the cluster goes in a private folder that the user can
// reach instead: /var/lib/aether-pg/<hash>, or, when that cannot be used,
// <os.TempDir()>/aether-pgcluster-<hash>, where <hash> is derived from the
// absolute DataDir with symbolic links resolved. The same DataDir thus
// always maps to the same folder, and different ones to different folders.
// The folder has mode 0700 and belongs to the server's user; an existing
// folder at that path that belongs to another user, is writable by group
// or others, or was made for another DataDir is refused. Start logs the
// chosen folder, writes its path into DataDir/cluster-location, and keeps
// using it on later starts, even once DataDir becomes reachable. A cluster
// already in DataDir is always used where it is; when the user cannot
// reach it, Start fails with an error naming the blocking folder. The
// private folder is never removed by Start or Stop.
//
// When pg_ctl fails to start the server, the error quotes the last lines of
// postgres.log in the cluster's folder. When no PostgreSQL installation is found, the
// error wraps ErrNoBinaries.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.DataDir == "" {
		return nil, errors.New("starting postgres: Options.DataDir is empty")
	}
	dir, err := filepath.Abs(opts.DataDir)
	if err != nil {
		return nil, fmt.Errorf("starting postgres: resolving data dir: %w", err)
	}
	// pg_ctl pastes the data directory and log file paths, in double
	// quotes, into a /bin/sh command line; refuse characters that would
	// break out of those quotes.
	if strings.ContainsAny(dir, "\"$`\\\n") {
		return nil, fmt.Errorf("starting postgres: data dir %q contains a character pg_ctl cannot quote (one of \" $ ` \\ or newline)", dir)
	}
	binDir, err := FindBinaries()
	if err != nil {
		return nil, fmt.Errorf("starting postgres: %w", err)
	}
	c := &Cluster{
		dir:      dir,
		binDir:   binDir,
		database: opts.Database,
		log:      opts.Logger,
	}
	if c.database == "" {
		c.database = DefaultDatabase
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	c.log = c.log.With("component", "pgcluster")

	if err := c.start(ctx); err != nil {
		c.removeTempSocketDir()
		return nil, fmt.Errorf("starting postgres in %s: %w", dir, err)
	}
	return c, nil
}

// start does the work of Start.
func (c *Cluster) start(ctx context.Context) error {
	// Missing parent folders are created searchable by all, so that the
	// account the server runs as can reach the data dir.
	if err := os.MkdirAll(filepath.Dir(c.dir), 0o755); err != nil {
		return fmt.Errorf("creating parent of data dir: %w", err)
	}
	if err := os.Mkdir(c.dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("creating data dir: %w", err)
	}
	if err := os.Chmod(c.dir, 0o700); err != nil {
		return fmt.Errorf("setting data dir mode: %w", err)
	}
	// Serialise concurrent Starts on the same directory (for example
	// several test binaries sharing one cluster), so that only one of
	// them runs initdb or pg_ctl start and the others reuse its server.
	unlock, err := lockFile(ctx, filepath.Join(c.dir, ".pgcluster.lock"))
	if err != nil {
		return fmt.Errorf("locking data dir: %w", err)
	}
	defer unlock()

	acct, err := serviceAccount(ctx, c.log)
	if err != nil {
		return err
	}
	c.acct = acct

	home, err := c.place(ctx)
	if err != nil {
		return err
	}
	c.home = home
	c.pgdata = filepath.Join(home, "data")
	c.logFile = filepath.Join(home, "postgres.log")

	socketDir, inDataDir, err := socketDirFor(home, os.TempDir())
	if err != nil {
		return err
	}
	c.socketDir = socketDir
	if inDataDir {
		if err := os.MkdirAll(socketDir, 0o700); err != nil {
			return fmt.Errorf("creating socket dir: %w", err)
		}
	} else {
		if err := ensurePrivateDir(socketDir, acct); err != nil {
			return fmt.Errorf("creating socket dir: %w", err)
		}
	}
	if acct != nil {
		if err := chownTree(home, acct); err != nil {
			return fmt.Errorf("giving %s ownership of the data dir: %w", acct.name, err)
		}
		if err := chownTree(socketDir, acct); err != nil {
			return fmt.Errorf("giving %s ownership of the socket dir: %w", acct.name, err)
		}
		if err := c.checkReachable(ctx, home); err != nil {
			return err
		}
		if err := c.checkReachable(ctx, socketDir); err != nil {
			return err
		}
	}

	if err := c.initdb(ctx); err != nil {
		return err
	}
	if err := os.Chmod(c.pgdata, 0o700); err != nil {
		return fmt.Errorf("setting data dir mode: %w", err)
	}

	started := false
	running, err := c.reusable(ctx)
	if err != nil {
		return err
	}
	if running {
		c.joined = true
		c.log.InfoContext(ctx, "reusing running postgres server", "data_dir", c.pgdata, "socket_dir", c.socketDir)
	} else {
		if err := c.pgctlStart(ctx); err != nil {
			return err
		}
		started = true
	}

	if err := c.ensureDatabase(ctx); err != nil {
		if started {
			stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), startTimeoutSeconds*time.Second)
			defer cancel()
			_ = c.stop(stopCtx)
		}
		return err
	}
	return nil
}

// socketDirFor returns the folder the socket of the cluster in the absolute
// path dataDir goes in: dataDir/run when the socket file path fits in
// maxSocketPathLen bytes, else tempDir/aether-pg-<hash of dataDir>, else
// /tmp/aether-pg-<hash of dataDir>. inDataDir reports whether the first
// choice was taken. It fails when no choice is usable.
func socketDirFor(dataDir, tempDir string) (dir string, inDataDir bool, err error) {
	dir = filepath.Join(dataDir, "run")
	if usableSocketDir(dir) {
		return dir, true, nil
	}
	sum := sha256.Sum256([]byte(dataDir))
	name := "aether-pg-" + hex.EncodeToString(sum[:8])
	for _, base := range []string{tempDir, "/tmp"} {
		if base == "" || !filepath.IsAbs(base) {
			continue
		}
		if d := filepath.Join(base, name); usableSocketDir(d) {
			return d, false, nil
		}
	}
	return "", false, fmt.Errorf("no usable socket dir: %s/%s is longer than %d bytes (or contains a comma), and so is the fallback under %s", dir, socketFileName, maxSocketPathLen, tempDir)
}

// usableSocketDir reports whether a socket in dir has a path of at most
// maxSocketPathLen bytes and dir contains no comma (connection strings
// split host lists on commas, so such a folder cannot be named in one).
func usableSocketDir(dir string) bool {
	return len(filepath.Join(dir, socketFileName)) <= maxSocketPathLen && !strings.Contains(dir, ",")
}

// checkReachable fails, with an error naming the blocking folder, when the
// account the server runs as cannot search (traverse) every folder from
// the root down to and including target.
func (c *Cluster) checkReachable(ctx context.Context, target string) error {
	blocker, err := c.blocker(ctx, target)
	if err != nil {
		return err
	}
	if blocker != "" {
		return fmt.Errorf("%s; make %s searchable by other users (chmod o+x %s)",
			c.cannotReach(blocker, target), blocker, blocker)
	}
	return nil
}

// cannotReach describes why the server cannot reach target: its account
// cannot enter blocker.
func (c *Cluster) cannotReach(blocker, target string) string {
	return fmt.Sprintf("PostgreSQL runs as the unprivileged user %s (it refuses to run as root), "+
		"which cannot enter %s, so it cannot reach %s", c.acct.name, blocker, target)
}

// blocker returns the first folder, from the root down to and including
// target (with symbolic links resolved), that the account the server runs
// as cannot search (traverse), or "" when it can search them all.
func (c *Cluster) blocker(ctx context.Context, target string) (string, error) {
	resolved, err := filepath.EvalSymlinks(target)
	if err != nil {
		return "", fmt.Errorf("resolving %s: %w", target, err)
	}
	var chain []string
	for d := resolved; ; d = filepath.Dir(d) {
		chain = append(chain, d)
		if d == filepath.Dir(d) {
			break
		}
	}
	args := []string{"-c", `for d do [ -x "$d" ] || { printf '%s\n' "$d"; exit 1; }; done`, "sh"}
	for i := len(chain) - 1; i >= 0; i-- {
		args = append(args, chain[i])
	}
	cmd := c.command(ctx, "/bin/sh", args...)
	cmd.Dir = "/" // the command's usual folder may be the very one it cannot reach
	out, err := cmd.CombinedOutput()
	if err == nil {
		return "", nil
	}
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != 1 {
		return "", fmt.Errorf("checking that user %s can reach %s: %w: %s", c.acct.name, resolved, err, bytes.TrimSpace(out))
	}
	return strings.TrimSpace(string(out)), nil
}

// initdb creates the data directory unless it already holds a cluster.
// initdb writes into a temporary folder renamed into place on success, so
// an interrupted initdb never leaves a half-made cluster behind.
func (c *Cluster) initdb(ctx context.Context) error {
	if _, err := os.Stat(filepath.Join(c.pgdata, "PG_VERSION")); err == nil {
		return nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("checking for an existing cluster: %w", err)
	}
	if _, err := os.Stat(c.pgdata); err == nil {
		return fmt.Errorf("%s exists but is not a PostgreSQL data directory (it has no PG_VERSION); move it away or remove it", c.pgdata)
	}
	tmp := c.pgdata + ".initdb"
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("removing leftovers of an interrupted initdb: %w", err)
	}
	c.log.InfoContext(ctx, "initializing postgres cluster", "data_dir", c.pgdata, "bin_dir", c.binDir)
	out, err := c.command(ctx, filepath.Join(c.binDir, "initdb"),
		"-D", tmp, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-locale").CombinedOutput()
	if err != nil {
		_ = os.RemoveAll(tmp)
		return fmt.Errorf("initdb: %w\n%s", err, tail(out, logTailLines))
	}
	if err := os.Rename(tmp, c.pgdata); err != nil {
		return fmt.Errorf("moving the new cluster into place: %w", err)
	}
	return nil
}

// reusable reports whether a server is already running on the data
// directory (a postmaster.pid exists and pg_ctl status says the postmaster
// is alive) and accepts connections on the expected socket.
func (c *Cluster) reusable(ctx context.Context) (bool, error) {
	if _, err := os.Stat(filepath.Join(c.pgdata, "postmaster.pid")); err != nil {
		return false, nil
	}
	running, err := c.status(ctx)
	if err != nil || !running {
		// A stale postmaster.pid; pg_ctl start and the postmaster
		// detect that the old postmaster is gone and start afresh.
		return false, nil
	}
	conn, err := c.connect(ctx, "postgres")
	if err != nil {
		return false, fmt.Errorf("a postgres server is already running on %s but does not answer on %s: %w", c.pgdata, c.socketDir, err)
	}
	_ = conn.Close(ctx)
	return true, nil
}

// status reports whether pg_ctl status finds a running server.
func (c *Cluster) status(ctx context.Context) (bool, error) {
	out, err := c.command(ctx, filepath.Join(c.binDir, "pg_ctl"), "-D", c.pgdata, "status").CombinedOutput()
	if err == nil {
		return true, nil
	}
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) && exitErr.ExitCode() == 3 {
		return false, nil
	}
	return false, fmt.Errorf("pg_ctl status: %w: %s", err, bytes.TrimSpace(out))
}

// pgctlStart starts the server with pg_ctl and waits until it accepts
// connections.
func (c *Cluster) pgctlStart(ctx context.Context) error {
	c.log.InfoContext(ctx, "starting postgres server", "data_dir", c.pgdata, "socket_dir", c.socketDir)
	out, err := c.command(ctx, filepath.Join(c.binDir, "pg_ctl"),
		"-D", c.pgdata, "-l", c.logFile, "-w", "-t", strconv.Itoa(startTimeoutSeconds),
		"start", "-o", serverOptions(c.socketDir)).CombinedOutput()
	if err != nil {
		msg := fmt.Sprintf("pg_ctl start: %v", err)
		if s := strings.TrimSpace(string(out)); s != "" {
			msg += "\n" + s
		}
		if lt := logTail(c.logFile, logTailLines); lt != "" {
			msg += "\nlast lines of " + c.logFile + ":\n" + lt
		}
		return errors.New(msg)
	}
	return nil
}

// serverOptions returns the pg_ctl -o value making the server listen only
// on a Unix socket in socketDir. pg_ctl hands the value to /bin/sh, and the
// server splits unix_socket_directories on commas, so the directory is
// double-quoted for the server and single-quoted for the shell.
func serverOptions(socketDir string) string {
	dirs := `"` + strings.ReplaceAll(socketDir, `"`, `""`) + `"`
	return strings.Join([]string{
		"-c", shellQuote("listen_addresses="),
		"-c", shellQuote("port=" + strconv.Itoa(port)),
		"-c", shellQuote("unix_socket_directories=" + dirs),
	}, " ")
}

// shellQuote quotes s as a single /bin/sh word.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// ensureDatabase creates the cluster's database unless it exists.
func (c *Cluster) ensureDatabase(ctx context.Context) error {
	conn, err := c.connect(ctx, "postgres")
	if err != nil {
		return fmt.Errorf("connecting to postgres: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", c.database).Scan(&exists); err != nil {
		return fmt.Errorf("looking up database %q: %w", c.database, err)
	}
	if exists {
		return nil
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{c.database}.Sanitize())
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P04" { // duplicate_database: lost a race
		return nil
	}
	if err != nil {
		return fmt.Errorf("creating database %q: %w", c.database, err)
	}
	c.log.InfoContext(ctx, "created database", "database", c.database)
	return nil
}

// connect opens a connection to database on the cluster.
func (c *Cluster) connect(ctx context.Context, database string) (*pgx.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return pgx.Connect(ctx, c.URLFor(database))
}

// URL returns the connection URL of the database named in Options.Database
// (by default "aether"), in the form
//
//	postgres://postgres@/aether?host=<socket dir>&port=5432&sslmode=disable
//
// which pgx.ParseConfig, pgxpool.ParseConfig and libpq accept. The URL holds
// no password: the cluster trusts local connections.
func (c *Cluster) URL() string {
	return c.URLFor(c.database)
}

// URLFor returns the connection URL of the database named database on the
// cluster, in the same form as URL. The database need not exist.
func (c *Cluster) URLFor(database string) string {
	return connURL(c.socketDir, database)
}

// connURL builds the connection URL of database on the server with its
// socket in socketDir.
func connURL(socketDir, database string) string {
	// libpq-style URL parsing (which pgx follows) percent-decodes query
	// values but does not turn "+" into a space, so spaces must be sent
	// as %20 rather than url.QueryEscape's "+".
	esc := func(s string) string { return strings.ReplaceAll(url.QueryEscape(s), "+", "%20") }
	u := url.URL{
		Scheme: "postgres",
		User:   url.User("postgres"),
		Path:   "/" + database,
		RawQuery: "host=" + esc(socketDir) +
			"&port=" + strconv.Itoa(port) +
			"&sslmode=disable",
	}
	return u.String()
}

// Joined reports whether Start found the server already running (started by
// another process, or left running by one that crashed) rather than
// starting it. A short-lived command that joined a server should leave it
// running for its owner instead of calling Stop.
func (c *Cluster) Joined() bool {
	return c.joined
}

// Dir returns the folder the cluster lives in, holding its data directory
// and server log: Options.DataDir (made absolute), or the private folder
// Start chose because the server's user cannot reach Options.DataDir.
func (c *Cluster) Dir() string {
	return c.home
}

// SocketDir returns the folder holding the cluster's Unix socket.
func (c *Cluster) SocketDir() string {
	return c.socketDir
}

// Stop stops the cluster's server with a fast shutdown (open transactions
// are rolled back, clients disconnected) and waits until it has exited.
// Calling Stop again, or on a cluster whose server is already gone, does
// nothing and returns nil.
func (c *Cluster) Stop(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return nil
	}
	if err := c.stop(ctx); err != nil {
		return fmt.Errorf("stopping postgres in %s: %w", c.dir, err)
	}
	c.stopped = true
	return nil
}

// stop runs pg_ctl stop, treating a server that is not running as stopped,
// and removes a socket folder outside the data directory once it is empty.
func (c *Cluster) stop(ctx context.Context) error {
	c.log.InfoContext(ctx, "stopping postgres server", "data_dir", c.pgdata)
	out, err := c.command(ctx, filepath.Join(c.binDir, "pg_ctl"),
		"-D", c.pgdata, "-m", "fast", "-w", "-t", strconv.Itoa(startTimeoutSeconds), "stop").CombinedOutput()
	if err != nil {
		if running, serr := c.status(ctx); serr != nil || running {
			return fmt.Errorf("pg_ctl stop: %w: %s", err, bytes.TrimSpace(out))
		}
	}
	c.removeTempSocketDir()
	return nil
}

// removeTempSocketDir removes the socket folder if it lies outside the
// cluster's folder and is empty, that is, no server uses it.
func (c *Cluster) removeTempSocketDir() {
	if c.socketDir != "" && !strings.HasPrefix(c.socketDir, c.home+string(filepath.Separator)) {
		_ = os.Remove(c.socketDir) // fails harmlessly unless empty
	}
}

// command returns a command running name as the cluster's account, in the
// cluster's folder (the PostgreSQL programs fail when they cannot read their
// working directory), with PG* environment variables removed so that
// settings such as PGPORT or PGDATA in the caller's environment cannot
// redirect them.
func (c *Cluster) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = c.home
	if cmd.Dir == "" { // not placed yet
		cmd.Dir = "/"
	}
	env := make([]string, 0, len(os.Environ()))
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	cmd.SysProcAttr = c.acct.sysProcAttr()
	// pg_ctl start leaves a postmaster running; it redirects the
	// postmaster's output to the log file, but do not wait forever for
	// the output pipes should a child keep them open.
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// logTail returns the last n lines of the file at path, or "" when it
// cannot be read.
func logTail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	const maxRead = 64 << 10
	if fi, err := f.Stat(); err == nil && fi.Size() > maxRead {
		if _, err := f.Seek(fi.Size()-maxRead, io.SeekStart); err != nil {
			return ""
		}
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return ""
	}
	return tail(data, n)
}

// tail returns the last n lines of data, without a trailing newline.
func tail(data []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
