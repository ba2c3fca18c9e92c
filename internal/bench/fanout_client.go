package main

// The client process of the live-fanout scenario, and the bench's handle
// on it (fanoutProc). The bench re-executes itself with fanoutClientArg as
// the first argument; that process holds the WebSocket clients, so that
// their CPU time and memory are not the server's. It is driven by JSON-line commands on stdin and answers with
// JSON lines on stdout; it closes every socket and exits when stdin closes
// (the bench ended or died) or on SIGINT/SIGTERM.
//
// Commands, each answered by one reply line of the same name unless noted:
//
//	{"cmd":"connect","url":...,"n":N,"graphql":true,"auths":["Bearer ...",...],"subscribe":{...}}
//	    opens N sockets (graphql-transport-ws: connection_init with
//	    {"Authorization": auths[i]}, connection_ack, subscribe with id "1");
//	    replies {"type":"connected","n":opened,"failed":k,"err":first error}
//	{"cmd":"status"}
//	    replies {"type":"status","n":open,"primed":sockets that received a
//	    delivery,"total":deliveries,"ended":subscriptions ended by the
//	    server,"sample":a delivery}
//	{"cmd":"start"}
//	    forgets every sample so far and starts counting client CPU time
//	{"cmd":"report","from":t0,"to":t1,"expect":E,"wait_ms":W}
//	    waits up to W ms until E deliveries of events stamped in [t0, t1)
//	    arrived, then writes {"type":"samples","lat_us":[...]} lines (their
//	    latencies) and a final {"type":"report",...} line
//	{"cmd":"close"}
//	    closes every socket (close frame 1000, then the TCP connection)
//	{"cmd":"track","expect":H,"wait_ms":W}
//	    (sockets connected with "track":true) waits up to W ms until every
//	    subscription's last sequence is at least H, then replies
//	    {"type":"track","tracking":{...}}: per-subscription sequence
//	    checks and the latency histogram's percentiles since start
//
// A delivery is any message holding stampKey: the recorder's send time.
// With "track":true (the soak), a delivery is any message holding a
// sequence: each subscription checks that its sequences follow each other
// without gap or repeat, and the latencies of stamped deliveries go into a
// histogram instead of being kept one by one.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gorilla/websocket"
)

const (
	// fanoutClientArg, as the first argument, makes the bench the client
	// process of live-fanout. It is not a flag of the bench (-h does not
	// list it).
	fanoutClientArg = "-fanout-client"
	// stampKey precedes, in each delivered message, the time the event was
	// sent (recorded) as a JSON string of Unix nanoseconds (19 digits).
	stampKey = `"sentAtUnixNano":"`
	// stampDigits is the width of the stamp (Unix nanoseconds until 2286).
	stampDigits = 19
	// dialConcurrency bounds the handshakes in flight.
	dialConcurrency = 64
	// samplesPerLine bounds the latencies in one samples line.
	samplesPerLine = 20000
)

// fanoutCommand is a command of the bench to the client process.
type fanoutCommand struct {
	Cmd       string          `json:"cmd"`
	URL       string          `json:"url,omitempty"`
	N         int             `json:"n,omitempty"`
	GraphQL   bool            `json:"graphql,omitempty"`
	Auths     []string        `json:"auths,omitempty"`
	Subscribe json.RawMessage `json:"subscribe,omitempty"`
	From      int64           `json:"from,omitempty"`
	To        int64           `json:"to,omitempty"`
	Expect    int64           `json:"expect,omitempty"`
	WaitMs    int64           `json:"wait_ms,omitempty"`
	// Track makes connect's sockets check sequences (see the file
	// comment).
	Track bool `json:"track,omitempty"`
}

