package main

// The stream scenario: audit streams of the million-event project
// bench/bench-1m (query_page.go seeds it once).
//
// stream backfill s3: a stream of the project from sequence 1 to a real S3
// server (SeaweedFS's weed mini on loopback, internal/seaweed), through
// the real worker (app.App.RunAuditStreams: leases, filtered reads, gzip
// NDJSON objects of 10,000 events with digest metadata, cursor moves),
// timed from the stream's creation until its cursor passes the seeded
// events. Baseline: the export scenario's COPY of the same events into
// SHA-256 (target ours >= 0.5x its rows/s).
//
// stream backfill https: the same to an HTTPS receiver on loopback (the
// real webhook.Sender, batches of 1,000 signed NDJSON lines, the receiver
// reads and counts the lines), against the same baseline.
//
// stream live lag: a fresh project recorded at 1,000 events/s (batches of
// 100 every 100 ms) for the run's duration while an HTTPS stream follows
// it: the lag of each event is its receipt minus its recordedAt; p99
// against the 2 s target (the baseline column holds the target).
//
// RSS growth is that of the bench process (the worker runs in it) during
// the S3 backfill, against the baseline COPY's.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/export"
	"github.com/aetheriot/aether-audit/internal/seaweed"
	"github.com/aetheriot/aether-audit/secrets"
	"github.com/aetheriot/aether-audit/store"
	"github.com/aetheriot/aether-audit/webhook"
)

// Targets of the stream rows.
const (
	streamMinRatio = 0.5
	streamMaxLag   = 2 * time.Second
	streamMaxRSS   = 64 << 20
	// streamLiveRate is the live row's events per second.
	streamLiveRate = 1000
)

// streamReceiver counts the events of HTTPS stream requests and, for the
// live row (path /live), the lag of each.
type streamReceiver struct {
	mu     sync.Mutex
	events int64
	lags   []time.Duration
}

func (r *streamReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	now := time.Now()
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return
	}
	if req.URL.Path != "/live" {
		// A backfill: count the lines. The receiver stands for a remote
		// SIEM; decoding every line here would charge its work to ours.
		r.mu.Lock()
		r.events += int64(bytes.Count(body, []byte{'\n'}))
		r.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
		return
	}
	var lags []time.Duration
	n := int64(0)
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		n++
		var e struct {
			RecordedAt time.Time `json:"recordedAt"`
		}
		if json.Unmarshal(sc.Bytes(), &e) == nil {
			lags = append(lags, now.Sub(e.RecordedAt))
		}
	}
	r.mu.Lock()
	r.events += n
	r.lags = append(r.lags, lags...)
	r.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// runStream runs the scenario; see the file comment.
