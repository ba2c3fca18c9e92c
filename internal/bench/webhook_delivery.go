package main

// The webhook-delivery scenario: audit events recorded through the use case
// (app.App.RecordAuditEvents / RecordAuditEvent) into projects with webhook
// subscriptions, delivered by the real pipeline (outbox job webhook_fanout,
// webhook_delivery jobs of up to 100 deliveries per destination,
// app.App.DeliverWebhooks with
// webhook.Sender) to a local HTTPS receiver in a child process
// (webhook_receiver.go); against a plain net/http client posting payloads
// of the same shape, signed with webhook.Sign, to the same receiver with as
// many concurrent workers.
//
// Rows, each ours then the baseline (River runs only during ours, so that
// the baseline's CPU time holds nothing of it):
//
//	fan-out 1   N events (batches of whBatch) to a project with 1
//	            subscription: N deliveries. Ours is measured twice: from
//	            a backlog (the events and their outbox jobs committed
//	            while River is stopped, then River started: the delivery
//	            pipeline alone, as the baseline is the sending alone; the
//	            target row), and with the events recorded while the
//	            workers run (", recording during the run": recording
//	            shares the machine's CPU, shown beside it)
//	fan-out 10  N/10 events to a project with 10 subscriptions of 10
//	            destinations (one receiver, 10 paths): N deliveries, the
//	            same two ways
//	lag @200/s  single events at 200/s, one subscription: receive time
//	            minus the event's RecordedAt
//	one down    one destination down among 10 (webhook_down.go)
//	CPU         CPU time per delivery of the rows recorded during the run
//	            (recording included), all processes: the bench process
//	            plus PostgreSQL's processes for the bench database (from
//	            /proc), the receiver's reported apart
//
// Each run uses a tenant of its own, and deletes webhook jobs left by
// earlier (interrupted) runs first. Before each row, outside the measured
// windows, it runs VACUUM (ANALYZE) on the tables it uses, as autovacuum
// would in production (this machine's server runs with autovacuum off);
// -webhook-no-vacuum leaves that out.

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/netip"
	"os"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/jobs"
	"github.com/aetheriot/aether-audit/secrets"
	"github.com/aetheriot/aether-audit/store"
	"github.com/aetheriot/aether-audit/webhook"
)

const (
	// Targets of ours.
	whMinRate      = 2000.0 // deliveries/s
	whMinRatio     = 0.4
	whMaxLagP99    = 250 * time.Millisecond
	whMaxCPUPerDel = 1500 * time.Microsecond

	// whBatch is the events per RecordAuditEvents call of the fan-out rows.
	whBatch = 500
	// whWarmDeliveries are delivered (and not counted) before the baseline's
	// side of a fan-out row, to open connections and warm caches: 5 requests
	// on each of its 100 connections.
	whWarmDeliveries = 500
	// whOursWarmDeliveries are delivered (and not counted) before each of
	// ours' windows, after the tables' maintenance: 100 delivery jobs, about
	// 6 per pooled connection (16), so that every connection has run the
	// job's statements past PostgreSQL's first 5 custom plans and planned
	// them again after the maintenance's invalidation, as a process that
	// has been delivering for a while has.
	whOursWarmDeliveries = 10_000
	// whLagRates are the event rates of the lag rows (the trickle rows);
	// whLagWarm is sent before each window and not counted; whLagDrain is
	// how long after the window deliveries may still arrive.
	whLagWarm  = 2 * time.Second
	whLagDrain = 10 * time.Second
	// Targets of the trickle rows (issue 17): CPU per delivery at 200
	// events/s and at 20 events/s, and the lag at 200 events/s.
	whMaxTrickleCPU200 = 500 * time.Microsecond
	whMaxTrickleCPU20  = 1000 * time.Microsecond
	whMaxTrickleLagP99 = 100 * time.Millisecond
	whMaxTrickleLagMax = 500 * time.Millisecond
	// whDrafts is how many distinct demo events each project cycles through.
	whDrafts = 500
	// whEventTypes is what every subscription selects; the bench's events
	// all match it, the registry's own audit events do not.
	whEventTypes = "bench.*"
)

// runWebhookDelivery runs the scenario's rows; see the file comment.
func runWebhookDelivery(ctx context.Context, e *env, opts options) ([]result, error) {
	b, err := newWebhookBench(ctx, e, opts)
	if err != nil {
		return nil, err
	}
	defer b.close()

	var (
		results []result
		errs    []error
		// cpu sums the fan-out rows recorded during the run for the CPU row.
		cpuO, cpuB whCPU
		both       = 0
	)
	for _, fanout := range []int{1, 10} {
		if !opts.webhookRows["fanout"] {
			break
		}
		name := fmt.Sprintf("webhook-delivery fan-out %d", fanout)
		fmt.Fprintf(os.Stderr, "bench: %s: %d deliveries per side\n", name, opts.webhookDeliveries)
		backlog, live, bs, err := b.throughputRow(ctx, fanout)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			if ctx.Err() != nil {
				return results, errors.Join(errs...)
			}
			continue
		}
		results = append(results, b.throughputResult(name, fanout, backlog, bs, true),
			b.throughputResult(name+", recording during the run", fanout, live, bs, false))
		cpuO.add(live.cpu)
		cpuB.add(bs.cpu)
		both++
	}

	for _, rate := range whLagRates {
		if !opts.webhookRows[fmt.Sprintf("lag%d", rate)] {
			continue
		}
		name := fmt.Sprintf("webhook-delivery lag @%d/s", rate)
		fmt.Fprintf(os.Stderr, "bench: %s: %s per side\n", name, opts.webhookLagDuration)
		o, bs, err := b.lagRow(ctx, rate)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			if ctx.Err() != nil {
				return results, errors.Join(errs...)
			}
			continue
		}
		results = append(results, b.lagResult(name, rate, o, bs))
	}
	if both == 2 {
		results = append(results, b.cpuResult(cpuO, cpuB))
	}
	if opts.webhookRows["floor"] {
		r, err := b.floorRow(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("webhook-delivery floor: %w", err))
		} else {
			results = append(results, r)
		}
	}
	if opts.webhookRows["down"] {
		fmt.Fprintf(os.Stderr, "bench: webhook-delivery one destination down among 10\n")
		r, err := b.downRow(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("webhook-delivery one destination down among 10: %w", err))
		} else {
			results = append(results, r)
		}
	}
	if opts.webhookRows["ordered"] {
		r, err := b.orderedRow(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", orderedRowName, err))
		} else {
			results = append(results, r)
		}
	}
	return results, errors.Join(errs...)
}

