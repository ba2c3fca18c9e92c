package main

// The live-fanout scenario: S GraphQL subscriptions (graphql-transport-ws
// over WebSocket) on one project, served in process, fed by events recorded
// at a fixed rate, against a plain gorilla/websocket broadcast of the same
// bytes to the same number of sockets (fanout_baseline.go). The clients run
// in a separate process (fanout_client.go), so that the CPU time and heap
// measured here are the server's.
//
// Each row runs ours, then the baseline (not interleaved as the other
// scenarios are: each side needs its own S sockets, and switching sides
// means reconnecting them all). With BENCH_FANOUT_DEBUG set in the
// environment, the bench prints each side's delivered message and raw
// counts to stderr.

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/auth"
	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/live"
	"github.com/aetheriot/aether-audit/server"
	"github.com/aetheriot/aether-audit/store"
)

const (
	// fanoutSubscription is what every subscriber selects: what a live
	// audit view shows of an event.
	fanoutSubscription = `subscription Fanout($p: ID!) {
  auditEventRecorded(projectId: $p) {
    id sequence action occurredAt recordedAt
    subject { type id }
    resource { type id }
    outcome details
  }
}`
	// issueSubscribers and issueRate are the load of the issue's target:
	// "4,000 subscribers at 10 events/s held with p99 <= 250 ms".
	issueSubscribers = 4000
	issueRate        = 10
	issueP99         = 250 * time.Millisecond

	// Targets of ours, absolute or relative to the baseline.
	fanoutMinDeliveryRatio = 0.5
	fanoutMaxP99Ratio      = 2.0
	// fanoutMaxMemPerSub bounds the memory an idle subscriber holds: its
	// share of the live heap plus its goroutines' stacks (issue 17).
	fanoutMaxMemPerSub   = 24 << 10 // bytes
	fanoutMaxCPUPerDeliv = 15 * time.Microsecond

	// fanoutWarmUp is sent (and delivered) before the measured window.
	fanoutWarmUp = 2 * time.Second
	// fanoutDrain is how long, after the window, deliveries of its events
	// may still arrive; later ones count as missing.
	fanoutDrain = 10 * time.Second
	// fanoutResend is how often priming sends another event.
	fanoutResend = 2 * time.Second
	// fanoutPrimeTimeout bounds the wait for every subscription to receive
	// its first event.
	fanoutPrimeTimeout = 60 * time.Second
	// serverFDMargin and clientFDMargin are the descriptors each process
	// needs besides its sockets (database pool, listeners, pipes, ...).
	serverFDMargin = 512
	clientFDMargin = 128
)

// fanoutRow is one row of the scenario: S subscribers at a rate.
type fanoutRow struct {
	subscribers int
	// requested is the S asked for, when descriptors or ports forced
	// fewer; scaledBy says which.
	requested int
	scaledBy  string
	rate      float64
	// p99Max, when set, is an absolute p99 target for ours.
	p99Max time.Duration
}

func (r fanoutRow) name() string {
	return fmt.Sprintf("live-fanout %d@%g/s", r.subscribers, r.rate)
}

// fanoutRows returns the rows to run: each of -fanout-subscribers at
// -fanout-rate, and the issue's 4,000 at 10 events/s with its absolute p99
// target (merged into an equal row).
func fanoutRows(opts options) []fanoutRow {
	var rows []fanoutRow
	issue := false
	for _, s := range opts.fanoutSubscribers {
		r := fanoutRow{subscribers: s, rate: opts.fanoutRate}
		if s == issueSubscribers && opts.fanoutRate == issueRate {
			r.p99Max, issue = issueP99, true
		}
		rows = append(rows, r)
	}
	if !issue && !opts.fanoutOnlyListed {
		rows = append(rows, fanoutRow{subscribers: issueSubscribers, rate: issueRate, p99Max: issueP99})
	}
	return rows
}