// fanoutReply is a line of the client process to the bench.
type fanoutReply struct {
	Type string `json:"type"`
	// NoFile is the client's RLIMIT_NOFILE soft limit (hello).
	NoFile uint64 `json:"nofile,omitempty"`
	// N is the number of open sockets (connected, status).
	N int `json:"n,omitempty"`
	// Failed counts sockets that could not be opened (connected).
	Failed int    `json:"failed,omitempty"`
	Err    string `json:"err,omitempty"`
	// Primed counts sockets that received at least one delivery; Total
	// counts deliveries (status).
	Primed int   `json:"primed,omitempty"`
	Total  int64 `json:"total,omitempty"`
	// Ended counts subscriptions the server ended or whose socket failed.
	Ended int `json:"ended,omitempty"`
	// Sample is one delivered message, verbatim (status, once primed).
	Sample string `json:"sample,omitempty"`
	// LatencyUs are delivery latencies in microseconds (samples).
	LatencyUs []int64 `json:"lat_us,omitempty"`
	// Delivered counts deliveries of events stamped in [from, to); Received
	// counts deliveries received in [from, to) whatever their stamp
	// (report).
	Delivered int64 `json:"delivered,omitempty"`
	Received  int64 `json:"received,omitempty"`
	// CPUNs is the client process's CPU time since start (report).
	CPUNs int64 `json:"cpu_ns,omitempty"`
	// Tracking is the sequence check of tracked sockets (track).
	Tracking *trackReport `json:"tracking,omitempty"`
}

// trackReport sums up what tracked subscriptions received.
type trackReport struct {
	Subscriptions int `json:"subscriptions"`
	// Deliveries counts every delivery; Gaps counts deliveries whose
	// sequence skipped some, Repeats those whose sequence was not above
	// the previous one.
	Deliveries int64 `json:"deliveries"`
	Gaps       int64 `json:"gaps"`
	Repeats    int64 `json:"repeats"`
	// MinFirst and MaxFirst bound the subscriptions' first sequences,
	// MinLast and MaxLast their last ones; Behind counts subscriptions
	// whose last sequence is below the awaited one.
	MinFirst uint64 `json:"min_first"`
	MaxFirst uint64 `json:"max_first"`
	MinLast  uint64 `json:"min_last"`
	MaxLast  uint64 `json:"max_last"`
	Behind   int    `json:"behind"`
	// LatN counts the stamped deliveries since start; P50Us, P99Us and
	// MaxUs are their latencies' percentiles, in microseconds.
	LatN  int64 `json:"lat_n"`
	P50Us int64 `json:"p50_us"`
	P99Us int64 `json:"p99_us"`
	MaxUs int64 `json:"max_us"`
}

// runFanoutClient is the client process's main; it returns the exit code.
func runFanoutClient(args []string) int {
	if len(args) > 0 {
		fmt.Fprintf(os.Stderr, "bench %s: unexpected arguments %q\n", fanoutClientArg, args)
		return 2
	}
	fc := &fanoutClientProc{out: bufio.NewWriter(os.Stdout)}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		fc.closeSet() // exiting would close the sockets too, less politely
		os.Exit(1)
	}()
	fc.emit(fanoutReply{Type: "hello", NoFile: raiseNofile()})

	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 64<<10), 16<<20)
	for in.Scan() {
		var cmd fanoutCommand
		if err := json.Unmarshal(in.Bytes(), &cmd); err != nil {
			fc.emit(fanoutReply{Type: "error", Err: "bad command: " + err.Error()})
			continue
		}
		switch cmd.Cmd {
		case "connect":
			fc.connect(&cmd)
		case "status":
			fc.status()
		case "start":
			fc.start()
		case "report":
			fc.report(&cmd)
		case "track":
			fc.track(&cmd)
		case "close":
			fc.closeSet()
			fc.emit(fanoutReply{Type: "closed"})
		default:
			fc.emit(fanoutReply{Type: "error", Err: "unknown command " + strconv.Quote(cmd.Cmd)})
		}
	}
	// stdin closed: the bench is done with us (or gone).
	fc.closeSet()
	return 0
}

// fanoutClientProc is the state of the client process.
type fanoutClientProc struct {
	outMu sync.Mutex
	out   *bufio.Writer

	mu  sync.Mutex
	set *clientSet // the open sockets, nil when none
	// cpuStart is the process CPU time at the last start.
	cpuStart time.Duration
}

// emit writes one reply line.
func (fc *fanoutClientProc) emit(r fanoutReply) {
	fc.outMu.Lock()
	defer fc.outMu.Unlock()
	b, err := json.Marshal(r)
	if err != nil {
		b, _ = json.Marshal(fanoutReply{Type: "error", Err: err.Error()})
	}
	fc.out.Write(b)
	fc.out.WriteByte('\n')
	fc.out.Flush()
}