// webhookBench is the scenario's world: the receiver process, our app with
// a real sender, and a tenant of its own.
type webhookBench struct {
	e        *env
	opts     options
	recv     *receiverProc
	app      *app.App
	sender   *webhook.Sender
	logger   *slog.Logger
	id       app.Identity
	tenant   string
	workers  int
	inFlight int
	// webhooks is the app's webhook configuration but for
	// MaxInFlightPerDestination, which configure sets per row.
	webhooks app.WebhookConfig
	// pgMeasured is false when no PostgreSQL process was found on this
	// machine: PostgreSQL's CPU time is then missing from the figures.
	pgMeasured bool
}

// newWebhookBench starts the receiver process and wires our app as `aether
// serve` does, with 127.0.0.0/8 allowed and the receiver's certificate
// trusted. Leftover webhook jobs of earlier runs are deleted first.
func newWebhookBench(ctx context.Context, e *env, opts options) (_ *webhookBench, err error) {
	b := &webhookBench{e: e, opts: opts, tenant: "bench-wh-" + e.runID + opts.webhookTenantTag, workers: opts.webhookWorkers}
	defer func() {
		if err != nil {
			b.close()
		}
	}()
	// An interrupted run leaves jobs for deliveries of its own tenant to a
	// receiver that is gone; they would take workers and retry.
	if _, err := e.pool.Exec(ctx, `DELETE FROM river_job WHERE kind IN ('webhook_fanout', 'webhook_delivery', 'webhook_ordered_delivery')`); err != nil {
		return nil, fmt.Errorf("deleting leftover webhook jobs: %w", err)
	}
	if err := b.maintain(ctx); err != nil {
		return nil, err
	}
	if b.recv, err = startReceiverProc(ctx); err != nil {
		return nil, fmt.Errorf("starting the receiver process: %w", err)
	}
	key := make([]byte, secrets.KeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	box, err := secrets.NewBox(key)
	if err != nil {
		return nil, err
	}
	loopback := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	b.sender = webhook.NewSender(webhook.SenderConfig{AllowPrefixes: loopback, RootCAs: b.recv.roots})
	b.logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	b.webhooks = app.WebhookConfig{Box: box, Sender: b.sender, URLPolicy: webhook.URLPolicy{AllowPrefixes: loopback}}
	b.configure(1)
	b.id = app.Identity{Subject: "bench-webhooks", TenantID: b.tenant, ProjectIDs: []string{app.AllProjects},
		Permissions: []app.Permission{app.PermissionWebhooksWrite, app.PermissionAuditWrite}}
	b.pgMeasured = takePGCPU(benchDatabase) != nil
	return b, nil
}

// configure wires b.app for a row of fanout destinations: unless
// -webhook-max-in-flight says otherwise, MaxInFlightPerDestination is the
// workers divided among the destinations, so that ours has at most as many
// requests in flight as the baseline has workers (the same concurrency).
func (b *webhookBench) configure(fanout int) {
	b.inFlight = b.opts.webhookMaxInFlight
	if b.inFlight <= 0 {
		b.inFlight = max(1, b.workers/fanout)
	}
	cfg := b.webhooks
	cfg.MaxInFlightPerDestination = b.inFlight
	b.app = app.New(store.New(b.e.pool), app.Config{Logger: b.logger, Webhooks: cfg})
}

// maintainedTables are the tables the scenario reads and writes.
const maintainedTables = "audit_events, audit_project_heads, river_job, river_queue, river_leader, " +
	"webhook_deliveries, webhook_delivery_attempts, webhook_subscriptions, webhook_destinations, webhook_destination_secrets"

// maintain vacuums and analyzes the scenario's tables, outside measured
// windows, as autovacuum would keep them in production: on a server with
// autovacuum off (as this machine's), River's job table fills with dead
// rows and audit_events has no statistics at all, so that the planner
// reads an event by id through the project's occurred_at index, scanning
// every event of the project (see docs/benchmarks.md).
func (b *webhookBench) maintain(ctx context.Context) error {
	if b.opts.webhookNoVacuum {
		return nil
	}
	if _, err := b.e.pool.Exec(ctx, "VACUUM (ANALYZE) "+maintainedTables); err != nil {
		return fmt.Errorf("vacuuming: %w", err)
	}
	return nil
}

// close stops the receiver process.
func (b *webhookBench) close() {
	if b.sender != nil {
		b.sender.CloseIdleConnections()
	}
	if b.recv != nil {
		b.recv.stop()
	}
}

// destination is a registered destination: its URL and signing key.
type destination struct {
	url string
	key []byte
}

// setupProject registers one destination per path (on the receiver) in
// project and subscribes each to whEventTypes.
func (b *webhookBench) setupProject(ctx context.Context, project string, paths []string) ([]destination, error) {
	var dests []destination
	for _, p := range paths {
		url := b.recv.url + p
		d, err := b.app.CreateWebhookDestination(ctx, b.id, app.CreateWebhookDestinationInput{ProjectID: project, URL: url})
		if err != nil {
			return nil, fmt.Errorf("creating destination %s: %w", p, err)
		}
		if _, err := b.app.CreateWebhookSubscription(ctx, b.id, app.CreateWebhookSubscriptionInput{
			ProjectID: project, DestinationID: d.Destination.ID.String(), EventTypes: []string{whEventTypes},
		}); err != nil {
			return nil, fmt.Errorf("subscribing destination %s: %w", p, err)
		}
		key, err := webhook.ParseSecret(d.SigningSecret)
		if err != nil {
			return nil, err
		}
		dests = append(dests, destination{url: url, key: key})
	}
	return dests, nil
}

// benchDrafts returns whDrafts demo drafts of project, with actions under
// "bench." and no ids (the server assigns them, so drafts can be reused).
func benchDrafts(seedValue uint64, project string) []domain.AuditEventDraft {
	drafts := demoDrafts(seedValue, project, whDrafts)
	for i := range drafts {
		drafts[i].Action = "bench." + drafts[i].Action
		drafts[i].ID = uuid.Nil
	}
	return drafts
}

// startRiver starts a River client and the webhook dispatcher as `aether
// serve` does (default queue and fetch settings, b.workers webhook workers)
// on the bench pool, their goroutines labelled side=server; stop stops
// them.
func (b *webhookBench) startRiver(ctx context.Context) (stop func(), err error) {
	client, err := jobs.NewClient(b.e.pool, store.New(b.e.pool), jobs.ClientConfig{
		Logger: b.logger, App: b.app, WebhookWorkers: b.workers,
	})
	if err != nil {
		return nil, err
	}
	dctx, stopDispatch := context.WithCancel(ctx)
	dispatchDone := make(chan struct{})
	pprof.Do(ctx, pprof.Labels("side", "server", "scenario", "webhook-delivery"), func(ctx context.Context) {
		if err = client.Start(ctx); err != nil {
			return
		}
		go func() {
			defer close(dispatchDone)
			_ = b.app.RunWebhookDispatch(dctx, app.WebhookDispatchConfig{})
		}()
	})
	if err != nil {
		stopDispatch()
		return nil, fmt.Errorf("starting river: %w", err)
	}
	return func() {
		stopDispatch()
		<-dispatchDone
		stopRiver(client)
	}, nil
}

// stopRiver stops client, cancelling its jobs if they do not finish soon.
func stopRiver(client *river.Client[pgx.Tx]) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := client.Stop(ctx); err != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := client.StopAndCancel(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "bench: webhook-delivery: stopping river:", err)
		}
	}
}