// runLiveFanout runs every row: ours, then the baseline, each with its own
// S sockets from the client process.
func runLiveFanout(ctx context.Context, e *env, opts options) ([]result, error) {
	serverNofile := raiseNofile()
	client, err := startFanoutProc(ctx)
	if err != nil {
		return nil, fmt.Errorf("starting the client process: %w", err)
	}
	defer client.stop()

	maxS, why := fanoutCapacity(serverNofile, client.nofile)
	var rows []fanoutRow
	for _, r := range fanoutRows(opts) {
		if r.subscribers > maxS {
			r.requested, r.subscribers, r.scaledBy = r.subscribers, maxS, why
			fmt.Fprintf(os.Stderr, "bench: live-fanout: %d subscribers scaled down to %d (%s)\n", r.requested, maxS, why)
		}
		// Rows scaled to the same load run once, with the targets of both.
		i := slices.IndexFunc(rows, func(o fanoutRow) bool { return o.subscribers == r.subscribers && o.rate == r.rate })
		if i < 0 {
			rows = append(rows, r)
			continue
		}
		if r.requested > rows[i].requested {
			rows[i].requested, rows[i].scaledBy = r.requested, r.scaledBy
		}
		rows[i].p99Max = max(rows[i].p99Max, r.p99Max)
	}

	base, err := startBroadcastServer()
	if err != nil {
		return nil, err
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := base.close(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "bench: live-fanout:", err)
		}
	}()

	idle := runtime.NumGoroutine()
	var (
		results []result
		errs    []error
	)
	for _, row := range rows {
		fmt.Fprintf(os.Stderr, "bench: live-fanout: %d subscribers at %g events/s\n", row.subscribers, row.rate)
		r, err := runFanoutRow(ctx, e, client, base, row, opts, idle)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", row.name(), err))
			if ctx.Err() != nil || client.exited() {
				break
			}
			continue
		}
		results = append(results, r)
	}
	return results, errors.Join(errs...)
}

// fanoutCapacity returns the most sockets a side can open given both
// processes' descriptor limits and the ephemeral port range, and which one
// binds.
func fanoutCapacity(serverNofile, clientNofile uint64) (int, string) {
	limit, why := math.MaxInt, ""
	consider := func(n int, reason string) {
		if n < limit {
			limit, why = n, reason
		}
	}
	consider(int(min(serverNofile, math.MaxInt32))-serverFDMargin, fmt.Sprintf("server RLIMIT_NOFILE %d", serverNofile))
	consider(int(min(clientNofile, math.MaxInt32))-clientFDMargin, fmt.Sprintf("client RLIMIT_NOFILE %d", clientNofile))
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		var lo, hi int
		if _, err := fmt.Sscan(string(b), &lo, &hi); err == nil && hi > lo {
			consider(hi-lo+1-1000, fmt.Sprintf("ephemeral ports %d-%d", lo, hi))
		}
	}
	return max(limit, 1), why
}

// runFanoutRow measures one row: ours, on a server of its own (so that its
// token cache starts empty), whose first delivery becomes the baseline's
// message; then the baseline.
func runFanoutRow(ctx context.Context, e *env, client *fanoutProc, base *broadcastServer,
	row fanoutRow, opts options, idle int) (result, error) {
	project := fmt.Sprintf("live-fanout-%s-%d-%g", e.runID, row.subscribers, row.rate)
	sub, err := json.Marshal(map[string]any{"query": fanoutSubscription, "variables": map[string]any{"p": project}})
	if err != nil {
		return result{}, err
	}
	plan := fanoutPlan{n: row.subscribers, rate: row.rate, warm: fanoutWarmUp, measure: opts.duration, drain: fanoutDrain}

	settle(idle)
	ours, err := startFanoutOurs(ctx, e)
	if err != nil {
		return result{}, err
	}
	defer ours.close()
	op := plan
	op.label, op.url, op.graphql, op.subscribe = "ours", ours.wsURL, true, sub
	if op.auths, err = ours.tokens(row.subscribers); err != nil {
		return result{}, err
	}
	rec, err := newFanoutRecorder(ours, project)
	if err != nil {
		return result{}, err
	}
	op.send = rec.record
	o, err := measureFanoutSide(ctx, client, op, idle)
	if err != nil {
		return result{}, fmt.Errorf("ours: %w", err)
	}
	ours.close()

	sender, err := newBaselineSender(base, o.sample)
	if err != nil {
		return result{}, err
	}
	bp := plan
	bp.label, bp.url, bp.send = "baseline", base.url, sender.send
	b, err := measureFanoutSide(ctx, client, bp, idle)
	if err != nil {
		return result{}, fmt.Errorf("baseline: %w", err)
	}
	return fanoutResult(row, plan, o, b), nil
}

