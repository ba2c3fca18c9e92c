// Command bench measures Aether Audit's hot paths against plain-pgx
// baselines measured in the same run, on the same database:
//
//	ingest-batch         recordAuditEvents (500 events/request) vs pgx COPY
//	ingest-single        recordAuditEvent, 8 clients, one project, vs
//	                     BEGIN; INSERT; COMMIT on 8 connections
//	ingest-single-8proj  the same with each client on its own project
//	query-page           auditEvents 100-event pages of a 1M-event project,
//	                     8 clients, vs the same SELECT with pgx
//	live-fanout          S GraphQL WebSocket subscriptions on one project
//	                     (clients in a child process), events at a fixed
//	                     rate, vs a plain gorilla/websocket broadcast
//	webhook-delivery     webhooks through the real pipeline (outbox job,
//	                     River workers, app.DeliverWebhook, webhook.Sender)
//	                     to an HTTPS receiver in a child process: fan-out 1
//	                     and 10 (20,000 deliveries each), lag at 200
//	                     events/s, CPU per delivery including PostgreSQL,
//	                     vs a plain net/http client posting the same signed
//	                     payloads
//	export               the 1M-event project exported as NDJSON (plain and
//	                     gzip) by app.RunDataExport to a file bucket, vs
//	                     COPY (SELECT ...) TO STDOUT of the same rows, with
//	                     the process's RSS growth
//	stream               audit streams of the 1M-event project: backfill to
//	                     a real S3 server (SeaweedFS) and to an HTTPS
//	                     receiver vs the export's COPY baseline, live lag
//	                     p99 at 1,000 events/s, RSS growth (stream.go)
//	verify               `aether verify`'s logic (verify.Run) over a
//	                     1M-event NDJSON audit export, vs reading the file
//	                     and SHA-256-hashing each line (no database)
//	outbox               the transactional outbox (outbox.Record in 8
//	                     producers' transactions, outbox.Relay shipping to
//	                     our server) vs ingest-batch's recordAuditEvents of
//	                     500 events; and its lag at 500 events/s vs
//	                     recordAuditEvent called directly (outbox.go)
//	soak                 (only when named; `make soak`) the aether binary
//	                     as a child process holding 2,000 subscribers at
//	                     200 events/s with webhooks and an export, checking
//	                     delivery, order, memory and goroutines (soak.go)
//	scale                (only when named) the hot paths as history grows:
//	                     1M, 10M and 50M events (-scale-sizes), half in
//	                     one project, half over 1,000 tenants × 5
//	                     projects, 0.8 deliveries per event, each size
//	                     measured as loaded and after an ANALYZE (scale.go)
//
// Our side is the real service: server.New over app.New(store.New(pool)),
// served by net/http on a 127.0.0.1 socket with a bearer token, driven by
// an HTTP client in the same process. Ours and the baseline run
// interleaved in slices of about two seconds, so that noise on the machine
// hits both (live-fanout and webhook-delivery run their own servers and a
// child process, and their sides one after the other; see live_fanout.go
// and webhook_delivery.go). It prints a table (or, with -json, one JSON
// object per scenario per line) of ours, baseline, their ratio and its
// target.
//
// The bench works in the database aether_bench, which it creates and
// migrates if needed and keeps between runs, so that the million-event
// project bench/bench-1m is seeded only once.
//
//	go run ./bench [-json] [-scenario a,b] [-duration 10s] [-database-url URL] [-cpuprofile FILE] [-memprofile FILE]
//	               [-fanout-subscribers 1000,10000] [-fanout-rate 10]
//	               [-webhook-workers 100] [-webhook-max-in-flight N] [-webhook-deliveries 20000]
//	               [-webhook-lag-duration 60s] [-webhook-no-vacuum] [-webhook-repeats 5]
//	               [-webhook-rows fanout,lag200,lag20]
//	               [-scale-sizes 1000000,10000000,50000000]
//	               [-soak-bin bin/aether] [-soak-subscribers 2000] [-soak-rate 200]
//	               [-soak-warm-up 1m] [-soak-duration 3m] [-soak-goroutine-slack 32]
//	               [-soak-heap-profiles DIR]
//
// With -cpuprofile, the CPU profile carries the pprof label "side"
// (server, ours, baseline): `go tool pprof -tagfocus=side=server FILE`
// shows only our server's work. With -memprofile, the allocation profile
// of the whole run (allocation profiles carry no labels: every side
// together) is written at its end: `go tool pprof -sample_index=alloc_space
// -focus=DeliverWebhooks FILE`.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// scenario is one comparison the bench can run.
type scenario struct {
	name string
	run  func(ctx context.Context, e *env, opts options) ([]result, error)
}