// whCPU is CPU time spent on deliveries.
type whCPU struct {
	// bench is this process's, pg PostgreSQL's (bench database and server
	// processes), recv the receiver process's; pgServer is the part of pg
	// that the server's own processes (WAL writer, checkpointer, ...) used,
	// work for every database of the server.
	bench, pg, pgServer, recv time.Duration
	// allocs counts the bench process's heap allocations (its Mallocs).
	allocs     uint64
	deliveries int64
}

func (c *whCPU) add(o whCPU) {
	c.bench += o.bench
	c.pg += o.pg
	c.pgServer += o.pgServer
	c.recv += o.recv
	c.allocs += o.allocs
	c.deliveries += o.deliveries
}

// perDelivery returns d per delivery in milliseconds.
func (c whCPU) perDelivery(d time.Duration) float64 {
	if c.deliveries == 0 {
		return 0
	}
	return float64(d.Nanoseconds()) / float64(c.deliveries) / 1e6
}

// cpuMeter takes the bench process's and PostgreSQL's CPU time at the start
// of a window.
type cpuMeter struct {
	self    time.Duration
	pg      pgCPUSnapshot
	mallocs uint64
}

func startCPU() cpuMeter {
	return cpuMeter{self: processCPU(), pg: takePGCPU(benchDatabase), mallocs: processMallocs()}
}

// stop returns the CPU time used since m started.
func (m cpuMeter) stop() whCPU {
	now := takePGCPU(benchDatabase)
	return whCPU{bench: processCPU() - m.self, pg: now.since(m.pg), pgServer: now.serverSince(m.pg),
		allocs: processMallocs() - m.mallocs}
}

// processMallocs is the number of heap allocations of the bench process
// so far (runtime/metrics, without stopping the world).
func processMallocs() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:objects"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// allocsPerDelivery is c's bench process allocations per delivery.
func (c whCPU) allocsPerDelivery() float64 {
	if c.deliveries == 0 {
		return 0
	}
	return float64(c.allocs) / float64(c.deliveries)
}

// meterWindow measures, in the background, the CPU time used between t0
// and t1; wait returns it once t1 has passed.
func meterWindow(ctx context.Context, t0, t1 time.Time) (wait func() (whCPU, error)) {
	var cpu whCPU
	done := make(chan error, 1)
	go func() {
		if err := sleepCtx(ctx, time.Until(t0)); err != nil {
			done <- err
			return
		}
		meter := startCPU()
		if err := sleepCtx(ctx, time.Until(t1)); err != nil {
			done <- err
			return
		}
		cpu = meter.stop()
		done <- nil
	}()
	return func() (whCPU, error) {
		err := <-done
		return cpu, err
	}
}

// whThroughput is what one side of a fan-out row achieved.
type whThroughput struct {
	deliveries int64
	// elapsed runs from the first enqueue (ours: the start of the first
	// RecordAuditEvents; baseline: the first request) to the last receipt.
	elapsed time.Duration
	// record is how long recording the events took (ours).
	record time.Duration
	cpu    whCPU
	rep    receiverReply
	// runs are the rates of every repetition, in order (medianRun).
	runs []float64
}

func (t whThroughput) rate() float64 {
	if t.elapsed <= 0 {
		return 0
	}
	return float64(t.deliveries) / t.elapsed.Seconds()
}

