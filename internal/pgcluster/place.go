package pgcluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// privateRoot is the folder holding the private cluster folders of data
// dirs the server's user cannot reach, as privateRoot/<hash>. It is a
// variable so tests can point it elsewhere.
var privateRoot = "/var/lib/aether-pg"

// tempRoot returns the folder holding private cluster folders, as
// aether-pgcluster-<hash>, when privateRoot cannot be used. It is a variable
// so tests can replace it.
var tempRoot = os.TempDir

const (
	// locationFile, in the data dir, names the private folder the cluster
	// lives in. It is written for people and is not read to find the
	// cluster: that is found from the data dir's path alone.
	locationFile = "cluster-location"

	// ownerFile, in a private cluster folder, holds the absolute, resolved
	// data dir the folder was made for.
	ownerFile = "data-dir"
)

// privateDirs returns the private folders that may hold the cluster of the
// data dir at the absolute, symlink-free path resolved, in order of
// preference: root/<hash>, then temp/aether-pgcluster-<hash>. The hash is
// the first 8 bytes of the SHA-256 of resolved, in hex. An empty or
// relative root or temp is left out.
func privateDirs(resolved, root, temp string) []string {
	sum := sha256.Sum256([]byte(resolved))
	h := hex.EncodeToString(sum[:8])
	var dirs []string
	if filepath.IsAbs(root) {
		dirs = append(dirs, filepath.Join(root, h))
	}
	if filepath.IsAbs(temp) {
		dirs = append(dirs, filepath.Join(temp, "aether-pgcluster-"+h))
	}
	return dirs
}

// place returns the folder the cluster lives in: c.dir, unless the server
// runs as another account (the process is root) and the cluster belongs in
// a private folder, in this order:
//
//  1. A cluster already in c.dir is used there. When the account cannot
//     reach it, place fails, naming the blocking folder: data is never
//     moved.
//  2. A private folder of c.dir (see privateDirs) that already holds its
//     cluster is used, even when c.dir has become reachable since.
//  3. c.dir, when the account can reach it.
//  4. The first private folder of c.dir that can be made; its path is
//     written into c.dir/cluster-location.
//
// Whenever a private folder is used, place logs it and why.
func (c *Cluster) place(ctx context.Context) (string, error) {
	if c.acct == nil {
		return c.dir, nil
	}
	resolved, err := filepath.EvalSymlinks(c.dir)
	if err != nil {
		return "", fmt.Errorf("resolving data dir: %w", err)
	}
	// c.dir itself is given to the account when the cluster lives there,
	// so only its parents must be searchable.
	blocker, err := c.blocker(ctx, filepath.Dir(resolved))
	if err != nil {
		return "", err
	}

	if _, err := os.Lstat(filepath.Join(c.dir, "data")); err == nil {
		if blocker != "" {
			return "", fmt.Errorf("%s; the cluster in it is not moved elsewhere automatically: make %s searchable by other users (chmod o+x %s), or move %s/data out of the way to start a new, empty cluster",
				c.cannotReach(blocker, c.dir), blocker, blocker, c.dir)
		}
		if previous := readLocation(filepath.Join(c.dir, locationFile)); previous != "" {
			c.log.WarnContext(ctx, fmt.Sprintf("using the embedded PostgreSQL cluster in %s; the one at %s, named by %s, is not used",
				c.dir, previous, filepath.Join(c.dir, locationFile)))
			_ = os.Remove(filepath.Join(c.dir, locationFile))
		}
		return c.dir, nil
	}

	marker := filepath.Join(c.dir, locationFile)
	previous := readLocation(marker)
	candidates := privateDirs(resolved, privateRoot, tempRoot())
	for _, d := range candidates {
		// A folder that fails the checks is not used; step 4 reports
		// why if it comes to need it.
		if found, err := holdsClusterOf(d, resolved, c.acct); err != nil || !found {
			continue
		}
		if previous == "" {
			c.log.WarnContext(ctx, fmt.Sprintf("reusing the embedded PostgreSQL cluster made earlier for %s at %s; remove %s to start with an empty database",
				c.dir, d, d), "cluster_dir", d, "data_dir", c.dir)
		}
		if err := writeLocation(marker, d); err != nil {
			return "", err
		}
		if blocker != "" {
			c.logPlaced(ctx, d, fmt.Sprintf("because user %s cannot reach %s (it cannot enter %s)", c.acct.name, c.dir, blocker))
		} else {
			c.logPlaced(ctx, d, fmt.Sprintf("made there when user %s could not reach %s", c.acct.name, c.dir))
		}
		return d, nil
	}

	if blocker == "" {
		if previous != "" {
			c.log.WarnContext(ctx, fmt.Sprintf("the embedded PostgreSQL cluster of %s at %s is gone; starting an empty one in %s", c.dir, previous, c.dir))
			_ = os.Remove(marker)
		}
		return c.dir, nil
	}

	var failures []string
	for _, d := range candidates {
		if err := c.makePrivateDir(ctx, d, resolved); err != nil {
			c.log.WarnContext(ctx, "not using this folder for the embedded PostgreSQL cluster", "folder", d, "reason", err)
			failures = append(failures, err.Error())
			continue
		}
		if previous != "" && previous != d {
			c.log.WarnContext(ctx, fmt.Sprintf("the embedded PostgreSQL cluster of %s at %s is gone; starting an empty one at %s", c.dir, previous, d))
		}
		if err := writeLocation(marker, d); err != nil {
			return "", err
		}
		c.logPlaced(ctx, d, fmt.Sprintf("because user %s cannot reach %s (it cannot enter %s)", c.acct.name, c.dir, blocker))
		return d, nil
	}
	return "", fmt.Errorf("%s, and no private folder for the cluster could be made (%s); make %s searchable by other users (chmod o+x %s), or use a data dir every user can reach (AETHER_DATA_DIR)",
		c.cannotReach(blocker, c.dir), strings.Join(failures, "; "), blocker, blocker)
}

