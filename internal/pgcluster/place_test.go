//go:build unix

package pgcluster

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// nobody is the uid of a user other than root and the server's user, used
// to plant folders that belong to someone else.
const nobody = 65534

func TestPrivateDirs(t *testing.T) {
	a := privateDirs("/root/project/.aether/postgres", "/var/lib/aether-pg", "/tmp")
	require.Len(t, a, 2)
	require.True(t, strings.HasPrefix(a[0], "/var/lib/aether-pg/"), a[0])
	require.True(t, strings.HasPrefix(a[1], "/tmp/aether-pgcluster-"), a[1])
	require.Equal(t, filepath.Base(a[0]), strings.TrimPrefix(filepath.Base(a[1]), "aether-pgcluster-"),
		"both candidates carry the same hash")

	// Stable for one data dir, distinct across data dirs.
	require.Equal(t, a, privateDirs("/root/project/.aether/postgres", "/var/lib/aether-pg", "/tmp"))
	b := privateDirs("/root/other/.aether/postgres", "/var/lib/aether-pg", "/tmp")
	require.NotEqual(t, a[0], b[0])
	require.NotEqual(t, a[1], b[1])

	// Short enough for the socket to stay inside the folder.
	for _, d := range a {
		require.True(t, usableSocketDir(filepath.Join(d, "run")), d)
	}

	// Relative or empty roots are left out.
	require.Equal(t, []string{a[1]}, privateDirs("/root/project/.aether/postgres", "", "/tmp"))
	require.Empty(t, privateDirs("/root/project/.aether/postgres", "rel", ""))
}

func TestEnsurePrivateDir(t *testing.T) {
	base := t.TempDir()

	// A new folder is made with mode 0700.
	fresh := filepath.Join(base, "fresh")
	require.NoError(t, ensurePrivateDir(fresh, nil))
	fi, err := os.Lstat(fresh)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), fi.Mode().Perm())

	// An existing folder of ours, readable by others, is tightened.
	readable := filepath.Join(base, "readable")
	require.NoError(t, os.Mkdir(readable, 0o755))
	require.NoError(t, os.Chmod(readable, 0o755))
	require.NoError(t, ensurePrivateDir(readable, nil))
	fi, err = os.Lstat(readable)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), fi.Mode().Perm())

	// One writable by others is refused and left alone: someone else
	// may have put something in it.
	writable := filepath.Join(base, "writable")
	require.NoError(t, os.Mkdir(writable, 0o777))
	require.NoError(t, os.Chmod(writable, 0o777))
	err = ensurePrivateDir(writable, nil)
	require.ErrorContains(t, err, "writable by other users")
	fi, err = os.Lstat(writable)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o777), fi.Mode().Perm())

	// A symbolic link, even to a private folder, is refused.
	link := filepath.Join(base, "link")
	require.NoError(t, os.Symlink(fresh, link))
	require.ErrorContains(t, ensurePrivateDir(link, nil), "not a folder")

	// So is a folder of another user.
	if os.Geteuid() != 0 {
		t.Log("not root: cannot make a folder belonging to another user")
		return
	}
	foreign := filepath.Join(base, "foreign")
	require.NoError(t, os.Mkdir(foreign, 0o700))
	require.NoError(t, os.Chown(foreign, nobody, nobody))
	require.ErrorContains(t, ensurePrivateDir(foreign, nil), "belongs to uid 65534")
}

func TestCheckBase(t *testing.T) {
	base := t.TempDir()
	require.NoError(t, checkBase(base))

	open := filepath.Join(base, "open")
	require.NoError(t, os.Mkdir(open, 0o777))
	require.NoError(t, os.Chmod(open, 0o777))
	require.ErrorContains(t, checkBase(open), "not sticky")

	require.NoError(t, os.Chmod(open, 0o777|os.ModeSticky))
	require.NoError(t, checkBase(open), "a sticky folder such as /tmp is fine")

	if os.Geteuid() != 0 {
		t.Log("not root: cannot make a folder belonging to another user")
		return
	}
	require.NoError(t, os.Chown(open, nobody, nobody))
	require.ErrorContains(t, checkBase(open), "belongs to uid 65534")
}

// placement is the setting of a test of where Start puts a cluster when
// run as root: open is a folder every user can reach, with privateRoot
// pointed into it and tempRoot to an unusable value, and locked, inside
// open, is a folder of mode 0700 that the server's user cannot enter.
type placement struct {
	open, locked, root string
}