// clientSet is the sockets opened by one connect.
type clientSet struct {
	mu     sync.Mutex
	conns  []*clientConn
	wg     sync.WaitGroup // reader goroutines
	primed atomic.Int64
	total  atomic.Int64
	ended  atomic.Int64
	// closing is set before the sockets are closed on purpose.
	closing atomic.Bool
	// sample is the first delivery received.
	sampleOnce sync.Once
	sample     atomic.Pointer[string]
	// track and hist: see the file comment.
	track bool
	hist  latencyHist
}

// clientConn is one socket and what it received.
type clientConn struct {
	ws      *websocket.Conn
	graphql bool
	primed  bool // reader only

	mu      sync.Mutex
	samples []delivery
	// seq is the sequence check of a tracked socket.
	seq seqCheck
}

// seqCheck is what a tracked subscription received: its first and last
// sequences, its deliveries, and how often a sequence skipped or did not
// rise.
type seqCheck struct {
	first, last          uint64
	count, gaps, repeats int64
}

// see checks sequence s, the next delivery.
func (c *seqCheck) see(s uint64) {
	switch {
	case c.count == 0:
		c.first = s
	case s <= c.last:
		c.repeats++
	case s > c.last+1:
		c.gaps++
	}
	c.count++
	c.last = max(c.last, s)
}

// delivery is one received event: its stamp and its latency, in
// nanoseconds.
type delivery struct{ stamp, latency int64 }

var (
	stampKeyBytes = []byte(stampKey)
	sequenceKey   = []byte(`"sequence":"`)
	typePing      = []byte(`"type":"ping"`)
	typeComplete  = []byte(`"type":"complete"`)
	typeError     = []byte(`"type":"error"`)
	msgPong       = []byte(`{"type":"pong"}`)
)

// connect opens cmd.N sockets to cmd.URL, subscribing each when cmd.GraphQL.
func (fc *fanoutClientProc) connect(cmd *fanoutCommand) {
	fc.closeSet()
	set := &clientSet{track: cmd.Track}
	fc.mu.Lock()
	fc.set = set
	fc.mu.Unlock()

	d := websocket.Dialer{HandshakeTimeout: 30 * time.Second}
	var subMsg []byte
	if cmd.GraphQL {
		d.Subprotocols = []string{"graphql-transport-ws"}
		subMsg, _ = json.Marshal(map[string]any{"id": "1", "type": "subscribe", "payload": cmd.Subscribe})
	}
	var (
		failed   atomic.Int64
		errOnce  sync.Once
		firstErr string
		dials    sync.WaitGroup
		sem      = make(chan struct{}, dialConcurrency)
	)
	for i := range cmd.N {
		var initMsg []byte
		if cmd.GraphQL {
			auth := ""
			if i < len(cmd.Auths) {
				auth = cmd.Auths[i]
			}
			initMsg, _ = json.Marshal(map[string]any{"type": "connection_init", "payload": map[string]any{"Authorization": auth}})
		}
		sem <- struct{}{}
		dials.Go(func() {
			defer func() { <-sem }()
			c, err := dialOne(&d, cmd.URL, initMsg, subMsg)
			if err != nil {
				failed.Add(1)
				errOnce.Do(func() { firstErr = err.Error() })
				return
			}
			set.mu.Lock()
			set.conns = append(set.conns, c)
			set.mu.Unlock()
			set.wg.Go(func() { set.read(c) })
		})
	}
	dials.Wait()
	set.mu.Lock()
	n := len(set.conns)
	set.mu.Unlock()
	fc.emit(fanoutReply{Type: "connected", N: n, Failed: int(failed.Load()), Err: firstErr})
}

// dialOne opens one socket; with initMsg it completes the
// graphql-transport-ws handshake and sends subMsg.
func dialOne(d *websocket.Dialer, url string, initMsg, subMsg []byte) (*clientConn, error) {
	ws, resp, err := d.Dial(url, nil)
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		return nil, err
	}
	c := &clientConn{ws: ws, graphql: initMsg != nil}
	if initMsg == nil {
		return c, nil
	}
	fail := func(err error) (*clientConn, error) {
		ws.Close()
		return nil, err
	}
	if err := ws.WriteMessage(websocket.TextMessage, initMsg); err != nil {
		return fail(err)
	}
	_ = ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		_, msg, err := ws.ReadMessage()
		if err != nil {
			return fail(fmt.Errorf("waiting for connection_ack: %w", err))
		}
		if bytes.Contains(msg, []byte(`"type":"connection_ack"`)) {
			break
		}
		if bytes.Contains(msg, typePing) {
			if err := ws.WriteMessage(websocket.TextMessage, msgPong); err != nil {
				return fail(err)
			}
		}
	}
	_ = ws.SetReadDeadline(time.Time{})
	if err := ws.WriteMessage(websocket.TextMessage, subMsg); err != nil {
		return fail(err)
	}
	return c, nil
}