// logPlaced logs that the cluster lives in the private folder dir, and why.
func (c *Cluster) logPlaced(ctx context.Context, dir, why string) {
	c.log.InfoContext(ctx, fmt.Sprintf("embedded PostgreSQL cluster at %s, %s", dir, why),
		"cluster_dir", dir, "data_dir", c.dir)
}

// readLocation returns the folder named in the cluster-location file at
// path, or "" when there is none.
func readLocation(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// writeLocation writes dir into the cluster-location file at path, unless
// it already holds it.
func writeLocation(path, dir string) error {
	if readLocation(path) == dir {
		return nil
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(dir+"\n"), 0o600); err != nil {
		return fmt.Errorf("noting the cluster's folder: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("noting the cluster's folder: %w", err)
	}
	return nil
}

// holdsClusterOf reports whether the private folder dir holds the cluster
// of the data dir resolved. It is false when dir does not exist or holds
// no cluster yet, and an error when dir (or the folder holding it) is not
// private to this user and a, or was made for another data dir.
func holdsClusterOf(dir, resolved string, a *account) (bool, error) {
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	if err := checkBase(filepath.Dir(dir)); err != nil {
		return false, err
	}
	if err := checkPrivateDir(dir, a); err != nil {
		return false, err
	}
	hasData := false
	if _, err := os.Lstat(filepath.Join(dir, "data")); err == nil {
		hasData = true
	}
	owner, err := os.ReadFile(filepath.Join(dir, ownerFile))
	switch {
	case errors.Is(err, fs.ErrNotExist) && !hasData:
		return false, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, fmt.Errorf("%s holds a cluster but no %s file naming its data dir; remove it", dir, ownerFile)
	case err != nil:
		return false, err
	}
	if got := strings.TrimSpace(string(owner)); got != resolved {
		return false, fmt.Errorf("%s was made for the data dir %s, not %s; remove it", dir, got, resolved)
	}
	return hasData, nil
}

// makePrivateDir makes dir, a private folder for the cluster of the data
// dir resolved: its parent is created (mode 0755) if missing and must
// belong to root or this user and not be writable by others unless
// sticky; dir itself gets mode 0700, belongs to the server's account and
// names resolved in its data-dir file. An existing dir is refused when it
// belongs to another user, is writable by group or others, or names
// another data dir. The account must be able to reach dir.
func (c *Cluster) makePrivateDir(ctx context.Context, dir, resolved string) error {
	base := filepath.Dir(dir)
	if err := os.MkdirAll(base, 0o755); err != nil {
		return err
	}
	if err := checkBase(base); err != nil {
		return err
	}
	if _, err := holdsClusterOf(dir, resolved, c.acct); err != nil {
		return err
	}
	if err := ensurePrivateDir(dir, c.acct); err != nil {
		return err
	}
	owner := filepath.Join(dir, ownerFile)
	if _, err := os.Lstat(owner); errors.Is(err, fs.ErrNotExist) {
		if err := os.WriteFile(owner, []byte(resolved+"\n"), 0o600); err != nil {
			return err
		}
	}
	blocker, err := c.blocker(ctx, dir)
	if err != nil {
		return err
	}
	if blocker != "" {
		return fmt.Errorf("user %s cannot enter %s", c.acct.name, blocker)
	}
	return nil
}