// newPlacement skips the test unless it runs as root with the PostgreSQL
// binaries installed, and sets up a placement.
func newPlacement(t *testing.T) placement {
	t.Helper()
	skipWithoutBinaries(t)
	if os.Geteuid() != 0 {
		t.Skip("the cluster moves to a private folder only when the process is root (the server then runs as another user); run the tests as root to cover it")
	}
	p := placement{open: filepath.Dir(clusterDir(t))}
	p.locked = filepath.Join(p.open, "locked")
	require.NoError(t, os.Mkdir(p.locked, 0o700))
	p.root = filepath.Join(p.open, "varlib")
	setRoots(t, p.root, "")
	return p
}

// setRoots points privateRoot and tempRoot at root and temp for the test.
func setRoots(t *testing.T, root, temp string) {
	t.Helper()
	oldRoot, oldTemp := privateRoot, tempRoot
	privateRoot, tempRoot = root, func() string { return temp }
	t.Cleanup(func() { privateRoot, tempRoot = oldRoot, oldTemp })
}

// requirePrivate checks that dir is a folder of mode 0700 owned by the
// server's account of c, and names dataDir in its data-dir file.
func requirePrivate(t *testing.T, c *Cluster, dir, dataDir string) {
	t.Helper()
	fi, err := os.Lstat(dir)
	require.NoError(t, err)
	require.True(t, fi.IsDir())
	require.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
	require.NotNil(t, c.acct)
	require.Equal(t, c.acct.uid, fi.Sys().(*syscall.Stat_t).Uid, "owner of %s", dir)
	owner, err := os.ReadFile(filepath.Join(dir, ownerFile))
	require.NoError(t, err)
	require.Equal(t, dataDir+"\n", string(owner))
}