// read receives c's messages until the socket closes: it stamps each
// delivery with its latency, and answers graphql-transport-ws pings.
// Control frames (ping, close) are answered by gorilla within NextReader.
func (s *clientSet) read(c *clientConn) {
	var buf []byte
	for {
		_, r, err := c.ws.NextReader()
		if err == nil {
			buf, err = appendAll(buf[:0], r)
		}
		if err != nil {
			if !s.closing.Load() {
				s.ended.Add(1)
			}
			return
		}
		now := time.Now().UnixNano()
		if s.track {
			if seq, ok := parseSequence(buf); ok {
				s.tracked(c, buf, seq, now)
				continue
			}
		} else if i := bytes.Index(buf, stampKeyBytes); i >= 0 {
			stamp, ok := parseStamp(buf[i+len(stampKey):])
			if !ok {
				continue
			}
			c.mu.Lock()
			c.samples = append(c.samples, delivery{stamp: stamp, latency: now - stamp})
			c.mu.Unlock()
			s.total.Add(1)
			if !c.primed {
				c.primed = true
				s.primed.Add(1)
				s.sampleOnce.Do(func() {
					msg := string(buf)
					s.sample.Store(&msg)
				})
			}
			continue
		}
		if !c.graphql {
			continue
		}
		switch {
		case bytes.Contains(buf, typePing):
			if err := c.ws.WriteMessage(websocket.TextMessage, msgPong); err != nil && !s.closing.Load() {
				s.ended.Add(1)
				return
			}
		case bytes.Contains(buf, typeComplete), bytes.Contains(buf, typeError):
			s.ended.Add(1)
			fmt.Fprintf(os.Stderr, "bench %s: subscription ended: %s\n", fanoutClientArg, truncate(buf, 300))
		}
	}
}

// tracked notes a tracked delivery of sequence seq, received at now.
func (s *clientSet) tracked(c *clientConn, msg []byte, seq uint64, now int64) {
	c.mu.Lock()
	c.seq.see(seq)
	c.mu.Unlock()
	if i := bytes.Index(msg, stampKeyBytes); i >= 0 {
		if stamp, ok := parseStamp(msg[i+len(stampKey):]); ok {
			s.hist.add((now - stamp) / 1000)
		}
	}
	s.total.Add(1)
	if !c.primed {
		c.primed = true
		s.primed.Add(1)
		s.sampleOnce.Do(func() {
			m := string(msg)
			s.sample.Store(&m)
		})
	}
}

// parseSequence returns the decimal string after the message's first
// "sequence" key.
func parseSequence(msg []byte) (uint64, bool) {
	i := bytes.Index(msg, sequenceKey)
	if i < 0 {
		return 0, false
	}
	rest := msg[i+len(sequenceKey):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return 0, false
	}
	v, err := strconv.ParseUint(string(rest[:j]), 10, 64)
	return v, err == nil
}

