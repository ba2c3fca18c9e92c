package main

// The receiver process of the webhook-delivery scenario, and the bench's
// handle on it (receiverProc). The bench re-executes itself with
// webhookReceiverArg as the first argument; that process serves HTTPS on
// 127.0.0.1 (httptest's TLS server, HTTP/1.1), answers every POST with 200
// at once and notes when each arrived, so that its CPU time is not counted
// as ours or the baseline's. It is driven by JSON-line commands on stdin and
// answers with JSON lines on stdout; it exits when stdin closes or on
// SIGINT/SIGTERM.
//
// Its first line is {"type":"hello","url":"https://127.0.0.1:port","cert":PEM}.
// Commands, each answered by one reply line of the same name unless noted:
//
//	{"cmd":"reset"}
//	    forgets every request so far, starts counting CPU time and new
//	    connections
//	{"cmd":"report","from":t0,"to":t1,"expect":E,"wait_ms":W,"lags":true}
//	    waits up to W ms until E requests whose body timestamp lies in
//	    [t0, t1) arrived (Unix nanoseconds), then, with lags, writes
//	    {"type":"samples","lat_us":[...]} lines (receive time - body
//	    timestamp of each) and a final {"type":"report",...} line
//
//	{"cmd":"ids"}
//	    writes {"type":"ids","ids":[...]} lines with every distinct
//	    webhook-id received since the last reset, then {"type":"ids_end"}
//
// The body timestamp is the payload's "timestamp": the event's RecordedAt
// for ours, the time the payload was built for the baseline.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// webhookReceiverArg, as the first argument, makes the bench the receiver
// process of webhook-delivery. It is not a flag of the bench.
const webhookReceiverArg = "-webhook-receiver"

// receiverCommand is a command of the bench to the receiver process.
type receiverCommand struct {
	Cmd    string `json:"cmd"`
	From   int64  `json:"from,omitempty"`
	To     int64  `json:"to,omitempty"`
	Expect int64  `json:"expect,omitempty"`
	WaitMs int64  `json:"wait_ms,omitempty"`
	Lags   bool   `json:"lags,omitempty"`
}

// receiverReply is a line of the receiver process to the bench.
type receiverReply struct {
	Type string `json:"type"`
	Err  string `json:"err,omitempty"`
	// URL and Cert (PEM) are the server's address and certificate (hello).
	URL  string `json:"url,omitempty"`
	Cert string `json:"cert,omitempty"`
	// LatencyUs are receive time - body timestamp, in microseconds
	// (samples).
	LatencyUs []int64 `json:"lat_us,omitempty"`
	// Matched counts requests whose body timestamp is in [from, to); Total
	// counts every request since reset; Dups counts requests whose
	// webhook-id was seen before; Bad counts requests without a readable
	// timestamp or signature (report).
	Matched int64 `json:"matched,omitempty"`
	Total   int64 `json:"total,omitempty"`
	Dups    int64 `json:"dups,omitempty"`
	Bad     int64 `json:"bad,omitempty"`
	// FirstNs, NthNs and LastNs are the receive times (Unix nanoseconds) of
	// the first, the expect-th and the last matching request (report).
	FirstNs int64 `json:"first_ns,omitempty"`
	NthNs   int64 `json:"nth_ns,omitempty"`
	LastNs  int64 `json:"last_ns,omitempty"`
	// Bytes sums the matching requests' body sizes; Conns counts the
	// connections opened since reset; CPUNs is the process's CPU time since
	// reset (report).
	Bytes int64 `json:"bytes,omitempty"`
	Conns int64 `json:"conns,omitempty"`
	CPUNs int64 `json:"cpu_ns,omitempty"`
	// IDs are distinct webhook-ids received (ids).
	IDs []string `json:"ids,omitempty"`
}

// arrival is one request the receiver got.
type arrival struct {
	// at is the receive time and stamp the body timestamp, Unix
	// nanoseconds; stamp is 0 when the body had none.
	at, stamp int64
	size      int32
}

// receiverState is the receiver process's record of requests.
type receiverState struct {
	mu       sync.Mutex
	arrivals []arrival
	ids      map[string]struct{}
	dups     int64
	bad      int64
	conns    int64
	cpuStart time.Duration
}

var (
	timestampKey = []byte(`"timestamp":"`)
	bodyPool     = sync.Pool{New: func() any { return new(bytes.Buffer) }}
)