// fanoutPlan is how one side of a row runs.
type fanoutPlan struct {
	label   string
	url     string
	graphql bool
	// auths are the sockets' Authorization values, one each.
	auths     []string
	subscribe json.RawMessage
	n         int
	rate      float64
	warm      time.Duration
	measure   time.Duration
	drain     time.Duration
	// send records (ours) or broadcasts (baseline) one event stamped with
	// stamp.
	send func(ctx context.Context, stamp time.Time) error
}

// fanoutMeasurement is what one side of a row achieved.
type fanoutMeasurement struct {
	// Per idle subscription (socket): heap and stack bytes, goroutines.
	heapPerSub, stackPerSub, goroutinesPerSub float64
	// latUs are the latencies of the deliveries of the window's events,
	// sorted, in microseconds.
	latUs []int64
	// events counts the events sent in the window; expected is events
	// times subscribers; delivered counts those that arrived within the
	// drain; received counts deliveries received during the window.
	events, expected, delivered, received int64
	// missingBound is a lower bound of a missing delivery's latency.
	missingBound time.Duration
	window       time.Duration
	// cpu is this process's CPU time during the window; clientCPU the
	// client process's over clientSpan, from the start of sending until
	// the report.
	cpu, clientCPU, clientSpan time.Duration
	// sample is one delivered message; sendLat the send (record) times.
	sample  string
	sendLat []time.Duration
	ended   int
	connect time.Duration
}

// measureFanoutSide connects plan.n sockets, primes them (every one has
// received an event), measures the idle heap, then sends at plan.rate for
// the warm-up and the window and collects the latencies; it closes the
// sockets whatever happens.
func measureFanoutSide(ctx context.Context, client *fanoutProc, plan fanoutPlan, idle int) (m fanoutMeasurement, err error) {
	settle(idle)
	before := takeMemSnapshot()
	t := time.Now()
	conn, err := client.call(ctx, fanoutCommand{Cmd: "connect", URL: plan.url, N: plan.n, GraphQL: plan.graphql,
		Auths: plan.auths, Subscribe: plan.subscribe}, "connected", 30*time.Second+time.Duration(plan.n)*10*time.Millisecond)
	defer func() {
		if _, cerr := client.call(context.WithoutCancel(ctx), fanoutCommand{Cmd: "close"}, "closed", time.Minute); cerr != nil && err == nil {
			err = fmt.Errorf("closing the sockets: %w", cerr)
		}
	}()
	if err != nil {
		return m, err
	}
	m.connect = time.Since(t)
	if conn.N < plan.n {
		return m, fmt.Errorf("only %d of %d sockets opened (%d failed; first error: %s)", conn.N, plan.n, conn.Failed, conn.Err)
	}

	st, err := primeSubscribers(ctx, client, plan.send)
	if err != nil {
		return m, err
	}
	m.sample = st.Sample
	if os.Getenv("BENCH_FANOUT_DEBUG") != "" {
		fmt.Fprintf(os.Stderr, "bench: live-fanout: %s delivery (%d bytes): %s\n", plan.label, len(m.sample), m.sample)
	}
	after := takeMemSnapshot()
	n := float64(plan.n)
	m.heapPerSub = float64(int64(after.heap)-int64(before.heap)) / n
	m.stackPerSub = float64(int64(after.stack)-int64(before.stack)) / n
	m.goroutinesPerSub = float64(after.goroutines-before.goroutines) / n

	if _, err := client.call(ctx, fanoutCommand{Cmd: "start"}, "started", 30*time.Second); err != nil {
		return m, err
	}
	started := time.Now()
	var w fanoutWindow
	pprof.Do(ctx, pprof.Labels("side", plan.label, "scenario", "live-fanout"), func(ctx context.Context) {
		w, err = driveFanout(ctx, plan)
	})
	if err != nil {
		return m, err
	}
	m.events = w.events
	m.expected = w.events * int64(plan.n)
	m.window = w.t1.Sub(w.t0)
	m.cpu = w.cpu
	m.sendLat = w.sendLat
	lat, rep, err := client.report(ctx, fanoutCommand{Cmd: "report", From: w.t0.UnixNano(), To: w.t1.UnixNano(),
		Expect: m.expected, WaitMs: plan.drain.Milliseconds()}, plan.drain+2*time.Minute)
	if err != nil {
		return m, err
	}
	m.missingBound = time.Since(w.t1)
	slices.Sort(lat)
	m.latUs = lat
	m.delivered, m.received, m.ended = rep.Delivered, rep.Received, rep.Ended
	m.clientCPU = time.Duration(rep.CPUNs)
	m.clientSpan = time.Since(started)
	if os.Getenv("BENCH_FANOUT_DEBUG") != "" {
		fmt.Fprintf(os.Stderr, "bench: live-fanout: %s: %d events in the window, %d of %d deliveries within the drain, %d received in the window, report after %s, cpu %s\n",
			plan.label, m.events, m.delivered, m.expected, m.received, m.missingBound.Round(time.Millisecond), m.cpu.Round(time.Millisecond))
	}
	return m, nil
}