// throughputRow runs one fan-out row: ours from a backlog and ours while
// recording (River running), then the baseline (River stopped).
func (b *webhookBench) throughputRow(ctx context.Context, fanout int) (backlog, live, bs whThroughput, err error) {
	n := b.opts.webhookDeliveries
	events := n / fanout
	project := fmt.Sprintf("wh-fo%d-%s", fanout, b.e.runID)
	paths := make([]string, fanout)
	for i := range paths {
		paths[i] = fmt.Sprintf("/fo%d/%d", fanout, i)
	}
	dests, err := b.setupProject(ctx, project, paths)
	if err != nil {
		return backlog, live, bs, err
	}
	drafts := benchDrafts(uint64(fanout), project)

	b.configure(fanout)

	// The baseline's requests: the same demo events, sealed as the
	// service seals them, each to every destination.
	templates, err := sealDrafts(b.tenant, drafts)
	if err != nil {
		return backlog, live, bs, err
	}
	build := func(count int) ([]whRequest, error) {
		var reqs []whRequest
		for i := range count {
			ev := templates[i%len(templates)]
			ev.ID = uuid.Must(uuid.NewV7())
			ev.Sequence = uint64(i + 1)
			body, err := json.Marshal(app.WebhookPayload{Type: ev.Action, Timestamp: ev.RecordedAt, Data: &ev})
			if err != nil {
				return nil, err
			}
			for _, d := range dests {
				reqs = append(reqs, whRequest{url: d.url, key: d.key, body: body})
			}
		}
		return reqs, nil
	}
	warm, err := build(max(1, whWarmDeliveries/fanout))
	if err != nil {
		return backlog, live, bs, err
	}
	reqs, err := build(events)
	if err != nil {
		return backlog, live, bs, err
	}
	// Repeated, ours and the baseline in turn, so that a spell of load on
	// this shared machine does not fall on one side only; each side's
	// median run is reported.
	var backlogs, lives, bss []whThroughput
	for range b.opts.webhookRepeats {
		if backlog, live, err = b.oursThroughput(ctx, project, drafts, events, fanout); err != nil {
			return backlog, live, bs, fmt.Errorf("ours: %w", err)
		}
		if bs, err = b.baseThroughput(ctx, warm, reqs); err != nil {
			return backlog, live, bs, fmt.Errorf("baseline: %w", err)
		}
		backlogs, lives, bss = append(backlogs, backlog), append(lives, live), append(bss, bs)
	}
	return medianRun(backlogs), medianRun(lives), medianRun(bss), nil
}

// medianRun returns the run of median rate (the lower middle one of an
// even count), with every run's rate in runs.
func medianRun(runs []whThroughput) whThroughput {
	sorted := slices.Clone(runs)
	slices.SortFunc(sorted, func(a, b whThroughput) int { return cmp.Compare(a.rate(), b.rate()) })
	m := sorted[(len(sorted)-1)/2]
	m.runs = nil
	for _, r := range runs {
		m.runs = append(m.runs, r.rate())
	}
	return m
}

// oursThroughput measures ours twice after a warm-up, each time with
// events new events of drafts (cycled) recorded into project in batches of
// whBatch, until the receiver got every delivery and the database has them
// all DELIVERED: backlog records them with River stopped and measures from
// River's start (the delivery pipeline alone); live records them while
// River runs and measures from the first record.
func (b *webhookBench) oursThroughput(ctx context.Context, project string, drafts []domain.AuditEventDraft, events, fanout int) (backlog, live whThroughput, err error) {
	stop, err := b.startRiver(ctx)
	if err != nil {
		return backlog, live, err
	}
	defer func() { stop() }()
	labels := pprof.Labels("side", "server", "scenario", "webhook-delivery")
	record := func(ctx context.Context, count int) (err error) {
		pprof.Do(ctx, labels, func(ctx context.Context) {
			for done := 0; done < count && err == nil; {
				k := min(whBatch, count-done, len(drafts))
				_, err = b.app.RecordAuditEvents(ctx, b.id, app.RecordAuditEventsInput{Events: drafts[:k]})
				done += k
			}
		})
		return err
	}

	// Earlier repetitions' deliveries, all DELIVERED.
	var total int64
	if err := b.e.pool.QueryRow(ctx, `SELECT count(*) FROM webhook_deliveries WHERE tenant_id = $1 AND project_id = $2`,
		b.tenant, project).Scan(&total); err != nil {
		return backlog, live, err
	}
	// warm runs the tables' maintenance, then the warm-up, River running:
	// the warm-up is the last thing before a window, as the baseline's is.
	// The maintenance's VACUUM (ANALYZE) invalidates the cached plans of
	// the statements on the tables it visits, on every connection: a
	// warm-up before it left the window to plan them again.
	warm := func() error {
		if err := b.maintain(ctx); err != nil {
			return err
		}
		if err := b.recv.reset(ctx); err != nil {
			return err
		}
		warmEvents := max(1, whOursWarmDeliveries/fanout)
		if err := record(ctx, warmEvents); err != nil {
			return fmt.Errorf("recording the warm-up: %w", err)
		}
		total += int64(warmEvents * fanout)
		if _, err := b.awaitDelivered(ctx, project, int64(warmEvents*fanout), total); err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
		return b.recv.reset(ctx)
	}

	// From a backlog: River stopped while recording.
	if err := warm(); err != nil {
		return backlog, live, err
	}
	stop()
	stop = func() {}
	t0 := time.Now()
	if err := record(ctx, events); err != nil {
		return backlog, live, fmt.Errorf("recording: %w", err)
	}
	backlog.record = time.Since(t0)
	meter := startCPU()
	t0 = time.Now()
	restarted, err := b.startRiver(ctx)
	if err != nil {
		return backlog, live, err
	}
	stop = restarted
	total += int64(events * fanout)
	if backlog, err = b.finishThroughput(ctx, project, backlog, t0, meter, int64(events*fanout), total); err != nil {
		return backlog, live, fmt.Errorf("from a backlog: %w", err)
	}

	// Recording while River runs.
	if err := warm(); err != nil {
		return backlog, live, err
	}
	meter = startCPU()
	t0 = time.Now()
	if err := record(ctx, events); err != nil {
		return backlog, live, fmt.Errorf("recording: %w", err)
	}
	live.record = time.Since(t0)
	total += int64(events * fanout)
	if live, err = b.finishThroughput(ctx, project, live, t0, meter, int64(events*fanout), total); err != nil {
		return backlog, live, fmt.Errorf("recording during the run: %w", err)
	}
	return backlog, live, nil
}

// finishThroughput waits until the receiver got the window's deliveries
// and the project has want DELIVERED, and completes t: the window ran from
// t0 to the last receipt, its CPU time from meter's start.
func (b *webhookBench) finishThroughput(ctx context.Context, project string, t whThroughput, t0 time.Time, meter cpuMeter, deliveries, want int64) (whThroughput, error) {
	t.deliveries = deliveries
	rep, err := b.awaitDelivered(ctx, project, deliveries, want)
	if err != nil {
		return t, err
	}
	t.finish(rep, t0, meter.stop())
	return t, nil
}

// finish completes t with the receiver's report of its window, which ran
// from t0 to the last receipt, and cpu, the window's CPU time.
func (t *whThroughput) finish(rep receiverReply, t0 time.Time, cpu whCPU) {
	t.rep = rep
	t.elapsed = time.Duration(rep.NthNs - t0.UnixNano())
	t.cpu = cpu
	t.cpu.recv = time.Duration(rep.CPUNs)
	t.cpu.deliveries = t.deliveries
}