func runStream(ctx context.Context, e *env, opts options) ([]result, error) {
	if _, err := ensureSeeded(ctx, e); err != nil {
		return nil, err
	}
	xb, err := newExportBench(ctx, e)
	if err != nil {
		return nil, err
	}
	defer xb.close()
	pool, err := e.baselinePool(ctx, 1)
	if err != nil {
		return nil, err
	}
	defer pool.Close()

	// The S3 server, with its credentials in the environment the worker's
	// AWS credentials chain reads.
	for _, kv := range seaweed.Env() {
		k, v, _ := strings.Cut(kv, "=")
		os.Setenv(k, v)
	}
	dir, err := os.MkdirTemp("", "aether-bench-stream-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	fmt.Fprintln(os.Stderr, "bench: stream: starting the S3 server (building weed first if it is not cached)")
	s3, err := seaweed.Start(ctx, seaweed.Options{Dir: dir, Bucket: "bench-stream"})
	if err != nil {
		return nil, err
	}
	defer s3.Stop()

	rcv := &streamReceiver{}
	srv := httptest.NewTLSServer(rcv)
	defer srv.Close()
	box, err := secrets.NewBox(bytes.Repeat([]byte{7}, secrets.KeySize))
	if err != nil {
		return nil, err
	}
	loop := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	sender := webhook.NewSender(webhook.SenderConfig{AllowPrefixes: loop, RootCAs: srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs})
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	a := app.New(store.New(e.pool), app.Config{Logger: logger,
		Webhooks: app.WebhookConfig{Box: box, Sender: sender, URLPolicy: webhook.URLPolicy{AllowHTTP: true, AllowPrefixes: loop}},
		Streams:  app.StreamConfig{OpenBucket: export.OpenBucket, Workers: 2, Poll: 50 * time.Millisecond, ObjectMaxAge: time.Second}})
	id := app.Identity{Subject: "bench-stream", TenantID: benchTenant, ProjectIDs: []string{"*"},
		Permissions: []app.Permission{app.PermissionStreamsRead, app.PermissionStreamsWrite, app.PermissionAuditWrite}}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = a.RunAuditStreams(wctx, nil) }()
	defer func() { stop(); <-done }()

	backfill := func(name string, sink app.AuditStreamSinkInput) (exportRun, error) {
		from := uint64(1)
		var streamID string
		r, err := measureExport(ctx, "ours", name, func(ctx context.Context) (int64, int64, error) {
			created, err := a.CreateAuditStream(ctx, id, app.CreateAuditStreamInput{ProjectIDs: []string{queryProject}, Sink: sink, FromSequence: &from})
			if err != nil {
				return 0, 0, err
			}
			streamID = created.Stream.Stream.ID.String()
			for {
				v, err := a.AuditStream(ctx, id, streamID)
				if err != nil {
					return 0, 0, err
				}
				if len(v.Projects) == 1 && v.Projects[0].Acked >= seedTarget {
					return seedTarget, 0, nil
				}
				if len(v.Projects) == 1 && v.Projects[0].LastError != "" {
					return 0, 0, fmt.Errorf("stream failing: %s", v.Projects[0].LastError)
				}
				select {
				case <-ctx.Done():
					return 0, 0, ctx.Err()
				case <-time.After(100 * time.Millisecond):
				}
			}
		})
		if streamID != "" {
			_, _ = a.DeleteAuditStream(context.Background(), id, streamID, true)
		}
		return r, err
	}

	fmt.Fprintln(os.Stderr, "bench: stream: warm-up COPY")
	if _, err := xb.baseline(ctx, pool); err != nil {
		return nil, err
	}
	s3Run, err := backfill("s3", app.AuditStreamSinkInput{Type: domain.AuditStreamS3, URL: s3.BucketURL() + "&prefix=run-" + fmt.Sprint(time.Now().UnixNano()) + "%2F"})
	if err != nil {
		return nil, fmt.Errorf("S3 backfill: %w", err)
	}
	fmt.Fprintf(os.Stderr, "bench: stream: S3 backfill: %d events in %.2fs (%.0f/s), RSS +%.1f MiB\n", s3Run.rows, s3Run.elapsed.Seconds(), s3Run.rowsPerSec(), float64(s3Run.rssGrowth())/(1<<20))
	base1, err := xb.baseline(ctx, pool)
	if err != nil {
		return nil, err
	}
	httpsRun, err := backfill("https", app.AuditStreamSinkInput{Type: domain.AuditStreamHTTPS, URL: srv.URL + "/backfill"})
	if err != nil {
		return nil, fmt.Errorf("HTTPS backfill: %w", err)
	}
	fmt.Fprintf(os.Stderr, "bench: stream: HTTPS backfill: %d events in %.2fs (%.0f/s)\n", httpsRun.rows, httpsRun.elapsed.Seconds(), httpsRun.rowsPerSec())
	base2, err := xb.baseline(ctx, pool)
	if err != nil {
		return nil, err
	}
	base := base1.sum(base2)

	p99, n, err := streamLiveLag(ctx, a, id, rcv, srv.URL, opts.duration)
	if err != nil {
		return nil, fmt.Errorf("live lag: %w", err)
	}

	check := func(ok bool) *bool { return &ok }
	row := func(name string, o exportRun, sinkNote string) result {
		rows := metric{Name: "rows/s", Ours: round(o.rowsPerSec(), 1), Baseline: round(base.rowsPerSec(), 1), Ratio: ratio(o.rowsPerSec(), base.rowsPerSec())}
		rows.Target, rows.Pass = fmt.Sprintf(">= %.2f", streamMinRatio), check(rows.Ratio >= streamMinRatio)
		mib := func(v int64) float64 { return float64(v) / (1 << 20) }
		rss := metric{Name: "RSS growth MiB", Ours: round(mib(o.rssGrowth()), 1), Baseline: round(mib(base.rssGrowth()), 1), Ratio: ratio(mib(o.rssGrowth()), mib(base.rssGrowth()))}
		rss.Target, rss.Pass = fmt.Sprintf("ours <= %d", streamMaxRSS>>20), check(o.rssGrowth() <= streamMaxRSS)
		return result{Scenario: name, Metrics: []metric{rows, rss}, OursOps: 1, BaselineOps: 2, Seconds: round(o.elapsed.Seconds(), 1),
			Note: fmt.Sprintf("%d events of %s/%s; ours: createAuditStream (fromSequence 1) and app.RunAuditStreams in this process "+
				"until the cursor passes them, %s; baseline: the export scenario's COPY of the same events into SHA-256, two runs summed "+
				"(%.2fs, %.2fs)", o.rows, benchTenant, queryProject, sinkNote, base1.elapsed.Seconds(), base2.elapsed.Seconds())}
	}
	lag := metric{Name: "live lag p99 ms", Ours: round(float64(p99.Milliseconds()), 1), Baseline: float64(streamMaxLag.Milliseconds()),
		Ratio: ratio(float64(p99.Milliseconds()), float64(streamMaxLag.Milliseconds()))}
	lag.Target, lag.Pass = "<= 1.00", check(p99 <= streamMaxLag)
	return []result{
		row("stream backfill s3", s3Run, "gzip NDJSON objects of 10,000 events to SeaweedFS weed mini on loopback (sha256 and chain-hash metadata, manifest)"),
		row("stream backfill https", httpsRun, "signed NDJSON POSTs of 1,000 events to an HTTPS receiver on loopback"),
		{Scenario: "stream live lag", Metrics: []metric{lag}, OursOps: n, BaselineOps: 0, Seconds: round(opts.duration.Seconds(), 1),
			Note: fmt.Sprintf("%d events recorded at %d/s (batches of 100 every 100 ms) into a fresh project followed by an HTTPS stream; "+
				"lag = receipt at the receiver minus recordedAt; the baseline column is the 2 s target", n, streamLiveRate)},
	}, nil
}