// primeSubscribers sends an event (again every fanoutResend, for
// subscriptions established after it) until every subscription of the
// client has received one, so that each is established (subscribe has no
// acknowledgement); then it waits until deliveries stop, so that the
// sockets are idle. It returns the last status.
func primeSubscribers(ctx context.Context, client *fanoutProc, send func(ctx context.Context, stamp time.Time) error) (fanoutReply, error) {
	deadline := time.Now().Add(fanoutPrimeTimeout)
	var (
		lastSend time.Time
		st       fanoutReply
		err      error
	)
	for {
		if time.Since(lastSend) >= fanoutResend {
			if err := send(ctx, time.Now()); err != nil {
				return st, fmt.Errorf("priming: %w", err)
			}
			lastSend = time.Now()
		}
		if err := sleepCtx(ctx, 250*time.Millisecond); err != nil {
			return st, err
		}
		if st, err = client.call(ctx, fanoutCommand{Cmd: "status"}, "status", 30*time.Second); err != nil {
			return st, err
		}
		if st.Ended > 0 {
			return st, fmt.Errorf("%d subscriptions ended while priming (see the client's log above)", st.Ended)
		}
		if st.Primed >= st.N {
			break
		}
		if time.Now().After(deadline) {
			return st, fmt.Errorf("only %d of %d subscriptions received an event within %s", st.Primed, st.N, fanoutPrimeTimeout)
		}
	}
	for total := int64(-1); total != st.Total && time.Now().Before(deadline); {
		total = st.Total
		if err := sleepCtx(ctx, 500*time.Millisecond); err != nil {
			return st, err
		}
		if st, err = client.call(ctx, fanoutCommand{Cmd: "status"}, "status", 30*time.Second); err != nil {
			return st, err
		}
	}
	return st, nil
}

// fanoutWindow is what driveFanout measured.
type fanoutWindow struct {
	t0, t1  time.Time
	events  int64
	cpu     time.Duration
	sendLat []time.Duration
}

// driveFanout sends at plan.rate, each event in its own goroutine so that a
// slow send does not lower the rate, for plan.warm and then the window of
// plan.measure, and takes this process's CPU time at the window's ends.
func driveFanout(ctx context.Context, plan fanoutPlan) (fanoutWindow, error) {
	interval := time.Duration(float64(time.Second) / plan.rate)
	start := time.Now()
	w := fanoutWindow{t0: start.Add(plan.warm)}
	w.t1 = w.t0.Add(plan.measure)

	cpuDone := make(chan error, 1)
	go func() {
		if err := sleepCtx(ctx, time.Until(w.t0)); err != nil {
			cpuDone <- err
			return
		}
		cpu0 := processCPU()
		if err := sleepCtx(ctx, time.Until(w.t1)); err != nil {
			cpuDone <- err
			return
		}
		w.cpu = processCPU() - cpu0
		cpuDone <- nil
	}()

	lat, sendErr := pacedSends(ctx, start, w.t0, w.t1, interval, func(ctx context.Context) (time.Time, error) {
		stamp := time.Now()
		return stamp, plan.send(ctx, stamp)
	})
	w.events, w.sendLat = int64(len(lat)), lat
	cpuErr := <-cpuDone
	if sendErr != nil {
		return w, sendErr
	}
	if cpuErr != nil {
		return w, cpuErr
	}
	return w, ctx.Err()
}