// awaitDelivered waits until the receiver got expect requests since its
// last reset, then until the project's deliveries in the database are all
// finished and want of them DELIVERED. It returns the receiver's report.
// Only the second wait polls the database (through the state index), so
// that waiting costs PostgreSQL next to nothing.
func (b *webhookBench) awaitDelivered(ctx context.Context, project string, expect, want int64) (receiverReply, error) {
	timeout := 60*time.Second + time.Duration(expect)*5*time.Millisecond
	_, rep, err := b.recv.report(ctx, receiverCommand{From: math.MinInt64, To: math.MaxInt64, Expect: expect, WaitMs: timeout.Milliseconds()})
	if err != nil {
		return rep, err
	}
	deadline := time.Now().Add(30 * time.Second)
	if rep.Matched < expect {
		deadline = time.Now() // report what the database holds
	}
	for {
		var unfinished int64
		if err := b.e.pool.QueryRow(ctx, `SELECT count(*) FROM webhook_deliveries
			WHERE tenant_id = $1 AND project_id = $2 AND state IN ('PENDING', 'DELIVERING', 'RETRYING')`,
			b.tenant, project).Scan(&unfinished); err != nil {
			return rep, err
		}
		if unfinished == 0 || !time.Now().Before(deadline) {
			var delivered, total int64
			if err := b.e.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state = 'DELIVERED'), count(*)
				FROM webhook_deliveries WHERE tenant_id = $1 AND project_id = $2`, b.tenant, project).Scan(&delivered, &total); err != nil {
				return rep, err
			}
			if rep.Matched < expect || delivered < want {
				return rep, b.deliveryTrouble(ctx, project, rep.Matched, expect, delivered, total, want)
			}
			return rep, nil
		}
		if err := sleepCtx(ctx, 20*time.Millisecond); err != nil {
			return rep, err
		}
	}
}

// deliveryTrouble describes why deliveries are missing.
func (b *webhookBench) deliveryTrouble(ctx context.Context, project string, received, expect, delivered, total, want int64) error {
	var states, lastErr string
	_ = b.e.pool.QueryRow(ctx, `SELECT coalesce(string_agg(state || ' ' || n, ', '), ''),
		coalesce(max(last_error), '') FROM (SELECT state, count(*) AS n, max(last_error) AS last_error
		FROM webhook_deliveries WHERE tenant_id = $1 AND project_id = $2 GROUP BY state) s`, b.tenant, project).Scan(&states, &lastErr)
	return fmt.Errorf("receiver got %d of %d requests; %d of %d deliveries DELIVERED in time (%d in the project; states: %s; an error: %q)",
		received, expect, delivered, want, total, states, lastErr)
}

// whRequest is one request of the baseline.
type whRequest struct {
	url  string
	key  []byte
	body []byte
}

// baselineClient returns a plain net/http client for the receiver: keep-
// alive with as many idle connections as workers, TLS trusting the
// receiver's certificate, nothing else.
func (b *webhookBench) baselineClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig.RootCAs = b.recv.roots
	t.MaxIdleConns = b.workers
	t.MaxIdleConnsPerHost = b.workers
	t.DisableCompression = true
	return &http.Client{Transport: t, Timeout: 15 * time.Second}
}

// post sends one signed webhook request as webhook.Sender does (same
// headers, a new webhook-id) and reads the answer.
func post(ctx context.Context, c *http.Client, r whRequest) error {
	id := domain.WebhookDeliveryIdempotencyKey(uuid.Must(uuid.NewV7()))
	ts := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.url, bytes.NewReader(r.body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Webhook-Id", id)
	req.Header.Set("Webhook-Timestamp", strconv.FormatInt(ts.Unix(), 10))
	req.Header.Set("Webhook-Signature", webhook.Sign(id, ts, r.body, [][]byte{r.key}))
	req.Header.Set("User-Agent", webhook.DefaultUserAgent)
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("receiver answered HTTP %d", resp.StatusCode)
	}
	return nil
}

// baseThroughput posts warm (not counted), then reqs with b.workers
// concurrent workers, and measures until the receiver got them all.
func (b *webhookBench) baseThroughput(ctx context.Context, warm, reqs []whRequest) (whThroughput, error) {
	var t whThroughput
	client := b.baselineClient()
	defer client.CloseIdleConnections()
	run := func(ctx context.Context, reqs []whRequest) error {
		ctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		var (
			next atomic.Int64
			wg   sync.WaitGroup
		)
		for range b.workers {
			wg.Go(func() {
				for ctx.Err() == nil {
					i := next.Add(1) - 1
					if i >= int64(len(reqs)) {
						return
					}
					if err := post(ctx, client, reqs[i]); err != nil {
						cancel(err)
						return
					}
				}
			})
		}
		wg.Wait()
		return context.Cause(ctx)
	}
	labels := pprof.Labels("side", "baseline", "scenario", "webhook-delivery")
	if err := b.recv.reset(ctx); err != nil {
		return t, err
	}
	var err error
	pprof.Do(ctx, labels, func(ctx context.Context) { err = run(ctx, warm) })
	if err != nil {
		return t, fmt.Errorf("warm-up: %w", err)
	}
	all := receiverCommand{From: math.MinInt64, To: math.MaxInt64}
	if _, _, err := b.recv.report(ctx, receiverCommand{From: all.From, To: all.To, Expect: int64(len(warm)), WaitMs: 30000}); err != nil {
		return t, err
	}
	if err := b.recv.reset(ctx); err != nil {
		return t, err
	}

	t.deliveries = int64(len(reqs))
	meter := startCPU()
	t0 := time.Now()
	pprof.Do(ctx, labels, func(ctx context.Context) { err = run(ctx, reqs) })
	if err != nil {
		return t, err
	}
	cpu := meter.stop()
	_, rep, err := b.recv.report(ctx, receiverCommand{From: all.From, To: all.To, Expect: t.deliveries, WaitMs: 30000})
	if err != nil {
		return t, err
	}
	if rep.Matched < t.deliveries {
		return t, fmt.Errorf("receiver got %d of %d requests", rep.Matched, t.deliveries)
	}
	t.finish(rep, t0, cpu)
	return t, nil
}

// sealDrafts returns drafts as the service would store them: normalized,
// sealed into a chain of tenant, recorded now.
func sealDrafts(tenant string, drafts []domain.AuditEventDraft) ([]domain.AuditEvent, error) {
	ds := slices.Clone(drafts)
	now := time.Now()
	for i := range ds {
		ds[i].ID = uuid.Must(uuid.NewV7())
		if err := ds[i].Normalize("", now); err != nil {
			return nil, err
		}
	}
	events, _ := domain.ChainHead{}.Append(tenant, ds, now)
	for i := range events {
		events[i].InputFingerprint = ds[i].Fingerprint()
	}
	return events, nil
}

// throughputResult turns one fan-out row into its result.
// backlog says which of ours o is: from a backlog (the target row) or
// recorded during the run (shown without a target).
func (b *webhookBench) throughputResult(name string, fanout int, o, bs whThroughput, backlog bool) result {
	check := func(ok bool) *bool { return &ok }
	r := ratio(o.rate(), bs.rate())
	cpuO, cpuB := o.cpu.perDelivery(o.cpu.bench+o.cpu.pg), bs.cpu.perDelivery(bs.cpu.bench+bs.cpu.pg)
	metrics := []metric{
		{Name: "deliveries/s", Ours: round(o.rate(), 1), Baseline: round(bs.rate(), 1), Ratio: r},
		{Name: "CPU ms/delivery", Ours: round(cpuO, 3), Baseline: round(cpuB, 3), Ratio: ratio(cpuO, cpuB)},
		{Name: "allocs/delivery, bench process", Ours: round(o.cpu.allocsPerDelivery(), 1), Baseline: round(bs.cpu.allocsPerDelivery(), 1),
			Ratio: ratio(o.cpu.allocsPerDelivery(), bs.cpu.allocsPerDelivery())},
	}
	how := fmt.Sprintf("ours: app.RecordAuditEvents in batches of %d recorded WHILE the River workers run (recording took %.2fs), "+
		"rate = deliveries / (first record -> last receipt), CPU including recording the events", whBatch, o.record.Seconds())
	if backlog {
		metrics[0].Target, metrics[0].Pass = fmt.Sprintf(">= %.2f", whMinRatio), check(r >= whMinRatio)
		metrics = slices.Insert(metrics, 1, metric{Name: "deliveries/s, absolute", Ours: round(o.rate(), 1), Baseline: round(bs.rate(), 1), Ratio: r,
			Target: fmt.Sprintf("ours >= %g", whMinRate), Pass: check(o.rate() >= whMinRate)})
		how = fmt.Sprintf("ours: from a backlog: app.RecordAuditEvents in batches of %d with River stopped (%.2fs; the events and "+
			"their outbox jobs committed), then River started: rate = deliveries / (River's start -> last receipt), CPU from River's start", whBatch, o.record.Seconds())
	}
	avg := func(t whThroughput) int64 {
		if t.rep.Matched == 0 {
			return 0
		}
		return t.rep.Bytes / t.rep.Matched
	}
	inFlightWhy := fmt.Sprintf(" (x %d destination(s): at most %d requests in flight", fanout, b.inFlight*fanout)
	if b.inFlight*fanout == b.workers {
		inFlightWhy += ", the baseline's concurrency"
	}
	inFlightWhy += ")"
	var note strings.Builder
	fmt.Fprintf(&note, "%d deliveries = %d events x %d subscription(s) (%d destination(s), paths of one receiver); "+
		"%s; webhook_fanout + webhook_delivery jobs, %d webhook workers, MaxInFlightPerDestination %d%s, pool of %d connections; "+
		"baseline: plain net/http client (keep-alive, %d idle conns), %d workers posting pre-built payloads signed per request with webhook.Sign, "+
		"rate = deliveries / (first request -> last receipt); CPU ms/delivery = bench process + PostgreSQL / deliveries; warm-ups (not counted): ours %d deliveries after the tables' maintenance before each window, the baseline %d requests; "+
		"bodies %d / %d bytes; receiver connections opened %d / %d; duplicates %d / %d; "+
		"the median of %d runs, ours and the baseline in turn (deliveries/s of each: ours %s, baseline %s)",
		o.deliveries, o.deliveries/int64(fanout), fanout, fanout, how, b.workers, b.inFlight, inFlightWhy,
		b.e.pool.Config().MaxConns, b.workers, b.workers, whOursWarmDeliveries, whWarmDeliveries,
		avg(o), avg(bs), o.rep.Conns, bs.rep.Conns, o.rep.Dups, bs.rep.Dups,
		len(o.runs), formatRates(o.runs), formatRates(bs.runs))
	return result{
		Scenario: name, Metrics: metrics, OursOps: o.deliveries, BaselineOps: bs.deliveries,
		Seconds: math.Round(o.elapsed.Seconds()*10) / 10, Note: note.String(),
	}
}

// formatRates lists rates, rounded, separated by " / ".
func formatRates(rates []float64) string {
	parts := make([]string, len(rates))
	for i, r := range rates {
		parts[i] = strconv.FormatFloat(r, 'f', 0, 64)
	}
	return strings.Join(parts, " / ")
}

// cpuResult is the CPU row: the fan-out rows recorded during the run together.
func (b *webhookBench) cpuResult(o, bs whCPU) result {
	check := func(ok bool) *bool { return &ok }
	add := func(name string, ov, bv float64, target string, pass *bool) metric {
		return metric{Name: name, Ours: round(ov, 3), Baseline: round(bv, 3), Ratio: ratio(ov, bv), Target: target, Pass: pass}
	}
	total := func(c whCPU) float64 { return c.perDelivery(c.bench + c.pg) }
	limit := float64(whMaxCPUPerDel.Microseconds()) / 1000
	note := "CPU time from the first record (ours, recording during the run) or request (baseline) until every delivery is DELIVERED in the database (ours) or " +
		"answered (baseline), over the fan-out rows recorded during the run: bench process = getrusage(RUSAGE_SELF) (ours: recording the events, River, " +
		"app.DeliverWebhook, webhook.Sender; baseline: the plain client), PostgreSQL = utime+stime from /proc of the server's " +
		"processes and the backends of " + benchDatabase + "; receiver = the receiver process's, reported apart and in neither total"
	if !b.pgMeasured {
		note += "; NO PostgreSQL PROCESS FOUND ON THIS MACHINE: PostgreSQL CPU is missing"
	}
	return result{
		Scenario: "webhook-delivery CPU (fan-out rows)",
		Metrics: []metric{
			add("CPU ms/delivery", total(o), total(bs), fmt.Sprintf("ours <= %g", limit), check(total(o) <= limit)),
			add("bench process ms/delivery", o.perDelivery(o.bench), bs.perDelivery(bs.bench), "", nil),
			add("PostgreSQL ms/delivery", o.perDelivery(o.pg), bs.perDelivery(bs.pg), "", nil),
			add("receiver ms/delivery", o.perDelivery(o.recv), bs.perDelivery(bs.recv), "", nil),
		},
		OursOps: o.deliveries, BaselineOps: bs.deliveries, Note: note,
	}
}

// whLag is what one side of the lag row achieved.
type whLag struct {
	// latUs are the lags of the window's deliveries, sorted, in
	// microseconds.
	latUs []int64
	// expected counts the events stamped in the window; rep.Matched those
	// delivered within the drain.
	expected int64
	// missingBound is a lower bound of a missing delivery's lag.
	missingBound time.Duration
	// t0 and t1 bound the window.
	t0, t1 time.Time
	window time.Duration
	// split is ours' lag split by stage, from the database's timestamps.
	split string
	// sendLat are the times to record (ours) or post (baseline).
	sendLat []time.Duration
	cpu     whCPU
	rep     receiverReply
}

// whLagRates are the event rates of the lag rows, in events/s.
var whLagRates = []int{200, 20}

// lagRow runs the lag row at rate events/s: ours (River running), then the
// baseline.
func (b *webhookBench) lagRow(ctx context.Context, rate int) (o, bs whLag, err error) {
	project := fmt.Sprintf("wh-lag%d-%s", rate, b.e.runID)
	dests, err := b.setupProject(ctx, project, []string{fmt.Sprintf("/lag%d", rate)})
	if err != nil {
		return o, bs, err
	}
	drafts := benchDrafts(200, project)

	b.configure(1)
	if err := b.maintain(ctx); err != nil {
		return o, bs, err
	}
	stop, err := b.startRiver(ctx)
	if err != nil {
		return o, bs, err
	}
	var n atomic.Int64
	o, err = b.measureLag(ctx, "server", rate, func(ctx context.Context) (time.Time, error) {
		d := drafts[int(n.Add(1)-1)%len(drafts)]
		d.OccurredAt = time.Now()
		ev, err := b.app.RecordAuditEvent(ctx, b.id, d, "")
		return ev.RecordedAt, err
	})
	stop()
	if err != nil {
		return o, bs, fmt.Errorf("ours: %w", err)
	}
	if o.split, err = b.lagSplit(ctx, project, o.t0, o.t1); err != nil {
		return o, bs, err
	}

	templates, err := sealDrafts(b.tenant, drafts)
	if err != nil {
		return o, bs, err
	}
	client := b.baselineClient()
	defer client.CloseIdleConnections()
	n.Store(0)
	bs, err = b.measureLag(ctx, "baseline", rate, func(ctx context.Context) (time.Time, error) {
		i := n.Add(1)
		ev := templates[int(i-1)%len(templates)]
		ev.ID = uuid.Must(uuid.NewV7())
		ev.Sequence = uint64(i)
		ev.RecordedAt = time.Now()
		body, err := json.Marshal(app.WebhookPayload{Type: ev.Action, Timestamp: ev.RecordedAt, Data: &ev})
		if err != nil {
			return time.Time{}, err
		}
		return ev.RecordedAt, post(ctx, client, whRequest{url: dests[0].url, key: dests[0].key, body: body})
	})
	if err != nil {
		return o, bs, fmt.Errorf("baseline: %w", err)
	}
	return o, bs, nil
}

// measureLag sends at rate events/s for whLagWarm and then the window,
// each send in its own goroutine; send returns the stamp its payload
// carries. It then collects the receiver's lags of the window's payloads.
func (b *webhookBench) measureLag(ctx context.Context, label string, rate int, send func(ctx context.Context) (time.Time, error)) (whLag, error) {
	var m whLag
	if err := b.recv.reset(ctx); err != nil {
		return m, err
	}
	interval := time.Second / time.Duration(rate)
	start := time.Now()
	t0 := start.Add(whLagWarm)
	t1 := t0.Add(b.opts.webhookLagDuration)
	m.t0, m.t1, m.window = t0, t1, t1.Sub(t0)

	waitCPU := meterWindow(ctx, t0, t1)
	var sendErr error
	pprof.Do(ctx, pprof.Labels("side", label, "scenario", "webhook-delivery"), func(ctx context.Context) {
		m.sendLat, sendErr = pacedSends(ctx, start, t0, t1, interval, send)
		m.expected = int64(len(m.sendLat))
	})
	cpu, cpuErr := waitCPU()
	if err := errors.Join(sendErr, cpuErr, ctx.Err()); err != nil {
		return m, err
	}
	lat, rep, err := b.recv.report(ctx, receiverCommand{From: t0.UnixNano(), To: t1.UnixNano(), Expect: m.expected,
		WaitMs: whLagDrain.Milliseconds(), Lags: true})
	if err != nil {
		return m, err
	}
	m.missingBound = time.Since(t1)
	slices.Sort(lat)
	m.latUs, m.rep = lat, rep
	m.cpu = cpu
	m.cpu.deliveries = rep.Matched
	return m, nil
}

// lagSplit describes where ours' lag goes, from the database's timestamps
// of the window's deliveries: RecordedAt -> delivery row created (the
// fan-out job ran; its created_at is taken at the start of the fan-out
// transaction) -> first attempt started (the delivery job was picked up)
// -> attempt finished (committed DELIVERING, sent, answered), as
// p50/p99 ms.
func (b *webhookBench) lagSplit(ctx context.Context, project string, t0, t1 time.Time) (string, error) {
	var fan, pick, send [2]float64
	err := b.e.pool.QueryRow(ctx, `WITH x AS (
			SELECT extract(epoch FROM d.created_at - e.recorded_at) * 1000 AS fan,
				extract(epoch FROM coalesce(a.started_at, d.attempt_started_at) - d.created_at) * 1000 AS pick,
				extract(epoch FROM coalesce(a.finished_at, d.delivered_at) - coalesce(a.started_at, d.attempt_started_at)) * 1000 AS send
			FROM webhook_deliveries d
			JOIN audit_events e ON e.tenant_id = d.tenant_id AND e.project_id = d.project_id AND e.sequence = d.event_sequence
			LEFT JOIN webhook_delivery_attempts a ON a.delivery_id = d.id AND a.number = 1
			WHERE d.tenant_id = $1 AND d.project_id = $2 AND e.recorded_at >= $3 AND e.recorded_at < $4
				AND (a.delivery_id IS NOT NULL OR d.attempt_count = 1 AND d.attempt_started_at IS NOT NULL))
		SELECT coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY fan), 0), coalesce(percentile_cont(0.99) WITHIN GROUP (ORDER BY fan), 0),
			coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY pick), 0), coalesce(percentile_cont(0.99) WITHIN GROUP (ORDER BY pick), 0),
			coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY send), 0), coalesce(percentile_cont(0.99) WITHIN GROUP (ORDER BY send), 0)
		FROM x`, b.tenant, project, t0, t1).Scan(&fan[0], &fan[1], &pick[0], &pick[1], &send[0], &send[1])
	if err != nil {
		return "", fmt.Errorf("splitting the lag: %w", err)
	}
	return fmt.Sprintf("RecordedAt -> delivery created (fan-out job) %.0f/%.0f ms, -> attempt started (delivery job picked up) %.0f/%.0f ms, "+
		"-> attempt finished (DELIVERING committed, sent, answered) %.0f/%.0f ms", fan[0], fan[1], pick[0], pick[1], send[0], send[1]), nil
}

// lagResult turns the lag row at rate events/s into its result.
func (b *webhookBench) lagResult(name string, rate int, o, bs whLag) result {
	check := func(ok bool) *bool { return &ok }
	p := func(m whLag, q float64) (ms float64, bound bool) {
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
	add := func(name string, ov, bv float64, target string, pass *bool) metric {
		return metric{Name: name, Ours: round(ov, 3), Baseline: round(bv, 3), Ratio: ratio(ov, bv), Target: target, Pass: pass}
	}
	o50, _ := p(o, 0.5)
	b50, _ := p(bs, 0.5)
	o99, o99b := p(o, 0.99)
	b99, _ := p(bs, 0.99)
	pct := func(m whLag) float64 {
		if m.expected == 0 {
			return 0
		}
		return 100 * float64(m.rep.Matched) / float64(m.expected)
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	limit, cpuLimit := ms(whMaxLagP99), ms(whMaxTrickleCPU20)
	if rate >= 200 {
		limit, cpuLimit = ms(whMaxTrickleLagP99), ms(whMaxTrickleCPU200)
	}
	cpuO, cpuB := o.cpu.perDelivery(o.cpu.bench+o.cpu.pg), bs.cpu.perDelivery(bs.cpu.bench+bs.cpu.pg)
	var maxTarget string
	var maxPass *bool
	if rate >= 200 {
		maxTarget, maxPass = fmt.Sprintf("ours <= %g", ms(whMaxTrickleLagMax)), check(!o99b && maxMs(o.latUs) <= ms(whMaxTrickleLagMax))
	}
	metrics := []metric{
		add("lag p50 ms", o50, b50, "", nil),
		add("lag p99 ms", o99, b99, fmt.Sprintf("ours <= %g", limit), check(!o99b && o99 <= limit)),
		add("lag max ms", maxMs(o.latUs), maxMs(bs.latUs), maxTarget, maxPass),
		add("delivered %", pct(o), pct(bs), "", nil),
		add("CPU ms/delivery", cpuO, cpuB, fmt.Sprintf("ours <= %g", cpuLimit), check(cpuO > 0 && cpuO <= cpuLimit)),
		add("bench process ms/delivery", o.cpu.perDelivery(o.cpu.bench), bs.cpu.perDelivery(bs.cpu.bench), "", nil),
		add("PostgreSQL ms/delivery", o.cpu.perDelivery(o.cpu.pg), bs.cpu.perDelivery(bs.cpu.pg), "", nil),
		add("of it server processes ms/delivery", o.cpu.perDelivery(o.cpu.pgServer), bs.cpu.perDelivery(bs.cpu.pgServer), "", nil),
	}
	var note strings.Builder
	fmt.Fprintf(&note, "%d events/s for %s after %s of warm-up, one subscription; "+
		"ours: app.RecordAuditEvent of single events, each from its own goroutine on a ticker (record p50 %.1f ms), River workers as above; "+
		"lag = receive time at the receiver - the event's RecordedAt (taken before the commit, so it includes the commit); "+
		"baseline: the plain client posts each payload as soon as it is built (lag = build time -> receipt, network only; post p50 %.1f ms); "+
		"CPU = bench process + PostgreSQL in the window / deliveries; ours' lag split, p50/p99: %s",
		rate, b.opts.webhookLagDuration, whLagWarm,
		float64(median(o.sendLat).Microseconds())/1000, float64(median(bs.sendLat).Microseconds())/1000, o.split)
	if o99b {
		fmt.Fprintf(&note, "; ours: %d of %d deliveries missing after %s of drain, p99 is a lower bound",
			o.expected-o.rep.Matched, o.expected, whLagDrain)
	}
	return result{Scenario: name, Metrics: metrics, OursOps: o.rep.Matched, BaselineOps: bs.rep.Matched,
		Seconds: math.Round(o.window.Seconds()*10) / 10, Note: note.String()}
}

// maxMs returns the largest of sorted microsecond values in milliseconds.
func maxMs(sortedUs []int64) float64 {
	if len(sortedUs) == 0 {
		return 0
	}
	return float64(sortedUs[len(sortedUs)-1]) / 1000
}