// scenarios are all comparisons, in the order they run.
var scenarios = []scenario{
	{"ingest-batch", runIngestBatch},
	{"ingest-single", runIngestSingle},
	{"ingest-single-8proj", runIngestSingle8Proj},
	{"query-page", runQueryPage},
	{"live-fanout", runLiveFanout},
	{"webhook-delivery", runWebhookDelivery},
	{"export", runExport},
	{"stream", runStream},
	{"verify", runVerify},
	{"outbox", runOutbox},
	{"soak", runSoak},
	{"scale", runScale},
}

// noDatabase are the scenarios that need no database: when only they run,
// the bench does not connect to one.
var noDatabase = []string{"verify"}

// notByDefault are the scenarios that run only when -scenario names them.
var notByDefault = []string{"soak", "scale"}

// options are the command-line flags.
type options struct {
	json        bool
	scenarios   []string
	duration    time.Duration
	databaseURL string
	cpuProfile  string
	memProfile  string
	// fanoutSubscribers and fanoutRate shape live-fanout's rows.
	fanoutSubscribers []int
	fanoutRate        float64
	// fanoutOnlyListed leaves out the 4,000-subscriber row (the
	// scale scenario runs 1,000 only).
	fanoutOnlyListed bool
	// webhookTenantTag ends the webhook scenario's tenant name, so that
	// each of the scale scenario's passes has its own (the destinations of
	// another pass hold secrets sealed under another key).
	webhookTenantTag string
	// scaleSizes are the scale scenario's table sizes, in events.
	scaleSizes []int
	// webhookWorkers, webhookMaxInFlight, webhookDeliveries,
	// webhookLagDuration and webhookNoVacuum shape webhook-delivery's rows.
	webhookWorkers     int
	webhookMaxInFlight int
	webhookDeliveries  int
	webhookLagDuration time.Duration
	webhookNoVacuum    bool
	webhookRepeats     int
	// webhookRows selects webhook-delivery's rows: fanout, lag200, lag20.
	webhookRows map[string]bool
	// soakBin, soakSubscribers, soakRate, soakWarmUp, soakDuration and
	// soakGoroutineSlack shape the soak.
	soakBin            string
	soakSubscribers    int
	soakRate           float64
	soakWarmUp         time.Duration
	soakDuration       time.Duration
	soakGoroutineSlack int
	soakHeapProfiles   string
}

// main runs the bench; see the package comment.
func main() {
	os.Exit(run(os.Args[1:]))
}

