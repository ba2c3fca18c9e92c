package main

// serveProc runs the real `aether serve` binary as a child process, for
// the soak: its memory and goroutines are then the server's own, read from
// /proc and from its --debug-addr listener (net/http/pprof).

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// serveProc is a running `aether serve`.
type serveProc struct {
	cmd      *exec.Cmd
	waitDone chan struct{}
	// baseURL is the service (http://127.0.0.1:port), debugURL its
	// profile listener.
	baseURL, debugURL string
	client            *http.Client
}

// serverRuntime is the server process's memory and goroutines at one
// moment, after a forced garbage collection.
type serverRuntime struct {
	// heapAlloc is the live heap (bytes of reachable objects) and
	// heapInuse the bytes of in-use heap spans, both just after a GC.
	heapAlloc, heapInuse int64
	// rss is the resident set (VmRSS) of the process.
	rss        int64
	goroutines int
	// cpu is the process's CPU time so far (user and system).
	cpu time.Duration
}

// startServeProc starts bin serve with env (AETHER_* settings) added to
// this process's environment (less its own DATABASE_URL and AETHER_*), on
// free loopback ports, and waits until /readyz answers 200.
func startServeProc(ctx context.Context, bin string, env []string) (_ *serveProc, err error) {
	addr, err := freeLoopbackAddr()
	if err != nil {
		return nil, err
	}
	debugAddr, err := freeLoopbackAddr()
	if err != nil {
		return nil, err
	}
	p := &serveProc{
		cmd:      exec.Command(bin, "serve"),
		waitDone: make(chan struct{}),
		baseURL:  "http://" + addr,
		debugURL: "http://" + debugAddr,
		client:   &http.Client{Timeout: 2 * time.Minute},
	}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AETHER_") && !strings.HasPrefix(kv, "DATABASE_URL=") {
			p.cmd.Env = append(p.cmd.Env, kv)
		}
	}
	p.cmd.Env = append(p.cmd.Env, env...)
	p.cmd.Env = append(p.cmd.Env, "AETHER_ADDR="+addr, "AETHER_DEBUG_ADDR="+debugAddr)
	p.cmd.Stdout, p.cmd.Stderr = os.Stderr, os.Stderr
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s serve: %w", bin, err)
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.waitDone)
	}()
	defer func() {
		if err != nil {
			p.stop()
		}
	}()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if p.exited() {
			return nil, fmt.Errorf("aether serve exited: %s", p.cmd.ProcessState)
		}
		resp, err := p.client.Get(p.baseURL + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, nil
			}
		}
		if time.Now().After(deadline) {
			return nil, errors.New("aether serve not ready within 2 minutes")
		}
		if err := sleepCtx(ctx, 200*time.Millisecond); err != nil {
			return nil, err
		}
	}
}

// freeLoopbackAddr returns a 127.0.0.1 address with a port free just now.
func freeLoopbackAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// exited reports whether the process has ended.
func (p *serveProc) exited() bool {
	select {
	case <-p.waitDone:
		return true
	default:
		return false
	}
}

var (
	goroutineTotalRe = regexp.MustCompile(`^goroutine profile: total (\d+)`)
	heapAllocRe      = regexp.MustCompile(`(?m)^# HeapAlloc = (\d+)$`)
	heapInuseRe      = regexp.MustCompile(`(?m)^# HeapInuse = (\d+)$`)
)

// runtime reads the server's goroutines and, after forcing two garbage
// collections (the heap profile's gc=1), its heap; then its RSS and CPU
// time from /proc.
func (p *serveProc) runtime(ctx context.Context) (serverRuntime, error) {
	var r serverRuntime
	body, err := p.debugGet(ctx, "/debug/pprof/goroutine?debug=1")
	if err != nil {
		return r, err
	}
	m := goroutineTotalRe.FindStringSubmatch(body)
	if m == nil {
		return r, errors.New("no goroutine total in the goroutine profile")
	}
	r.goroutines, _ = strconv.Atoi(m[1])
	// The first GC may leave objects with finalizers for the second.
	if _, err := p.debugGet(ctx, "/debug/pprof/heap?gc=1&debug=1"); err != nil {
		return r, err
	}
	if body, err = p.debugGet(ctx, "/debug/pprof/heap?gc=1&debug=1"); err != nil {
		return r, err
	}
	a, u := heapAllocRe.FindStringSubmatch(body), heapInuseRe.FindStringSubmatch(body)
	if a == nil || u == nil {
		return r, errors.New("no HeapAlloc or HeapInuse in the heap profile")
	}
	r.heapAlloc, _ = strconv.ParseInt(a[1], 10, 64)
	r.heapInuse, _ = strconv.ParseInt(u[1], 10, 64)
	if r.rss, err = procRSS(p.cmd.Process.Pid); err != nil {
		return r, err
	}
	r.cpu = procCPU(p.cmd.Process.Pid)
	return r, nil
}

// settledRuntime waits until the server's goroutine count holds still over
// three readings a second apart (connections and jobs ending), at most
// 30 s, then reads its runtime.
func (p *serveProc) settledRuntime(ctx context.Context) (serverRuntime, error) {
	last, same := -1, 0
	for deadline := time.Now().Add(30 * time.Second); same < 2 && time.Now().Before(deadline); {
		body, err := p.debugGet(ctx, "/debug/pprof/goroutine?debug=1")
		if err != nil {
			return serverRuntime{}, err
		}
		m := goroutineTotalRe.FindStringSubmatch(body)
		if m == nil {
			return serverRuntime{}, errors.New("no goroutine total in the goroutine profile")
		}
		n, _ := strconv.Atoi(m[1])
		if n == last {
			same++
		} else {
			last, same = n, 0
		}
		if err := sleepCtx(ctx, time.Second); err != nil {
			return serverRuntime{}, err
		}
	}
	return p.runtime(ctx)
}

// debugGet returns the body of a GET of path on the debug listener.
func (p *serveProc) debugGet(ctx context.Context, path string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.debugURL+path, nil)
	if err != nil {
		return "", err
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return "", fmt.Errorf("aether serve debug listener: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("aether serve debug listener: %s: HTTP %d", path, resp.StatusCode)
	}
	return string(b), nil
}

// procRSS returns the resident set of process pid, from
// /proc/<pid>/status.
func procRSS(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmRSS in /proc status")
}

// procCPU returns the CPU time of process pid so far, from
// /proc/<pid>/stat (0 when unreadable).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	cpu, _ := statCPU(b)
	return cpu
}

// stop sends SIGTERM and waits for the exit (SIGKILL after a minute).
func (p *serveProc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.waitDone:
		return
	case <-time.After(time.Minute):
	}
	_ = p.cmd.Process.Kill()
	<-p.waitDone
	fmt.Fprintf(os.Stderr, "bench: soak: aether serve did not stop within a minute; killed\n")
}