// appendAll appends everything r yields to b.
func appendAll(b []byte, r io.Reader) ([]byte, error) {
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if errors.Is(err, io.EOF) {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

// parseStamp parses the stamp's digits up to the closing quote.
func parseStamp(b []byte) (int64, bool) {
	if len(b) < stampDigits+1 || b[stampDigits] != '"' {
		return 0, false
	}
	var v int64
	for _, d := range b[:stampDigits] {
		if d < '0' || d > '9' {
			return 0, false
		}
		v = v*10 + int64(d-'0')
	}
	return v, true
}

// current returns the open set, or nil.
func (fc *fanoutClientProc) current() *clientSet {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	return fc.set
}

func (fc *fanoutClientProc) status() {
	r := fanoutReply{Type: "status"}
	if s := fc.current(); s != nil {
		s.mu.Lock()
		r.N = len(s.conns)
		s.mu.Unlock()
		r.Primed = int(s.primed.Load())
		r.Total = s.total.Load()
		r.Ended = int(s.ended.Load())
		if p := s.sample.Load(); p != nil {
			r.Sample = *p
		}
	}
	fc.emit(r)
}

func (fc *fanoutClientProc) start() {
	if s := fc.current(); s != nil {
		s.mu.Lock()
		for _, c := range s.conns {
			c.mu.Lock()
			c.samples = c.samples[:0]
			c.mu.Unlock()
		}
		s.mu.Unlock()
		s.hist.reset()
	}
	fc.mu.Lock()
	fc.cpuStart = processCPU()
	fc.mu.Unlock()
	fc.emit(fanoutReply{Type: "started"})
}

// report waits for the expected deliveries (or the wait) and writes the
// latencies of those of events stamped in [from, to).
func (fc *fanoutClientProc) report(cmd *fanoutCommand) {
	s := fc.current()
	if s == nil {
		fc.emit(fanoutReply{Type: "error", Err: "report without connections"})
		return
	}
	s.mu.Lock()
	conns := append([]*clientConn(nil), s.conns...)
	s.mu.Unlock()
	count := func() (delivered, received int64) {
		for _, c := range conns {
			c.mu.Lock()
			for _, d := range c.samples {
				if d.stamp >= cmd.From && d.stamp < cmd.To {
					delivered++
				}
				if at := d.stamp + d.latency; at >= cmd.From && at < cmd.To {
					received++
				}
			}
			c.mu.Unlock()
		}
		return delivered, received
	}
	deadline := time.Now().Add(time.Duration(cmd.WaitMs) * time.Millisecond)
	delivered, received := count()
	for delivered < cmd.Expect && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		delivered, received = count()
	}
	fc.mu.Lock()
	cpu := processCPU() - fc.cpuStart
	fc.mu.Unlock()

	var lat []int64
	for _, c := range conns {
		c.mu.Lock()
		for _, d := range c.samples {
			if d.stamp >= cmd.From && d.stamp < cmd.To {
				lat = append(lat, d.latency/1000)
			}
		}
		c.mu.Unlock()
	}
	for len(lat) > 0 {
		n := min(len(lat), samplesPerLine)
		fc.emit(fanoutReply{Type: "samples", LatencyUs: lat[:n]})
		lat = lat[n:]
	}
	fc.emit(fanoutReply{Type: "report", Delivered: delivered, Received: received,
		Ended: int(s.ended.Load()), CPUNs: cpu.Nanoseconds()})
}

// track waits until every tracked subscription's last sequence is at least
// cmd.Expect (or cmd.WaitMs), then reports their sequence checks.
func (fc *fanoutClientProc) track(cmd *fanoutCommand) {
	s := fc.current()
	if s == nil || !s.track {
		fc.emit(fanoutReply{Type: "error", Err: "track without tracked connections"})
		return
	}
	s.mu.Lock()
	conns := append([]*clientConn(nil), s.conns...)
	s.mu.Unlock()
	sum := func() *trackReport {
		r := &trackReport{Subscriptions: len(conns), MinFirst: math.MaxUint64, MinLast: math.MaxUint64}
		for _, c := range conns {
			c.mu.Lock()
			q := c.seq
			c.mu.Unlock()
			r.Deliveries += q.count
			r.Gaps += q.gaps
			r.Repeats += q.repeats
			if q.count == 0 {
				r.MinFirst, r.MinLast = 0, 0
			} else {
				r.MinFirst, r.MaxFirst = min(r.MinFirst, q.first), max(r.MaxFirst, q.first)
				r.MinLast, r.MaxLast = min(r.MinLast, q.last), max(r.MaxLast, q.last)
			}
			if q.count == 0 || q.last < uint64(cmd.Expect) {
				r.Behind++
			}
		}
		if len(conns) == 0 {
			r.MinFirst, r.MinLast = 0, 0
		}
		return r
	}
	deadline := time.Now().Add(time.Duration(cmd.WaitMs) * time.Millisecond)
	r := sum()
	for r.Behind > 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		r = sum()
	}
	r.LatN = s.hist.total.Load()
	r.P50Us, r.P99Us, r.MaxUs = s.hist.quantile(0.5), s.hist.quantile(0.99), s.hist.max.Load()
	fc.emit(fanoutReply{Type: "track", Tracking: r})
}