// run runs the bench and returns the exit code: 0 when every selected
// scenario ran (whether or not it met its targets), 1 otherwise, 2 for bad
// flags.
func run(args []string) int {
	if len(args) > 0 && args[0] == fanoutClientArg {
		return runFanoutClient(args[1:])
	}
	if len(args) > 0 && args[0] == webhookReceiverArg {
		return runWebhookReceiver(args[1:])
	}
	opts, err := parseFlags(args)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var e *env
	if slices.ContainsFunc(opts.scenarios, func(n string) bool { return !slices.Contains(noDatabase, n) }) {
		if e, err = newEnv(ctx, opts.databaseURL); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 1
		}
		defer e.close()
	}

	if opts.cpuProfile != "" {
		f, err := os.Create(opts.cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 1
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	if opts.memProfile != "" {
		defer writeAllocProfile(opts.memProfile)
	}

	code := 0
	var results []result
	for _, s := range scenarios {
		if !slices.Contains(opts.scenarios, s.name) {
			continue
		}
		if slices.Contains(notByDefault, s.name) {
			fmt.Fprintf(os.Stderr, "bench: running %s\n", s.name)
		} else {
			fmt.Fprintf(os.Stderr, "bench: running %s (%s per side)\n", s.name, opts.duration)
		}
		rs, err := s.run(ctx, e, opts)
		// A scenario may return the results it got before an error.
		results = append(results, rs...)
		if opts.json {
			enc := json.NewEncoder(os.Stdout)
			enc.SetEscapeHTML(false) // keep targets such as ">= 0.50" readable
			for _, r := range rs {
				if err := enc.Encode(r); err != nil {
					fmt.Fprintln(os.Stderr, "bench:", err)
					return 1
				}
			}
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: %s: %v\n", s.name, err)
			code = 1
			if ctx.Err() != nil {
				break
			}
		}
	}
	if !opts.json && len(results) > 0 {
		printTable(os.Stdout, results)
	}
	return code
}

// parseFlags parses the command line into options.
func parseFlags(args []string) (options, error) {
	var (
		opts      options
		scenarioF string
	)
	names := make([]string, len(scenarios))
	var defaults []string
	for i, s := range scenarios {
		names[i] = s.name
		if !slices.Contains(notByDefault, s.name) {
			defaults = append(defaults, s.name)
		}
	}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.BoolVar(&opts.json, "json", false, "print one JSON object per scenario per line instead of the table")
	fs.StringVar(&scenarioF, "scenario", strings.Join(defaults, ","), "comma-separated scenarios to run (also: "+strings.Join(notByDefault, ", ")+")")
	fs.DurationVar(&opts.duration, "duration", 10*time.Second, "measured time per side of each scenario")
	// The default is resolved at run time, so that -h never prints a
	// password from DATABASE_URL.
	fs.StringVar(&opts.databaseURL, "database-url", "",
		"PostgreSQL server to use (default: $DATABASE_URL, else "+redact(localURL)+" if reachable, else a private cluster in a temp dir)")
	fs.StringVar(&opts.cpuProfile, "cpuprofile", "", "write a CPU profile of the run (labelled by side) to this file")
	fs.StringVar(&opts.memProfile, "memprofile", "", "write the run's allocation profile (every side together) to this file")
	fanoutF := fs.String("fanout-subscribers", "1000,10000", "live-fanout: comma-separated subscriber counts, one row each (a 4000 at 10 events/s row is always added)")
	fs.Float64Var(&opts.fanoutRate, "fanout-rate", 10, "live-fanout: events recorded per second")
	fs.IntVar(&opts.webhookWorkers, "webhook-workers", 100, "webhook-delivery: River webhook workers (jobs.ClientConfig.WebhookWorkers) and baseline client workers")
	fs.IntVar(&opts.webhookMaxInFlight, "webhook-max-in-flight", 0, "webhook-delivery: MaxInFlightPerDestination (default: -webhook-workers divided by the row's destinations, the baseline's concurrency)")
	fs.IntVar(&opts.webhookDeliveries, "webhook-deliveries", 20000, "webhook-delivery: deliveries per side of the fan-out rows (a multiple of 10)")
	fs.DurationVar(&opts.webhookLagDuration, "webhook-lag-duration", time.Minute, "webhook-delivery: measured time per side of the lag row")
	fs.BoolVar(&opts.webhookNoVacuum, "webhook-no-vacuum", false, "webhook-delivery: do not VACUUM (ANALYZE) its tables before each row")
	fs.IntVar(&opts.webhookRepeats, "webhook-repeats", 5, "webhook-delivery: runs of each fan-out row, ours and the baseline in turn; the median of each side is reported")
	rowsF := fs.String("webhook-rows", "fanout,lag200,lag20,down,ordered", "webhook-delivery: comma-separated rows to run: fanout (the fan-out rows and the CPU row), lag200, lag20 (the trickle rows), down (one destination down among 10), ordered (ordered fan-out 1), floor (not by default: an idle process and recording alone at 20 and 200 events/s, CPU per event)")
	scaleF := fs.String("scale-sizes", "1000000,10000000,50000000", "scale: comma-separated table sizes in events, grown in this order (kept in the bench database for reruns)")
	fs.StringVar(&opts.soakBin, "soak-bin", "bin/aether", "soak: the aether binary to run as the server")
	fs.IntVar(&opts.soakSubscribers, "soak-subscribers", 2000, "soak: WebSocket subscribers held")
	fs.Float64Var(&opts.soakRate, "soak-rate", 200, "soak: events recorded per second")
	fs.DurationVar(&opts.soakWarmUp, "soak-warm-up", time.Minute, "soak: warm-up at the rate before the first memory reading")
	fs.DurationVar(&opts.soakDuration, "soak-duration", 3*time.Minute, "soak: measured time at the rate")
	fs.IntVar(&opts.soakGoroutineSlack, "soak-goroutine-slack", 32, "soak: goroutines the server may have at the end beyond its count after the warm-up")
	fs.StringVar(&opts.soakHeapProfiles, "soak-heap-profiles", "", "soak: folder to write the server's heap profiles after the warm-up and at the end into")
	if err := fs.Parse(args); err != nil {
		return opts, err
	}
	if fs.NArg() > 0 {
		return opts, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if opts.duration <= 0 {
		return opts, fmt.Errorf("-duration must be positive")
	}
	for n := range strings.SplitSeq(scenarioF, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		if !slices.Contains(names, n) {
			return opts, fmt.Errorf("unknown scenario %q (have %s)", n, strings.Join(names, ", "))
		}
		opts.scenarios = append(opts.scenarios, n)
	}
	if len(opts.scenarios) == 0 {
		return opts, fmt.Errorf("-scenario names no scenario")
	}
	for f := range strings.SplitSeq(*fanoutF, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return opts, fmt.Errorf("-fanout-subscribers: %q is not a positive number", f)
		}
		opts.fanoutSubscribers = append(opts.fanoutSubscribers, n)
	}
	for f := range strings.SplitSeq(*scaleF, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 20_000 {
			return opts, fmt.Errorf("-scale-sizes: %q is not a number of at least 20000", f)
		}
		opts.scaleSizes = append(opts.scaleSizes, n)
	}
	if !(opts.fanoutRate > 0 && opts.fanoutRate <= 10000) {
		return opts, fmt.Errorf("-fanout-rate must be in (0, 10000]")
	}
	if opts.webhookWorkers <= 0 {
		return opts, fmt.Errorf("-webhook-workers must be positive")
	}
	if opts.webhookDeliveries < 10 || opts.webhookDeliveries%10 != 0 {
		return opts, fmt.Errorf("-webhook-deliveries must be a positive multiple of 10")
	}
	if opts.webhookRepeats <= 0 {
		return opts, fmt.Errorf("-webhook-repeats must be positive")
	}
	opts.webhookRows = map[string]bool{}
	for r := range strings.SplitSeq(*rowsF, ",") {
		switch r = strings.TrimSpace(r); r {
		case "":
		case "fanout", "lag200", "lag20", "down", "ordered", "floor":
			opts.webhookRows[r] = true
		default:
			return opts, fmt.Errorf("-webhook-rows: unknown row %q (have fanout, lag200, lag20, down, ordered, floor)", r)
		}
	}
	if opts.webhookLagDuration <= 0 {
		return opts, fmt.Errorf("-webhook-lag-duration must be positive")
	}
	if opts.soakSubscribers <= 0 || !(opts.soakRate > 0 && opts.soakRate <= 10000) || opts.soakWarmUp <= 0 ||
		opts.soakDuration <= 0 || opts.soakGoroutineSlack < 0 {
		return opts, fmt.Errorf("-soak-subscribers, -soak-rate (up to 10000), -soak-warm-up and -soak-duration must be positive, -soak-goroutine-slack not negative")
	}
	return opts, nil
}

// printTable writes the results as a table (text left-aligned, numbers
// right-aligned), then each scenario's note.
func printTable(out io.Writer, results []result) {
	rows := [][]string{{"scenario", "metric", "ours", "baseline", "ratio", "target", "pass"}}
	for _, r := range results {
		for _, m := range r.Metrics {
			pass, target := "-", "-"
			if m.Pass != nil {
				pass = map[bool]string{true: "yes", false: "NO"}[*m.Pass]
			}
			if m.Target != "" {
				target = m.Target
			}
			rows = append(rows, []string{r.Scenario, m.Name, formatValue(m.Ours), formatValue(m.Baseline),
				fmt.Sprintf("%.3f", m.Ratio), target, pass})
		}
	}
	widths := make([]int, len(rows[0]))
	for _, row := range rows {
		for i, cell := range row {
			widths[i] = max(widths[i], len(cell))
		}
	}
	numeric := []bool{false, false, true, true, true, false, false}
	for _, row := range rows {
		var sb strings.Builder
		for i, cell := range row {
			if i > 0 {
				sb.WriteString("  ")
			}
			if numeric[i] {
				fmt.Fprintf(&sb, "%*s", widths[i], cell)
			} else {
				fmt.Fprintf(&sb, "%-*s", widths[i], cell)
			}
		}
		fmt.Fprintln(out, strings.TrimRight(sb.String(), " "))
	}
	fmt.Fprintln(out)
	for _, r := range results {
		fmt.Fprintf(out, "%s (%d ours / %d baseline operations, %.1fs each): %s\n",
			r.Scenario, r.OursOps, r.BaselineOps, r.Seconds, r.Note)
	}
}

// formatValue prints large values (rates) as integers and smaller ones
// (milliseconds) with decimals.
func formatValue(v float64) string {
	switch {
	case v >= 1000:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.3f", v)
	}
}

// writeAllocProfile writes the allocation profile of the run so far to
// path, reporting a failure on stderr.
func writeAllocProfile(path string) {
	f, err := os.Create(path)
	if err == nil {
		err = pprof.Lookup("allocs").WriteTo(f, 0)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: memprofile:", err)
	}
}