// fanoutResult turns the two sides of a row into its result.
func fanoutResult(row fanoutRow, plan fanoutPlan, o, b fanoutMeasurement) result {
	rate := func(m fanoutMeasurement) float64 { return float64(m.received) / m.window.Seconds() }
	p := func(m fanoutMeasurement, q float64) (ms float64, bound bool) {
		i := int64(math.Ceil(q*float64(m.expected))) - 1
		switch {
		case m.expected == 0:
			return 0, false
		case i < int64(len(m.latUs)):
			return float64(m.latUs[max(i, 0)]) / 1000, false
		default: // missing deliveries count as later than any delivered
			return float64(m.missingBound.Microseconds()) / 1000, true
		}
	}
	cpuPer := func(m fanoutMeasurement) float64 {
		if m.received == 0 {
			return 0
		}
		return float64(m.cpu.Nanoseconds()) / float64(m.received) / 1000
	}
	deliveredPct := func(m fanoutMeasurement) float64 {
		if m.expected == 0 {
			return 0
		}
		return 100 * float64(m.delivered) / float64(m.expected)
	}

	var metrics []metric
	add := func(name string, ov, bv float64, target string, pass *bool) {
		metrics = append(metrics, metric{Name: name, Ours: round(ov, 3), Baseline: round(bv, 3), Ratio: ratio(ov, bv), Target: target, Pass: pass})
	}
	check := func(ok bool) *bool { return &ok }

	od, bd := rate(o), rate(b)
	add("deliveries/s", od, bd, fmt.Sprintf(">= %.2f", fanoutMinDeliveryRatio), check(ratio(od, bd) >= fanoutMinDeliveryRatio))
	o50, o50b := p(o, 0.50)
	b50, b50b := p(b, 0.50)
	add("p50 ms", o50, b50, "", nil)
	o99, o99b := p(o, 0.99)
	b99, b99b := p(b, 0.99)
	// A bound on ours' p99 cannot prove a pass; one on the baseline's
	// cannot prove a failure, so it passes only if the bound does.
	add("p99 ms", o99, b99, fmt.Sprintf("<= %.2f", fanoutMaxP99Ratio), check(!o99b && ratio(o99, b99) <= fanoutMaxP99Ratio))
	if row.p99Max > 0 {
		limit := float64(row.p99Max.Milliseconds())
		add("p99 ms, absolute", o99, b99, fmt.Sprintf("ours <= %g", limit), check(!o99b && o99 <= limit))
	}
	memKiB := func(m fanoutMeasurement) float64 { return (m.heapPerSub + m.stackPerSub) / 1024 }
	add("memory KiB/idle sub (heap+stacks)", memKiB(o), memKiB(b), fmt.Sprintf("ours <= %d", fanoutMaxMemPerSub>>10),
		check(o.heapPerSub+o.stackPerSub <= fanoutMaxMemPerSub))
	add("heap KiB/idle sub", o.heapPerSub/1024, b.heapPerSub/1024, "", nil)
	limitUs := float64(fanoutMaxCPUPerDeliv.Microseconds())
	add("CPU us/delivery", cpuPer(o), cpuPer(b), fmt.Sprintf("ours <= %g", limitUs), check(cpuPer(o) <= limitUs))
	add("stack KiB/idle sub", o.stackPerSub/1024, b.stackPerSub/1024, "", nil)
	add("goroutines/sub", o.goroutinesPerSub, b.goroutinesPerSub, "", nil)
	add("delivered %", deliveredPct(o), deliveredPct(b), "", nil)

	var note strings.Builder
	fmt.Fprintf(&note, "%d subscribers on one project", row.subscribers)
	if row.requested > 0 {
		fmt.Fprintf(&note, " (SCALED DOWN from %d by %s)", row.requested, row.scaledBy)
	}
	fmt.Fprintf(&note, ", %g events/s for %s after %s of warm-up, clients in a separate process; "+
		"ours: server.New over app.New(store, Live: live hub), graphql-transport-ws subscription, events recorded with app.RecordAuditEvent; "+
		"baseline: gorilla/websocket broadcast (reader+writer goroutine and a %d-message channel per socket) of the same %d-byte message, sent after ours; ",
		row.rate, plan.measure, plan.warm, broadcastSendBuffer, len(o.sample))
	fmt.Fprintf(&note, "latency = client receive - send stamp (ours: before the commit; record p50 %.1f ms); "+
		"CPU = bench process (server side) rusage in the window / deliveries received in it; "+
		"client CPU %.2f / %.2f cores; connect %.1fs / %.1fs",
		float64(median(o.sendLat).Microseconds())/1000,
		o.clientCPU.Seconds()/o.clientSpan.Seconds(), b.clientCPU.Seconds()/b.clientSpan.Seconds(),
		o.connect.Seconds(), b.connect.Seconds())
	for _, s := range []struct {
		label string
		m     fanoutMeasurement
		p99b  bool
		p50b  bool
	}{{"ours", o, o99b, o50b}, {"baseline", b, b99b, b50b}} {
		if s.p99b || s.p50b {
			fmt.Fprintf(&note, "; %s: %d of %d deliveries missing after %s of drain, its percentiles above them are lower bounds",
				s.label, s.m.expected-s.m.delivered, s.m.expected, fanoutDrain)
		}
		if s.m.ended > 0 {
			fmt.Fprintf(&note, "; %s: %d subscriptions ended early", s.label, s.m.ended)
		}
	}
	return result{
		Scenario:    row.name(),
		Metrics:     metrics,
		OursOps:     o.received,
		BaselineOps: b.received,
		Seconds:     math.Round(o.window.Seconds()*10) / 10,
		Note:        note.String(),
	}
}

