// Package seaweed gives tests and benchmarks a real S3-compatible server:
// SeaweedFS's `weed mini` on loopback. No mock and no in-process fake: the
// bytes go through a real S3 API over a real socket.
//
// The weed binary is large (some 230 MB) and takes minutes to build, so it
// is built once into a cache outside the repository
// ($AETHER_CACHE_DIR, else $XDG_CACHE_HOME/aether, else ~/.cache/aether) and
// reused; a file lock keeps test binaries that start at once from building
// it twice. `make test-deps` builds it ahead of the tests
// (`go run ./internal/seaweed/cmd/weed-binary`). AETHER_WEED_BIN names a
// weed binary to use instead.
package seaweed

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

// Module and Version are the SeaweedFS module built into the cache. Its
// go.mod has replace directives, so `go install module@version` refuses it:
// Binary downloads the module with `go mod download` and builds ./weed in a
// writable copy of it.
const (
	Module  = "github.com/seaweedfs/seaweedfs"
	Version = "v0.0.0-20261109003541-7506e5f91cd6"
)

// CacheDir is the folder that holds the built binary: $AETHER_CACHE_DIR,
// else $XDG_CACHE_HOME/aether, else ~/.cache/aether (os.UserCacheDir).
func CacheDir() (string, error) {
	if d := os.Getenv("AETHER_CACHE_DIR"); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("seaweed: no cache folder: %w", err)
	}
	return filepath.Join(d, "aether"), nil
}

// binaryPath is where the cached binary of Version lives.
func binaryPath() (string, error) {
	d, err := CacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "seaweedfs-"+Version, "weed"), nil
}

// Binary returns the path of a weed binary: AETHER_WEED_BIN when set, else
// the cached build of Version, building it first when it is missing (about
// 3 minutes and 2 CPU cores; progress goes to log). Concurrent callers, in
// this process or others, wait for one build.
func Binary(ctx context.Context, log io.Writer) (string, error) {
	if p := os.Getenv("AETHER_WEED_BIN"); p != "" {
		return p, nil
	}
	bin, err := binaryPath()
	if err != nil {
		return "", err
	}
	if isExecutable(bin) {
		return bin, nil
	}
	dir := filepath.Dir(bin)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("seaweed: creating %s: %w", dir, err)
	}
	unlock, err := lockFile(filepath.Join(dir, "build.lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if isExecutable(bin) { // built by whoever held the lock before us
		return bin, nil
	}
	if err := build(ctx, dir, bin, log); err != nil {
		return "", err
	}
	return bin, nil
}

// isExecutable reports whether path is a regular file with an execute bit.
func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// lockFile takes an exclusive flock on path, waiting for it; the returned
// function releases it.
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("seaweed: opening lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("seaweed: locking %s: %w", path, err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// build downloads the module into the Go module cache, copies it into a
// writable folder under dir and builds ./weed there into bin (through a
// temporary name, renamed when complete).
func build(ctx context.Context, dir, bin string, log io.Writer) error {
	if log == nil {
		log = io.Discard
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
		if !isExecutable(goBin) {
			return errors.New("seaweed: building weed needs the go command on PATH")
		}
	}
	work, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return fmt.Errorf("seaweed: creating build folder: %w", err)
	}
	defer os.RemoveAll(work)

	// A throwaway module to run `go mod download` in, so that the
	// download does not depend on (or touch) any project's go.mod.
	if err := os.WriteFile(filepath.Join(work, "go.mod"), []byte("module aetherweedbuild\n"), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(log, "seaweed: downloading %s@%s\n", Module, Version)
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, goBin, "mod", "download", "-json", Module+"@"+Version)
	cmd.Dir, cmd.Stdout, cmd.Stderr = work, &out, log
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("seaweed: go mod download %s@%s: %w", Module, Version, err)
	}
	var mod struct{ Dir, Error string }
	if err := json.Unmarshal(out.Bytes(), &mod); err != nil || mod.Dir == "" {
		return fmt.Errorf("seaweed: go mod download gave no folder (%s): %v", mod.Error, err)
	}
	src := filepath.Join(work, "src")
	fmt.Fprintf(log, "seaweed: copying %s to %s\n", mod.Dir, src)
	// CopyFS creates files 0666 and folders 0777 (before umask): the
	// copy is writable, as the build needs, unlike the module cache.
	if err := os.CopyFS(src, os.DirFS(mod.Dir)); err != nil {
		return fmt.Errorf("seaweed: copying the module: %w", err)
	}
	tmp := bin + ".tmp"
	fmt.Fprintf(log, "seaweed: building weed into %s (a few minutes, once)\n", bin)
	cmd = exec.CommandContext(ctx, goBin, "build", "-o", tmp, "./weed")
	cmd.Dir, cmd.Stdout, cmd.Stderr = src, log, log
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if err := cmd.Run(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("seaweed: go build ./weed: %w", err)
	}
	if err := os.Rename(tmp, bin); err != nil {
		return fmt.Errorf("seaweed: installing %s: %w", bin, err)
	}
	return nil
}