// streamLiveLag records streamLiveRate events per second into a fresh
// project for d while an HTTPS stream follows it, and returns the p99 of
// the events' lags and their number.
func streamLiveLag(ctx context.Context, a *app.App, id app.Identity, rcv *streamReceiver, url string, d time.Duration) (time.Duration, int64, error) {
	if d <= 0 {
		d = 10 * time.Second
	}
	project := fmt.Sprintf("bench-stream-live-%d", time.Now().UnixNano())
	record := func(n int) error {
		drafts := make([]domain.AuditEventDraft, n)
		for i := range drafts {
			drafts[i] = domain.AuditEventDraft{ProjectID: project, Action: "bench.stream.tick", OccurredAt: time.Now(),
				Subject: domain.Subject{Type: domain.SubjectService, ID: "bench"}, Resource: domain.Resource{Type: "probe", ID: "p"},
				Outcome: domain.OutcomeSuccess}
		}
		_, err := a.RecordAuditEvents(ctx, id, app.RecordAuditEventsInput{Events: drafts})
		return err
	}
	if err := record(1); err != nil {
		return 0, 0, err
	}
	created, err := a.CreateAuditStream(ctx, id, app.CreateAuditStreamInput{ProjectIDs: []string{project},
		Sink: app.AuditStreamSinkInput{Type: domain.AuditStreamHTTPS, URL: url + "/live"}})
	if err != nil {
		return 0, 0, err
	}
	defer func() { _, _ = a.DeleteAuditStream(context.Background(), id, created.Stream.Stream.ID.String(), true) }()
	// Let the stream deliver the first events, then measure from a clean
	// slate.
	time.Sleep(time.Second)
	rcv.mu.Lock()
	rcv.events, rcv.lags = 0, nil
	rcv.mu.Unlock()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	sent := int64(0)
	for end := time.Now().Add(d); time.Now().Before(end); {
		<-tick.C
		if err := record(streamLiveRate / 10); err != nil {
			return 0, 0, err
		}
		sent += streamLiveRate / 10
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		rcv.mu.Lock()
		got := int64(len(rcv.lags))
		rcv.mu.Unlock()
		if got >= sent {
			break
		}
		if time.Now().After(deadline) {
			return 0, 0, fmt.Errorf("%d of %d events arrived", got, sent)
		}
		time.Sleep(50 * time.Millisecond)
	}
	rcv.mu.Lock()
	lags := slices.Clone(rcv.lags)
	rcv.mu.Unlock()
	slices.Sort(lags)
	return lags[len(lags)*99/100], int64(len(lags)), nil
}