// median returns the median of ds, 0 for none.
func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}

// memSnapshot is the process's live heap, goroutine stacks and goroutines.
type memSnapshot struct {
	heap, stack uint64
	goroutines  int
}

// takeMemSnapshot measures after two garbage collections.
func takeMemSnapshot() memSnapshot {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return memSnapshot{heap: ms.HeapAlloc, stack: ms.StackInuse, goroutines: runtime.NumGoroutine()}
}

// settle waits (up to 30 s) until the goroutines of the previous side's
// connections have exited.
func settle(idle int) {
	deadline := time.Now().Add(30 * time.Second)
	for runtime.NumGoroutine() > idle+32 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > idle+32 {
		fmt.Fprintf(os.Stderr, "bench: live-fanout: %d goroutines still running (%d when idle)\n", n, idle)
	}
}

// sleepCtx sleeps for d or until ctx ends.
// pacedSends calls send once per interval from start until end, each call
// in its own goroutine, and stops at the first error, which it returns once
// every call has ended. It returns how long each call took whose stamp (the
// time send reports for it) falls in [t0, end).
func pacedSends(ctx context.Context, start, t0, end time.Time, interval time.Duration, send func(context.Context) (time.Time, error)) ([]time.Duration, error) {
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
		lat      []time.Duration
	)
	for k := 0; ; k++ {
		at := start.Add(time.Duration(k) * interval)
		if !at.Before(end) {
			break
		}
		if err := sleepCtx(ctx, time.Until(at)); err != nil {
			break
		}
		mu.Lock()
		failed := firstErr != nil
		mu.Unlock()
		if failed {
			break
		}
		wg.Go(func() {
			began := time.Now()
			stamp, err := send(ctx)
			took := time.Since(began)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				if firstErr == nil {
					firstErr = err
				}
			case !stamp.Before(t0) && stamp.Before(end):
				lat = append(lat, took)
			}
		})
	}
	wg.Wait()
	return lat, firstErr
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// fanoutOurs is our service with its live hub, served in process on its
// own loopback listener, wired as `aether serve` wires it, with a token
// verifier of its own (so that its cache holds only this row's tokens).
type fanoutOurs struct {
	app        *app.App
	verifier   *auth.Verifier
	secret     []byte
	handler    *server.Server
	httpServer *http.Server
	stopHub    context.CancelFunc
	hubDone    chan struct{}
	closeOnce  sync.Once
	// wsURL is the GraphQL WebSocket endpoint.
	wsURL string
}

