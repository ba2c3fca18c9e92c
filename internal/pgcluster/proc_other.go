//go:build !unix

package pgcluster

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"syscall"
)

// account is an unprivileged system user the server runs as. Running as
// another user is only supported on Unix; elsewhere it is always nil.
type account struct {
	name string
}

// sysProcAttr returns nil: commands run as the current user.
func (a *account) sysProcAttr() *syscall.SysProcAttr { return nil }

// serviceAccount returns nil: the server runs as the current user.
func serviceAccount(context.Context, *slog.Logger) (*account, error) { return nil, nil }

// chownTree does nothing: a is always nil on this platform.
func chownTree(string, *account) error { return nil }

// ensurePrivateDir creates path with mode 0700 if it is missing.
func ensurePrivateDir(path string, _ *account) error { return os.MkdirAll(path, 0o700) }

// checkPrivateDir checks only that path is a folder: ownership is not
// checked on this platform.
func checkPrivateDir(path string, _ *account) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s exists and is not a folder; remove it", path)
	}
	return nil
}

// checkBase does nothing on this platform.
func checkBase(string) error { return nil }

// lockFile does nothing on this platform.
func lockFile(context.Context, string) (func(), error) { return func() {}, nil }
