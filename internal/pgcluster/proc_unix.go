//go:build unix

package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// fallbackUser is the system user created to run the server when the
// process is root and no "postgres" user exists.
const fallbackUser = "aether-pg"

// account is an unprivileged system user the server runs as.
type account struct {
	name     string
	uid, gid uint32
}

// sysProcAttr returns the process attributes running a command as a, or nil
// to run it as the current user when a is nil. Supplementary groups are
// dropped.
func (a *account) sysProcAttr() *syscall.SysProcAttr {
	if a == nil {
		return nil
	}
	return &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: a.uid, Gid: a.gid, Groups: []uint32{}}}
}

// serviceAccount returns the account the server must run as: nil when the
// process is not root, else the system user "postgres" if it exists, else
// the system user "aether-pg", created with useradd if needed.
func serviceAccount(ctx context.Context, log *slog.Logger) (*account, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	if a, err := lookupAccount("postgres"); err == nil {
		return a, nil
	}
	if a, err := lookupAccount(fallbackUser); err == nil {
		return a, nil
	}
	log.InfoContext(ctx, "creating system user to run postgres (it refuses to run as root)", "user", fallbackUser)
	out, err := exec.CommandContext(ctx, "useradd", "--system", "--no-create-home",
		"--shell", "/usr/sbin/nologin", fallbackUser).CombinedOutput()
	// Look the user up even when useradd failed: a concurrent process may
	// have created it first.
	a, lerr := lookupAccount(fallbackUser)
	if lerr == nil {
		return a, nil
	}
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL refuses to run as root and there is no postgres user, and creating the system user %s failed: %w: %s",
			fallbackUser, err, strings.TrimSpace(string(out)))
	}
	return nil, fmt.Errorf("looking up newly created user %s: %w", fallbackUser, lerr)
}

// lookupAccount returns the account of the named user, refusing root.
func lookupAccount(name string) (*account, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return nil, err
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("user %s: bad uid %q", name, u.Uid)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("user %s: bad gid %q", name, u.Gid)
	}
	if uid == 0 {
		return nil, fmt.Errorf("user %s has uid 0", name)
	}
	return &account{name: name, uid: uint32(uid), gid: uint32(gid)}, nil
}

// chownTree gives a ownership of root and everything below it, without
// following symbolic links.
func chownTree(root string, a *account) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) { // removed meanwhile (e.g. a temp file of a running server)
				return nil
			}
			return err
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok && st.Uid == a.uid && st.Gid == a.gid {
			return nil
		}
		if err := os.Lchown(path, int(a.uid), int(a.gid)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	})
}

// ensurePrivateDir makes path a folder owned by a (or by the current user
// when a is nil) with mode 0700. path lives in a shared folder, so an
// existing entry must pass checkPrivateDir; anything else is an error
// rather than something to take over.
func ensurePrivateDir(path string, a *account) error {
	err := os.Mkdir(path, 0o700)
	if err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	if err := checkPrivateDir(path, a); err != nil {
		return err
	}
	if a != nil {
		if err := os.Lchown(path, int(a.uid), int(a.gid)); err != nil {
			return err
		}
	}
	return os.Chmod(path, 0o700)
}

// checkPrivateDir checks that path is a real folder (not a symbolic link)
// owned by the current user or by a, and not writable by group or others,
// so that nobody else can have put anything in it.
func checkPrivateDir(path string, a *account) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s exists and is not a folder; remove it", path)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("%s: cannot determine owner", path)
	}
	if st.Uid != uint32(os.Geteuid()) && (a == nil || st.Uid != a.uid) {
		return fmt.Errorf("%s exists and belongs to uid %d, not to this user; remove it", path, st.Uid)
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%s exists and is writable by other users (mode %04o); remove it", path, fi.Mode().Perm())
	}
	return nil
}

// checkBase checks that base, a folder holding private folders, belongs to
// root or the current user, and that it is not writable by group or others
// unless it has the sticky bit (as /tmp has), so that no other user can
// remove or replace the folders in it.
func checkBase(base string) error {
	fi, err := os.Stat(base)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a folder", base)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("%s: cannot determine owner", base)
	}
	if st.Uid != 0 && st.Uid != uint32(os.Geteuid()) {
		return fmt.Errorf("%s belongs to uid %d, not to root", base, st.Uid)
	}
	if fi.Mode().Perm()&0o022 != 0 && fi.Mode()&fs.ModeSticky == 0 {
		return fmt.Errorf("%s is writable by other users and not sticky (mode %04o)", base, fi.Mode().Perm())
	}
	return nil
}

// lockFile takes an exclusive advisory lock on the file at path, creating
// it if needed, waiting until the lock is free or ctx is done. The returned
// function releases the lock.
func lockFile(ctx context.Context, path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				_ = f.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			_ = f.Close()
			return nil, err
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, fmt.Errorf("waiting for another process starting the same cluster: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