// startFanoutOurs starts the hub (waiting for its LISTEN connection) and
// the server, on the bench's pool.
func startFanoutOurs(ctx context.Context, e *env) (_ *fanoutOurs, err error) {
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	st := store.New(e.pool)
	hub := live.New(e.pool, st, live.Config{Logger: logger})
	hubCtx, stopHub := context.WithCancel(context.Background())
	o := &fanoutOurs{stopHub: stopHub, hubDone: make(chan struct{}), secret: make([]byte, auth.MinSecretLen)}
	defer func() {
		if err != nil {
			o.close()
		}
	}()
	labels := pprof.Labels("side", "server", "scenario", "live-fanout")
	go pprof.Do(hubCtx, labels, func(ctx context.Context) {
		defer close(o.hubDone)
		hub.Run(ctx)
	})
	for !hub.Listening() {
		if err := sleepCtx(ctx, 20*time.Millisecond); err != nil {
			return nil, err
		}
	}
	if _, err := rand.Read(o.secret); err != nil {
		return nil, err
	}
	if o.verifier, err = auth.NewVerifier(ctx, auth.VerifierConfig{HMACSecret: o.secret}); err != nil {
		return nil, err
	}

	o.app = app.New(st, app.Config{Logger: logger, Live: hub})
	o.handler = server.New(server.Config{App: o.app, Verifier: o.verifier, Logger: logger})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	o.httpServer = &http.Server{Handler: o.handler, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	go pprof.Do(context.Background(), labels, func(context.Context) {
		_ = o.httpServer.Serve(ln)
	})
	o.wsURL = "ws://" + ln.Addr().String() + "/graphql"
	return o, nil
}

// token mints a token of tenant bench for subject, with every project and
// audit:read and audit:write.
func (o *fanoutOurs) token(subject string) (string, error) {
	return auth.MintHS256(o.secret, auth.TokenRequest{
		Subject:     subject,
		TenantID:    benchTenant,
		ProjectIDs:  []string{app.AllProjects},
		Permissions: []app.Permission{app.PermissionAuditRead, app.PermissionAuditWrite},
		TTL:         time.Hour,
	}, time.Now())
}

// tokens returns "Bearer <token>" for n distinct subjects: each subscriber
// is a user of its own, as the per-identity WebSocket limit expects.
func (o *fanoutOurs) tokens(n int) ([]string, error) {
	out := make([]string, n)
	for i := range out {
		t, err := o.token(fmt.Sprintf("fanout-viewer-%d", i))
		if err != nil {
			return nil, err
		}
		out[i] = "Bearer " + t
	}
	return out, nil
}

// close closes the WebSockets (1001), the server and the hub; it may be
// called more than once.
func (o *fanoutOurs) close() {
	o.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if o.handler != nil {
			o.handler.Shutdown(ctx)
		}
		if o.httpServer != nil {
			_ = o.httpServer.Shutdown(ctx)
		}
		o.stopHub()
		<-o.hubDone
		if o.verifier != nil {
			o.verifier.Close()
		}
	})
}

// fanoutRecorder records ours' events: demo events of one project whose
// details carry the send stamp.
type fanoutRecorder struct {
	app     *app.App
	id      app.Identity
	drafts  []domain.AuditEventDraft
	details []map[string]any

	mu sync.Mutex
	n  int
}

func newFanoutRecorder(o *fanoutOurs, project string) (*fanoutRecorder, error) {
	token, err := o.token("fanout-recorder")
	if err != nil {
		return nil, err
	}
	id, err := o.verifier.Verify(token)
	if err != nil {
		return nil, err
	}
	r := &fanoutRecorder{app: o.app, id: id, drafts: demoDrafts(7, project, 64)}
	for i := range r.drafts {
		d := map[string]any{}
		if len(r.drafts[i].Details) > 0 {
			if err := json.Unmarshal(r.drafts[i].Details, &d); err != nil {
				return nil, err
			}
		}
		r.details = append(r.details, d)
	}
	return r, nil
}

// record records the next demo event, occurring and stamped at stamp.
func (r *fanoutRecorder) record(ctx context.Context, stamp time.Time) error {
	r.mu.Lock()
	i := r.n % len(r.drafts)
	r.n++
	r.mu.Unlock()
	d := r.drafts[i]
	details := maps.Clone(r.details[i])
	details["sentAtUnixNano"] = formatStamp(stamp)
	var err error
	if d.Details, err = json.Marshal(details); err != nil {
		return err
	}
	d.ID = uuid.Nil // the server assigns one: drafts are reused
	d.OccurredAt = stamp
	_, err = r.app.RecordAuditEvent(ctx, r.id, d, "")
	return err
}

// formatStamp formats t as the stamp: Unix nanoseconds, stampDigits
// digits.
func formatStamp(t time.Time) string {
	return fmt.Sprintf("%0*d", stampDigits, t.UnixNano())
}
