package main

import (
	"context"
	"errors"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/internal/pgcluster"
)

// placedRE matches the line the embedded cluster logs when it lives outside
// the data dir because the server's user cannot reach the data dir.
var placedRE = regexp.MustCompile(`msg="embedded PostgreSQL cluster at (\S+), because user (\S+) cannot reach (\S+) \(it cannot enter (\S+)\)"`)

// TestFirstRunAsRootInPrivateFolder runs `aether migrate`, `aether serve`
// and `aether seed` as root, with no settings but the listen address, from
// a project folder of mode 0700 that the unprivileged user PostgreSQL runs
// as cannot enter (as /root/project is): the embedded cluster goes in a
// private folder, each command says where and why, every command uses the
// same folder, and the generated secrets stay in the data dir.
func TestFirstRunAsRootInPrivateFolder(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("only root runs the embedded PostgreSQL as another user, which is what may not reach the data dir; run the tests as root to cover it")
	}
	if _, err := pgcluster.FindBinaries(); errors.Is(err, pgcluster.ErrNoBinaries) {
		t.Skip("PostgreSQL server binaries not installed")
	}
	// t.TempDir's folders are mode 0700: open them, so that the project
	// folder is the only one the server's user cannot enter.
	tmp := t.TempDir()
	require.NoError(t, os.Chmod(tmp, 0o755))
	require.NoError(t, os.Chmod(filepath.Dir(tmp), 0o755))
	project := filepath.Join(tmp, "project")
	require.NoError(t, os.Mkdir(project, 0o700))
	dataDir := filepath.Join(project, ".aether")
	clusterHome := filepath.Join(dataDir, "postgres")

	// Registered first, so it runs after the processes are killed: stop
	// the cluster if a killed serve left it running, and remove its
	// private folder.
	t.Cleanup(func() {
		marker, err := os.ReadFile(filepath.Join(clusterHome, "cluster-location"))
		if err != nil {
			return // no private folder was made
		}
		home := strings.TrimSpace(string(marker))
		if _, err := os.Stat(filepath.Join(home, "data", "postmaster.pid")); err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			c, err := pgcluster.Start(ctx, pgcluster.Options{DataDir: clusterHome})
			if err != nil {
				t.Errorf("joining the cluster to stop it: %v", err)
				return
			}
			if err := c.Stop(ctx); err != nil {
				t.Errorf("stopping the cluster: %v", err)
				return
			}
		}
		if err := os.RemoveAll(home); err != nil {
			t.Errorf("removing the cluster's folder: %v", err)
		}
	})

	// placed checks that stderr says the cluster lives in a private folder
	// because the server's user cannot enter the project folder, and
	// returns that folder and the user.
	placed := func(stderr string) (dir, account string) {
		t.Helper()
		m := placedRE.FindStringSubmatch(stderr)
		require.NotNil(t, m, "no line naming the cluster's folder in stderr:\n%s", stderr)
		require.Equal(t, clusterHome, m[3])
		require.Equal(t, project, m[4])
		require.Contains(t, stderr, "cluster_dir="+m[1])
		return m[1], m[2]
	}

	// migrate: makes the cluster in a private folder and migrates it.
	p := startIn(t, project, nil, "migrate")
	require.Equal(t, 0, p.wait(t, 2*time.Minute), "stderr:\n%s", p.stderr.String())
	require.Contains(t, p.stderr.String(), "database is up to date")
	home, account := placed(p.stderr.String())
	require.False(t, strings.HasPrefix(home, project+"/"), "cluster %s inside the unreachable project folder", home)

	u, err := user.Lookup(account)
	require.NoError(t, err)
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	require.NoError(t, err)
	fi, err := os.Stat(home)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), fi.Mode().Perm(), "mode of %s", home)
	require.Equal(t, uint32(uid), fi.Sys().(*syscall.Stat_t).Uid, "owner of %s", home)
	_, err = os.Stat(filepath.Join(home, "data", "PG_VERSION"))
	require.NoError(t, err, "no cluster in %s", home)
	_, err = os.Lstat(filepath.Join(clusterHome, "data"))
	require.ErrorIs(t, err, os.ErrNotExist, "a cluster was made in the unreachable data dir")
	marker, err := os.ReadFile(filepath.Join(clusterHome, "cluster-location"))
	require.NoError(t, err)
	require.Equal(t, home+"\n", string(marker))

	// serve: the same folder, and it answers.
	addr := freeAddr(t)
	base := "http://" + addr
	serve := startIn(t, project, []string{"AETHER_ADDR=" + addr}, "serve")
	awaitReady(t, serve, base, 2*time.Minute)
	again, _ := placed(serve.stderr.String())
	require.Equal(t, home, again, "serve uses another folder than migrate")
	tok := mintToken(t, dataDir, "--tenant", "dev", "--project", "demo", "--permissions", "audit:read")

	// seed joins the running server: the same folder again.
	p = startIn(t, project, nil, "seed", "--tenant", "dev", "--project", "demo", "--events", "5")
	require.Equal(t, 0, p.wait(t, 2*time.Minute), "stderr:\n%s", p.stderr.String())
	require.Contains(t, p.stderr.String(), "seeded 5 events into dev/demo")
	again, _ = placed(p.stderr.String())
	require.Equal(t, home, again, "seed uses another folder than serve")

	data, errs := postGraphQL(t, base, tok, `{ auditEvents(projectId: "demo") { edges { cursor } } }`, nil)
	require.Empty(t, errs)
	require.Equal(t, 5, strings.Count(string(data), `"cursor"`), "data %s", data)

	// The generated secrets stay in the data dir.
	for _, name := range []string{"jwt-secret", "master-key"} {
		fi, err := os.Stat(filepath.Join(dataDir, name))
		require.NoError(t, err, name)
		require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), name)
	}

	require.NoError(t, serve.cmd.Process.Signal(syscall.SIGTERM))
	require.Equal(t, 0, serve.wait(t, time.Minute), "stderr:\n%s", serve.stderr.String())
	_, err = os.Stat(filepath.Join(home, "data", "postmaster.pid"))
	require.ErrorIs(t, err, os.ErrNotExist, "serve left the cluster running")
}