// closeSet closes every open socket, politely (close frame 1000) and
// quickly, and waits for the readers.
func (fc *fanoutClientProc) closeSet() {
	fc.mu.Lock()
	s := fc.set
	fc.set = nil
	fc.mu.Unlock()
	if s == nil {
		return
	}
	s.closing.Store(true)
	s.mu.Lock()
	conns := s.conns
	s.mu.Unlock()
	msg := websocket.FormatCloseMessage(websocket.CloseNormalClosure, "")
	deadline := time.Now().Add(time.Second)
	for _, c := range conns {
		_ = c.ws.WriteControl(websocket.CloseMessage, msg, deadline)
		_ = c.ws.Close()
	}
	s.wg.Wait()
}

// raiseNofile raises RLIMIT_NOFILE's soft limit to the hard limit and
// returns the soft limit in force.
func raiseNofile() uint64 {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0
	}
	if lim.Cur < lim.Max {
		raised := lim
		raised.Cur = raised.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised); err == nil {
			lim = raised
		}
	}
	return lim.Cur
}

// processCPU returns the CPU time (user and system) of this process so
// far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// fanoutProc is the client process: the bench re-executed with
// fanoutClientArg.
type fanoutProc struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	replies chan fanoutReply
	// waitDone is closed when the process has exited.
	waitDone chan struct{}
	// nofile is the client's RLIMIT_NOFILE soft limit.
	nofile uint64
}

// startFanoutProc starts the client process and waits for its hello.
func startFanoutProc(ctx context.Context) (*fanoutProc, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	p := &fanoutProc{cmd: exec.Command(exe, fanoutClientArg), replies: make(chan fanoutReply, 64), waitDone: make(chan struct{})}
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
			var r fanoutReply
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				r = fanoutReply{Type: "error", Err: "unreadable reply: " + truncate(sc.Bytes(), 200)}
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
	p.nofile = hello.NoFile
	return p, nil
}

// exited reports whether the client process has ended.
func (p *fanoutProc) exited() bool {
	select {
	case <-p.waitDone:
		return true
	default:
		return false
	}
}

// send writes cmd to the client process.
func (p *fanoutProc) send(cmd fanoutCommand) error {
	b, err := json.Marshal(cmd)
	if err != nil {
		return err
	}
	if _, err := p.stdin.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("client process: %w", err)
	}
	return nil
}

// call sends cmd and waits up to timeout for the reply of type typ.
func (p *fanoutProc) call(ctx context.Context, cmd fanoutCommand, typ string, timeout time.Duration) (fanoutReply, error) {
	if err := p.send(cmd); err != nil {
		return fanoutReply{}, err
	}
	return p.await(ctx, typ, timeout)
}

// await returns the next reply of type typ, skipping stale replies of
// other types (answers to a call that timed out).
func (p *fanoutProc) await(ctx context.Context, typ string, timeout time.Duration) (fanoutReply, error) {
	return collectReplies(ctx, p.replies, "client process", typ, "", nil, timeout)
}

// report sends a report command and collects its latencies and its final
// line.
func (p *fanoutProc) report(ctx context.Context, cmd fanoutCommand, timeout time.Duration) ([]int64, fanoutReply, error) {
	var lat []int64
	if err := p.send(cmd); err != nil {
		return nil, fanoutReply{}, err
	}
	r, err := collectReplies(ctx, p.replies, "client process", "report", "samples",
		func(r fanoutReply) { lat = append(lat, r.LatencyUs...) }, timeout)
	if err != nil {
		return nil, r, err
	}
	return lat, r, nil
}

// stop closes the client's stdin (it closes its sockets and exits), then
// signals it if it lingers.
func (p *fanoutProc) stop() {
	_ = p.stdin.Close()
	for _, step := range []struct {
		wait time.Duration
		sig  os.Signal
	}{{30 * time.Second, syscall.SIGTERM}, {5 * time.Second, syscall.SIGKILL}, {5 * time.Second, nil}} {
		select {
		case <-p.waitDone:
			return
		case <-time.After(step.wait):
		}
		if step.sig != nil {
			_ = p.cmd.Process.Signal(step.sig)
		}
	}
	fmt.Fprintf(os.Stderr, "bench: live-fanout: client process %d did not exit\n", p.cmd.Process.Pid)
}