func TestStartPlacesClusterWhereTheServerUserCanReachIt(t *testing.T) {
	p := newPlacement(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := filepath.Join(p.locked, "one", "pg")

	c := startCluster(t, ctx, dir)
	home := c.Dir()
	require.Equal(t, privateDirs(dir, p.root, "")[0], home)
	requirePrivate(t, c, home, dir)
	// The socket goes with the cluster unless that path is too long (as
	// the test's temporary folder makes it).
	wantSocket, _, err := socketDirFor(home, os.TempDir())
	require.NoError(t, err)
	require.Equal(t, wantSocket, c.SocketDir())
	_, err = os.Stat(filepath.Join(home, "data", "PG_VERSION"))
	require.NoError(t, err)
	_, err = os.Lstat(filepath.Join(dir, "data"))
	require.ErrorIs(t, err, os.ErrNotExist, "no cluster in the unreachable data dir")
	marker, err := os.ReadFile(filepath.Join(dir, locationFile))
	require.NoError(t, err)
	require.Equal(t, home+"\n", string(marker))

	conn, err := pgx.Connect(ctx, c.URL())
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "CREATE TABLE notes (body text NOT NULL); INSERT INTO notes VALUES ('placed')")
	require.NoError(t, err)
	require.NoError(t, conn.Close(ctx))
	require.NoError(t, c.Stop(ctx))

	// The same data dir, also named through a symbolic link, maps to the
	// same folder and finds its data again. The cluster-location file is
	// only a note: the folder is found without it, and it is written anew.
	require.NoError(t, os.Remove(filepath.Join(dir, locationFile)))
	alias := filepath.Join(p.open, "alias")
	require.NoError(t, os.Symlink(filepath.Join(p.locked, "one"), alias))
	c = startCluster(t, ctx, filepath.Join(alias, "pg"))
	require.Equal(t, home, c.Dir())
	conn, err = pgx.Connect(ctx, c.URL())
	require.NoError(t, err)
	var body string
	require.NoError(t, conn.QueryRow(ctx, "SELECT body FROM notes").Scan(&body))
	require.Equal(t, "placed", body)
	require.NoError(t, conn.Close(ctx))
	require.NoError(t, c.Stop(ctx))
	marker, err = os.ReadFile(filepath.Join(dir, locationFile))
	require.NoError(t, err)
	require.Equal(t, home+"\n", string(marker))

	// Another data dir gets another folder.
	other := startCluster(t, ctx, filepath.Join(p.locked, "two", "pg"))
	require.NotEqual(t, home, other.Dir())
	require.Equal(t, p.root, filepath.Dir(other.Dir()))
	requirePrivate(t, other, other.Dir(), filepath.Join(p.locked, "two", "pg"))
	require.NoError(t, other.Stop(ctx))

	// Once the data dir becomes reachable, the cluster stays where its
	// data is.
	require.NoError(t, os.Chmod(p.locked, 0o755))
	c = startCluster(t, ctx, dir)
	require.Equal(t, home, c.Dir())
	require.NoError(t, c.Stop(ctx))
	_, err = os.Lstat(filepath.Join(dir, "data"))
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestStartFallsBackToTempDir(t *testing.T) {
	p := newPlacement(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// privateRoot cannot be made (its parent is a file); the temporary
	// folder is used instead.
	blocked := filepath.Join(p.open, "file")
	require.NoError(t, os.WriteFile(blocked, nil, 0o644))
	temp := filepath.Join(p.open, "tmp")
	require.NoError(t, os.Mkdir(temp, 0o755))
	setRoots(t, filepath.Join(blocked, "aether-pg"), temp)
	dir := filepath.Join(p.locked, "pg")

	c := startCluster(t, ctx, dir)
	require.Equal(t, privateDirs(dir, "", temp)[0], c.Dir())
	require.True(t, strings.HasPrefix(filepath.Base(c.Dir()), "aether-pgcluster-"), c.Dir())
	requirePrivate(t, c, c.Dir(), dir)
	require.NoError(t, c.Stop(ctx))
}

func TestStartRefusesForeignPrivateFolder(t *testing.T) {
	p := newPlacement(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := filepath.Join(p.locked, "pg")
	want := privateDirs(dir, p.root, "")[0]
	require.NoError(t, os.MkdirAll(p.root, 0o755))

	plant := func(mode os.FileMode, uid int, owner string) {
		t.Helper()
		require.NoError(t, os.RemoveAll(want))
		require.NoError(t, os.Mkdir(want, mode))
		require.NoError(t, os.Chmod(want, mode))
		if owner != "" {
			require.NoError(t, os.WriteFile(filepath.Join(want, ownerFile), []byte(owner+"\n"), 0o600))
		}
		require.NoError(t, os.Chown(want, uid, uid))
	}
	for _, tc := range []struct {
		name  string
		mode  os.FileMode
		uid   int
		owner string
		want  string
	}{
		{"another user's", 0o700, nobody, "", "belongs to uid 65534"},
		{"writable by others", 0o777, 0, "", "writable by other users"},
		{"another data dir's", 0o700, 0, "/elsewhere/pg", "made for the data dir /elsewhere/pg"},
	} {
		plant(tc.mode, tc.uid, tc.owner)
		_, err := Start(ctx, Options{DataDir: dir})
		require.Error(t, err, tc.name)
		require.ErrorContains(t, err, tc.want, tc.name)
		require.ErrorContains(t, err, "no private folder for the cluster could be made", tc.name)
		require.ErrorContains(t, err, "cannot enter "+p.locked+",", tc.name)
		fi, err := os.Lstat(want)
		require.NoError(t, err)
		require.Equal(t, uint32(tc.uid), fi.Sys().(*syscall.Stat_t).Uid, "%s: left as found", tc.name)
		require.Equal(t, tc.mode, fi.Mode().Perm(), "%s: left as found", tc.name)
		_, err = os.Lstat(filepath.Join(want, "data"))
		require.ErrorIs(t, err, os.ErrNotExist, "%s: no cluster made in it", tc.name)
	}
}

func TestStartKeepsClusterInDataDir(t *testing.T) {
	p := newPlacement(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := filepath.Join(p.locked, "pg")

	// Made while the data dir was reachable: it lives in the data dir.
	require.NoError(t, os.Chmod(p.locked, 0o755))
	c := startCluster(t, ctx, dir)
	require.Equal(t, dir, c.Dir())
	require.NoError(t, c.Stop(ctx))

	// Unreachable now: the cluster is not silently replaced by an empty
	// one elsewhere.
	require.NoError(t, os.Chmod(p.locked, 0o700))
	_, err := Start(ctx, Options{DataDir: dir})
	require.Error(t, err)
	require.ErrorContains(t, err, "cannot enter "+p.locked+",")
	require.ErrorContains(t, err, "chmod o+x "+p.locked)
	_, err = os.Lstat(p.root)
	require.ErrorIs(t, err, os.ErrNotExist, "no private folder made")

	// Reachable again: the same cluster.
	require.NoError(t, os.Chmod(p.locked, 0o755))
	c = startCluster(t, ctx, dir)
	require.Equal(t, dir, c.Dir())
	require.NoError(t, c.Stop(ctx))
}
