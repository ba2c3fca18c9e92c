package webhook

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// benchPayload is a payload of the webhook-delivery benchmark's size.
var benchPayload = []byte(`{"type":"bench.x","data":{` + strings.Repeat(`"k":"v",`, 110) + `"z":1}}`)

// benchID is the webhook-id of the benchmarks' requests.
const benchID = "msg_2Lh9KTrj0XJrXDZyWSvS8Cp1lLm"

// newBenchReceiver starts a local TLS receiver that answers 200 with an
// empty body.
func newBenchReceiver(b *testing.B) *testServer {
	b.Helper()
	srv := newServer(&testing.T{}, "127.0.0.1:0", true, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
	}))
	b.Cleanup(srv.Close)
	return srv
}

// reportCPU starts counting the process's CPU time (user and system, all
// threads: sender, transport and receiver alike) and returns the function
// that reports it per op as cpu-ns/op. On a shared machine it varies less
// than ns/op, which also counts the time the benchmark waits for a core.
func reportCPU(b *testing.B) func() {
	start := processCPU(b)
	return func() {
		b.ReportMetric(float64(processCPU(b)-start)/float64(b.N), "cpu-ns/op")
	}
}

// processCPU returns the CPU time the process has used so far.
func processCPU(b *testing.B) time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		b.Fatal(err)
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

// jobContextKey keys jobContext's values.
type jobContextKey int

// jobContext returns a context like a delivery job's, which Send gets: a
// deadline (the job's timeout) under a chain of values (River's and ours).
func jobContext() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	for i := range 12 {
		ctx = context.WithValue(ctx, jobContextKey(i), i)
	}
	return ctx, cancel
}

// BenchmarkSend is one signed delivery attempt of a payload of the
// webhook-delivery benchmark's size to a local TLS receiver over a kept-
// alive connection: the sender's per-request cost (allocs/op is the stable
// figure on a shared machine). BenchmarkSendPlainClient is its baseline.
func BenchmarkSend(b *testing.B) {
	srv := newBenchReceiver(b)
	s := NewSender(SenderConfig{AllowPrefixes: loopbackPrefixes, RootCAs: srv.pool()})
	defer s.CloseIdleConnections()
	_, key, err := NewSecret()
	if err != nil {
		b.Fatal(err)
	}
	r := Request{URL: srv.URL + "/hook", ID: benchID, Body: benchPayload, Keys: [][]byte{key}}
	ctx, cancel := jobContext()
	defer cancel()
	b.ReportAllocs()
	defer reportCPU(b)()
	pprof.SetGoroutineLabels(pprof.WithLabels(ctx, pprof.Labels("side", "sender")))
	defer pprof.SetGoroutineLabels(ctx)
	for b.Loop() {
		r.Timestamp = time.Now()
		if res := s.Send(ctx, r); !res.Delivered {
			b.Fatalf("not delivered: %+v", res)
		}
	}
}

// BenchmarkSendPlainClient is BenchmarkSend's request made as the
// webhook-delivery benchmark's baseline makes it (post and baselineClient
// in internal/bench/webhook_delivery.go): a plain net/http client with a
// timeout posting the same signed payload and reading the answer.
func BenchmarkSendPlainClient(b *testing.B) {
	srv := newBenchReceiver(b)
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig.RootCAs = srv.pool()
	t.DisableCompression = true
	c := &http.Client{Transport: t, Timeout: DefaultTimeout}
	defer c.CloseIdleConnections()
	_, key, err := NewSecret()
	if err != nil {
		b.Fatal(err)
	}
	url := srv.URL + "/hook"
	// The bench's workers post under a context of their own run.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b.ReportAllocs()
	defer reportCPU(b)()
	pprof.SetGoroutineLabels(pprof.WithLabels(ctx, pprof.Labels("side", "plain")))
	defer pprof.SetGoroutineLabels(ctx)
	for b.Loop() {
		ts := time.Now()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(benchPayload))
		if err != nil {
			b.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Webhook-Id", benchID)
		req.Header.Set("Webhook-Timestamp", strconv.FormatInt(ts.Unix(), 10))
		req.Header.Set("Webhook-Signature", Sign(benchID, ts, benchPayload, [][]byte{key}))
		req.Header.Set("User-Agent", DefaultUserAgent)
		resp, err := c.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("HTTP %d", resp.StatusCode)
		}
	}
}

// BenchmarkSign signs a payload of the webhook-delivery benchmark's size
// with one key.
func BenchmarkSign(b *testing.B) {
	_, key, err := NewSecret()
	if err != nil {
		b.Fatal(err)
	}
	ts := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		_ = Sign(benchID, ts, benchPayload, [][]byte{key})
	}
}

// BenchmarkSignReusedMACs is BenchmarkSign as a Sender signs: from keyed
// HMAC states it reuses.
func BenchmarkSignReusedMACs(b *testing.B) {
	_, key, err := NewSecret()
	if err != nil {
		b.Fatal(err)
	}
	macs := newMACCache()
	ts := []byte(strconv.FormatInt(time.Now().Unix(), 10))
	b.ReportAllocs()
	for b.Loop() {
		_ = signature(benchID, ts, benchPayload, [][]byte{key}, macs)
	}
}