// ServeHTTP reads the body, notes its arrival and answers 200.
func (s *receiverState) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	buf := bodyPool.Get().(*bytes.Buffer)
	buf.Reset()
	_, err := buf.ReadFrom(r.Body)
	at := time.Now().UnixNano()
	var stamp int64
	if err == nil {
		stamp = bodyStamp(buf.Bytes())
	}
	a := arrival{at: at, stamp: stamp, size: int32(buf.Len())}
	bodyPool.Put(buf)
	id := r.Header.Get("Webhook-Id")
	signed := r.Header.Get("Webhook-Signature") != ""

	s.mu.Lock()
	s.arrivals = append(s.arrivals, a)
	if _, seen := s.ids[id]; seen {
		s.dups++
	} else {
		s.ids[id] = struct{}{}
	}
	if stamp == 0 || !signed || id == "" {
		s.bad++
	}
	s.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

// bodyStamp returns the payload's "timestamp" in Unix nanoseconds, 0 if it
// has none.
func bodyStamp(body []byte) int64 {
	i := bytes.Index(body, timestampKey)
	if i < 0 {
		return 0
	}
	rest := body[i+len(timestampKey):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return 0
	}
	t, err := time.Parse(time.RFC3339Nano, string(rest[:j]))
	if err != nil {
		return 0
	}
	return t.UnixNano()
}

// runWebhookReceiver is the receiver process's main; it returns the exit
// code.
func runWebhookReceiver(args []string) int {
	if len(args) > 0 {
		fmt.Fprintf(os.Stderr, "bench %s: unexpected arguments %q\n", webhookReceiverArg, args)
		return 2
	}
	out := bufio.NewWriter(os.Stdout)
	emit := func(r receiverReply) {
		b, err := json.Marshal(r)
		if err != nil {
			b, _ = json.Marshal(receiverReply{Type: "error", Err: err.Error()})
		}
		out.Write(b)
		out.WriteByte('\n')
		out.Flush()
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		os.Exit(1)
	}()

	s := &receiverState{ids: map[string]struct{}{}, cpuStart: processCPU()}
	srv := httptest.NewUnstartedServer(s)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.mu.Lock()
			s.conns++
			s.mu.Unlock()
		}
	}
	srv.StartTLS()
	defer srv.Close()
	cert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	emit(receiverReply{Type: "hello", URL: srv.URL, Cert: string(cert)})

	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		var cmd receiverCommand
		if err := json.Unmarshal(in.Bytes(), &cmd); err != nil {
			emit(receiverReply{Type: "error", Err: "bad command: " + err.Error()})
			continue
		}
		switch cmd.Cmd {
		case "reset":
			s.mu.Lock()
			s.arrivals = s.arrivals[:0]
			s.ids = map[string]struct{}{}
			s.dups, s.bad, s.conns = 0, 0, 0
			s.cpuStart = processCPU()
			s.mu.Unlock()
			emit(receiverReply{Type: "reset"})
		case "report":
			s.report(&cmd, emit)
		case "ids":
			s.mu.Lock()
			ids := make([]string, 0, len(s.ids))
			for id := range s.ids {
				ids = append(ids, id)
			}
			s.mu.Unlock()
			for len(ids) > 0 {
				n := min(len(ids), samplesPerLine)
				emit(receiverReply{Type: "ids", IDs: ids[:n]})
				ids = ids[n:]
			}
			emit(receiverReply{Type: "ids_end"})
		default:
			emit(receiverReply{Type: "error", Err: "unknown command " + strconv.Quote(cmd.Cmd)})
		}
	}
	return 0
}

