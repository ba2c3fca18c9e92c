package aethertest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// instance is one server's settings and its current process.
type instance struct {
	url    string
	secret []byte
	env    []string
	log    syncBuffer

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// newInstance prepares a server of dbURL on a free loopback port, with its
// files under dir and env added to the defaults.
func newInstance(dbURL, dir string, env ...string) (*instance, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	if err := os.MkdirAll(filepath.Join(dir, "blobs"), 0o755); err != nil {
		return nil, err
	}
	in := &instance{url: "http://" + addr, secret: []byte(randomHex(32))}
	in.env = append([]string{
		"DATABASE_URL=" + dbURL,
		"AETHER_ADDR=" + addr,
		"AETHER_JWT_SECRET=" + string(in.secret),
		"AETHER_MASTER_KEY=" + randomHex(32),
		"AETHER_CHECKPOINT_KEY=" + randomHex(32),
		"AETHER_BLOB_URL=file://" + filepath.Join(dir, "blobs"),
		"AETHER_DATA_DIR=" + dir,
		"AETHER_LOG_LEVEL=warn",
		"AETHER_SHUTDOWN_TIMEOUT=2s",
	}, env...)
	return in, nil
}

// start kills a running process, starts a new one and waits until its
// /readyz answers 200.
func (in *instance) start() error {
	in.kill()
	cmd := exec.Command(bin, "serve")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AETHER_") && !strings.HasPrefix(kv, "DATABASE_URL=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, in.env...)
	cmd.Stdout, cmd.Stderr = &in.log, &in.log
	// The server must not outlive a test binary that crashed.
	cmd.SysProcAttr = ProcAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting aether serve: %w", err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	in.mu.Lock()
	in.cmd, in.done = cmd, done
	in.mu.Unlock()
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(90 * time.Second)
	for {
		select {
		case <-done:
			return fmt.Errorf("aether serve exited: %s\n%s", cmd.ProcessState, in.log.String())
		default:
		}
		if resp, err := client.Get(in.url + "/readyz"); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			in.kill()
			return errors.New("aether serve not ready after 90s:\n" + in.log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill ends the process with SIGKILL and waits for it.
func (in *instance) kill() { in.end(syscall.SIGKILL) }

// stop ends the process with SIGTERM and waits for it.
func (in *instance) stop() { in.end(syscall.SIGTERM) }

func (in *instance) end(sig syscall.Signal) {
	in.mu.Lock()
	cmd, done := in.cmd, in.done
	in.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-done:
		return
	default:
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

func (in *instance) logText() string { return in.log.String() }

// syncBuffer is a bytes.Buffer safe for a writing process and a reading
// test.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