// report waits for cmd.Expect matching requests (or cmd.WaitMs) and writes
// what arrived.
func (s *receiverState) report(cmd *receiverCommand, emit func(receiverReply)) {
	matches := func(a arrival) bool { return a.stamp >= cmd.From && a.stamp < cmd.To }
	deadline := time.Now().Add(time.Duration(cmd.WaitMs) * time.Millisecond)
	// Arrivals only grow between resets: count incrementally.
	var matched int64
	seen := 0
	for {
		s.mu.Lock()
		for _, a := range s.arrivals[seen:] {
			if matches(a) {
				matched++
			}
		}
		seen = len(s.arrivals)
		s.mu.Unlock()
		if matched >= cmd.Expect || !time.Now().Before(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}

	s.mu.Lock()
	r := receiverReply{Type: "report", Total: int64(len(s.arrivals)), Dups: s.dups, Bad: s.bad, Conns: s.conns,
		CPUNs: (processCPU() - s.cpuStart).Nanoseconds()}
	var lat []int64
	for _, a := range s.arrivals {
		if !matches(a) {
			continue
		}
		r.Matched++
		r.Bytes += int64(a.size)
		if r.FirstNs == 0 {
			r.FirstNs = a.at
		}
		if r.Matched == cmd.Expect {
			r.NthNs = a.at
		}
		r.LastNs = a.at
		if cmd.Lags {
			lat = append(lat, (a.at-a.stamp)/1000)
		}
	}
	s.mu.Unlock()
	for len(lat) > 0 {
		n := min(len(lat), samplesPerLine)
		emit(receiverReply{Type: "samples", LatencyUs: lat[:n]})
		lat = lat[n:]
	}
	emit(r)
}

// receiverProc is the receiver process: the bench re-executed with
// webhookReceiverArg.
type receiverProc struct {
	cmd      *exec.Cmd
	stdin    io.WriteCloser
	replies  chan receiverReply
	waitDone chan struct{}
	// url is the server's base URL; roots trusts its certificate, certPEM.
	url     string
	roots   *x509.CertPool
	certPEM string
}

// startReceiverProc starts the receiver process and waits for its hello.
func startReceiverProc(ctx context.Context) (*receiverProc, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	p := &receiverProc{cmd: exec.Command(exe, webhookReceiverArg), replies: make(chan receiverReply, 64), waitDone: make(chan struct{})}
	p.cmd.Stderr = os.Stderr
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		defer close(p.replies)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			var r receiverReply
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				r = receiverReply{Type: "error", Err: "unreadable reply: " + truncate(sc.Bytes(), 200)}
			}
			p.replies <- r
		}
	}()
	go func() {
		_ = p.cmd.Wait() // after the reader above has seen EOF
		close(p.waitDone)
	}()
	hello, err := p.await(ctx, "hello", 30*time.Second)
	if err != nil {
		p.stop()
		return nil, err
	}
	p.url, p.certPEM = hello.URL, hello.Cert
	p.roots = x509.NewCertPool()
	if !p.roots.AppendCertsFromPEM([]byte(hello.Cert)) {
		p.stop()
		return nil, errors.New("receiver process: unreadable certificate")
	}
	return p, nil
}

// call sends cmd and waits up to timeout for the reply of type typ.
func (p *receiverProc) call(ctx context.Context, cmd receiverCommand, typ string, timeout time.Duration) (receiverReply, error) {
	b, err := json.Marshal(cmd)
	if err != nil {
		return receiverReply{}, err
	}
	if _, err := p.stdin.Write(append(b, '\n')); err != nil {
		return receiverReply{}, fmt.Errorf("receiver process: %w", err)
	}
	return p.await(ctx, typ, timeout)
}

// reset makes the receiver forget what it received.
func (p *receiverProc) reset(ctx context.Context) error {
	_, err := p.call(ctx, receiverCommand{Cmd: "reset"}, "reset", 30*time.Second)
	return err
}

// report sends a report command and returns its latencies (microseconds,
// only with cmd.Lags) and its final line.
func (p *receiverProc) report(ctx context.Context, cmd receiverCommand) ([]int64, receiverReply, error) {
	cmd.Cmd = "report"
	var lat []int64
	b, err := json.Marshal(cmd)
	if err != nil {
		return nil, receiverReply{}, err
	}
	if _, err := p.stdin.Write(append(b, '\n')); err != nil {
		return nil, receiverReply{}, fmt.Errorf("receiver process: %w", err)
	}
	r, err := collectReplies(ctx, p.replies, "receiver process", "report", "samples",
		func(r receiverReply) { lat = append(lat, r.LatencyUs...) }, time.Duration(cmd.WaitMs)*time.Millisecond+time.Minute)
	if err != nil {
		return nil, r, err
	}
	return lat, r, nil
}

// ids returns every distinct webhook-id the receiver got since its last
// reset.
func (p *receiverProc) ids(ctx context.Context) ([]string, error) {
	if _, err := p.stdin.Write([]byte(`{"cmd":"ids"}` + "\n")); err != nil {
		return nil, fmt.Errorf("receiver process: %w", err)
	}
	var ids []string
	_, err := collectReplies(ctx, p.replies, "receiver process", "ids_end", "ids",
		func(r receiverReply) { ids = append(ids, r.IDs...) }, time.Minute)
	return ids, err
}

// await returns the next reply of type typ, skipping stale replies.
func (p *receiverProc) await(ctx context.Context, typ string, timeout time.Duration) (receiverReply, error) {
	return collectReplies(ctx, p.replies, "receiver process", typ, "", nil, timeout)
}

// stop closes the receiver's stdin (it exits), then signals it if it
// lingers.
func (p *receiverProc) stop() {
	_ = p.stdin.Close()
	for _, step := range []struct {
		wait time.Duration
		sig  os.Signal
	}{{10 * time.Second, syscall.SIGTERM}, {5 * time.Second, syscall.SIGKILL}, {5 * time.Second, nil}} {
		select {
		case <-p.waitDone:
			return
		case <-time.After(step.wait):
		}
		if step.sig != nil {
			_ = p.cmd.Process.Signal(step.sig)
		}
	}
	fmt.Fprintf(os.Stderr, "bench: webhook-delivery: receiver process %d did not exit\n", p.cmd.Process.Pid)
}
