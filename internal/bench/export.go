package main

// The export scenario: every audit event of the million-event project
// bench/bench-1m (query_page.go seeds it once) exported as NDJSON through
// the real use case, once uncompressed and once gzipped, into a file bucket
// in a temp dir, against a plain pgx COPY TO STDOUT of the same rows.
//
// Ours: app.App.RequestDataExport (exports:write, confirm) creates the
// export, then app.App.RunDataExport runs it synchronously, as the River
// worker would (no River here): the store's StreamAuditEventsByTime, the
// export.ObjectWriter (NDJSON encoder, optional gzip, SHA-256 and byte
// counter), the fileblob driver. Only RunDataExport is timed.
//
// Baseline: COPY (SELECT <the store's columns> FROM audit_events WHERE
// <the same range> ORDER BY occurred_at, sequence) TO STDOUT through
// PgConn.CopyTo into a SHA-256 hasher and a byte counter, the bytes then
// dropped.
//
// The runs alternate: ours uncompressed, baseline, ours gzip, baseline
// (after one COPY as warm-up, not counted, so that the table is in the page
// cache for everyone). Each run starts after a GC that returns free memory
// to the OS; the process's resident set is sampled every rssSampleEvery
// during the run (and VmHWM, reset through /proc/self/clear_refs, catches
// peaks between samples): RSS growth = peak - start.
//
// RequestDataExport records an export.requested audit event in the project
// (two per run): the range is that of the seeded events (sequences 1 to
// seedTarget), so those later events, which occur after all of them, are
// never exported.

import (
	"context"
	"crypto/sha256"
	"fmt"
	"hash"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"gocloud.dev/blob"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/export"
	"github.com/aetheriot/aether-audit/jobargs"
	"github.com/aetheriot/aether-audit/store"
)

const (
	// Targets of ours: rows/s of the uncompressed export against the
	// baseline, and the growth of the process's RSS during an export.
	exportMinRatio = 0.7
	exportMaxRSS   = 64 << 20
	// rssSampleEvery is the period of the RSS sampler.
	rssSampleEvery = 50 * time.Millisecond
	// mb is the unit of the MB/s figures (decimal megabytes).
	mb = 1e6
)

// exportRun is what one export (ours) or one COPY (baseline) achieved.
type exportRun struct {
	rows    int64
	bytes   int64 // stored (ours, after gzip) or copied bytes
	elapsed time.Duration
	// rssStart and rssPeak are the process's resident set at the start
	// and its peak during the run.
	rssStart, rssPeak int64
	// cpu is the bench process's CPU time, pg PostgreSQL's (0 when its
	// processes are not on this machine).
	cpu, pg time.Duration
	digest  string
}

func (r exportRun) rowsPerSec() float64  { return perSec(float64(r.rows), r.elapsed) }
func (r exportRun) mbPerSec() float64    { return perSec(float64(r.bytes)/mb, r.elapsed) }
func (r exportRun) rssGrowth() int64     { return max(0, r.rssPeak-r.rssStart) }
func (r exportRun) cpuPerRow() float64   { return usPerRow(r.cpu, r.rows) }
func (r exportRun) pgCPUPerRow() float64 { return usPerRow(r.pg, r.rows) }

// perSec returns v per second of d, 0 for no time.
func perSec(v float64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return v / d.Seconds()
}

// usPerRow returns d per row in microseconds.
func usPerRow(d time.Duration, rows int64) float64 {
	if rows == 0 {
		return 0
	}
	return float64(d.Nanoseconds()) / 1e3 / float64(rows)
}

// sum merges two runs of a side: totals, and the larger RSS growth.
func (r exportRun) sum(o exportRun) exportRun {
	s := exportRun{rows: r.rows + o.rows, bytes: r.bytes + o.bytes, elapsed: r.elapsed + o.elapsed,
		cpu: r.cpu + o.cpu, pg: r.pg + o.pg, digest: r.digest}
	if r.rssGrowth() >= o.rssGrowth() {
		s.rssStart, s.rssPeak = r.rssStart, r.rssPeak
	} else {
		s.rssStart, s.rssPeak = o.rssStart, o.rssPeak
	}
	return s
}

// exportBench is the scenario's world: our app with a file bucket in a
// temp dir, and the range of the seeded events.
type exportBench struct {
	e        *env
	app      *app.App
	store    *store.Store
	bucket   *blob.Bucket
	dir      string
	id       app.Identity
	from, to time.Time
	// want is the number of events in [from, to).
	want int64
	// copySQL is the baseline's statement.
	copySQL string
}

// runExport runs the scenario; see the file comment.
func runExport(ctx context.Context, e *env, _ options) ([]result, error) {
	if _, err := ensureSeeded(ctx, e); err != nil {
		return nil, err
	}
	b, err := newExportBench(ctx, e)
	if err != nil {
		return nil, err
	}
	defer b.close()
	fmt.Fprintf(os.Stderr, "bench: export: %d events of %s/%s, occurredAt %s to %s (%s)\n",
		b.want, benchTenant, queryProject, b.from.Format(time.RFC3339), b.to.Format(time.RFC3339), b.to.Sub(b.from).Round(time.Second))

	pool, err := e.baselinePool(ctx, 1)
	if err != nil {
		return nil, err
	}
	defer pool.Close()

	fmt.Fprintln(os.Stderr, "bench: export: warm-up COPY")
	if _, err := b.baseline(ctx, pool); err != nil {
		return nil, fmt.Errorf("baseline warm-up: %w", err)
	}
	var plain, gz, base1, base2 exportRun
	steps := []struct {
		name string
		run  func() (exportRun, error)
		out  *exportRun
	}{
		{"ours NDJSON", func() (exportRun, error) { return b.ours(ctx, domain.DataExportUncompressed) }, &plain},
		{"baseline COPY", func() (exportRun, error) { return b.baseline(ctx, pool) }, &base1},
		{"ours NDJSON+gzip", func() (exportRun, error) { return b.ours(ctx, domain.DataExportGzip) }, &gz},
		{"baseline COPY", func() (exportRun, error) { return b.baseline(ctx, pool) }, &base2},
	}
	for _, s := range steps {
		r, err := s.run()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
		if r.rows != b.want {
			return nil, fmt.Errorf("%s: %d rows, want %d", s.name, r.rows, b.want)
		}
		fmt.Fprintf(os.Stderr, "bench: export: %s: %d rows, %.1f MB in %.2fs (%.0f rows/s, %.1f MB/s), RSS +%.1f MiB\n",
			s.name, r.rows, float64(r.bytes)/mb, r.elapsed.Seconds(), r.rowsPerSec(), r.mbPerSec(), float64(r.rssGrowth())/(1<<20))
		*s.out = r
	}
	base := base1.sum(base2)
	return []result{
		b.result("export ndjson", plain, base, plain, base1, base2, false),
		b.result("export ndjson+gzip", gz, base, plain, base1, base2, true),
	}, nil
}

// newExportBench finds the range of the seeded events and wires our app
// with a file bucket in a new temp dir.
func newExportBench(ctx context.Context, e *env) (_ *exportBench, err error) {
	b := &exportBench{e: e, store: store.New(e.pool)}
	defer func() {
		if err != nil {
			b.close()
		}
	}()
	// Jobs of earlier runs' exports, which nothing runs here.
	if _, err := e.pool.Exec(ctx, `DELETE FROM river_job WHERE kind = $1`, jobargs.DataExportJobArgs{}.Kind()); err != nil {
		return nil, fmt.Errorf("deleting leftover export jobs: %w", err)
	}
	var first, last time.Time
	err = e.pool.QueryRow(ctx, `SELECT min(occurred_at), max(occurred_at) FROM audit_events
		WHERE tenant_id = $1 AND project_id = $2 AND sequence <= $3`, benchTenant, queryProject, seedTarget).Scan(&first, &last)
	if err != nil {
		return nil, fmt.Errorf("reading the span of %s: %w", queryProject, err)
	}
	// Stored times have microseconds: [first, last + 1µs) holds them all.
	b.from, b.to = first.UTC(), last.UTC().Add(time.Microsecond)
	err = e.pool.QueryRow(ctx, `SELECT count(*) FROM audit_events
		WHERE tenant_id = $1 AND project_id = $2 AND occurred_at >= $3 AND occurred_at < $4`,
		benchTenant, queryProject, b.from, b.to).Scan(&b.want)
	if err != nil {
		return nil, fmt.Errorf("counting the events to export: %w", err)
	}

	if b.dir, err = os.MkdirTemp("", "aether-bench-export-"); err != nil {
		return nil, err
	}
	if b.bucket, err = export.OpenBucket(ctx, "file://"+filepath.ToSlash(b.dir)); err != nil {
		return nil, err
	}
	maxRange := app.DefaultExportMaxRange
	if span := b.to.Sub(b.from); span > maxRange {
		maxRange = span + time.Hour
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	b.app = app.New(b.store, app.Config{Logger: logger, Exports: app.ExportConfig{
		Bucket:    b.bucket,
		MaxRange:  maxRange,
		MaxBytes:  64 << 30,
		MaxActive: 1 << 20,
	}})
	b.id = app.Identity{Subject: "bench-export", TenantID: benchTenant, ProjectIDs: []string{queryProject},
		Permissions: []app.Permission{app.PermissionExportsWrite, app.PermissionExportsRead}}

	// COPY takes no parameters: the values go in as literals.
	b.copySQL = fmt.Sprintf(`COPY (SELECT %s FROM audit_events
		WHERE tenant_id = %s AND project_id = %s AND occurred_at >= %s AND occurred_at < %s
		ORDER BY occurred_at, sequence) TO STDOUT`,
		eventColumnList, sqlLiteral(benchTenant), sqlLiteral(queryProject),
		sqlLiteral(b.from.Format(time.RFC3339Nano))+"::timestamptz", sqlLiteral(b.to.Format(time.RFC3339Nano))+"::timestamptz")
	return b, nil
}

// close removes the bucket's temp dir.
func (b *exportBench) close() {
	if b.bucket != nil {
		_ = b.bucket.Close()
	}
	if b.dir != "" {
		_ = os.RemoveAll(b.dir)
	}
}

// ours requests an export of the range as NDJSON with compression and runs
// it, timing RunDataExport only. The object is checked against the
// export's record, then deleted with the export's row and job.
func (b *exportBench) ours(ctx context.Context, compression domain.DataExportCompression) (exportRun, error) {
	x, err := b.app.RequestDataExport(ctx, b.id, app.RequestDataExportInput{
		ProjectID: queryProject, Kind: domain.DataExportAudit, From: b.from, To: b.to,
		Format: domain.DataExportNDJSON, Compression: compression, Confirm: true,
	})
	if err != nil {
		return exportRun{}, fmt.Errorf("requesting the export: %w", err)
	}
	defer b.forget(x.ID)
	run := app.DataExportRun{Args: jobargs.DataExportJobArgs{TenantID: x.TenantID, ExportID: x.ID}, Attempt: 1, MaxAttempts: 1}
	label := "ndjson"
	if compression == domain.DataExportGzip {
		label = "ndjson+gzip"
	}
	r, err := measureExport(ctx, "ours", label, func(ctx context.Context) (int64, int64, error) {
		return 0, 0, b.app.RunDataExport(ctx, run)
	})
	if err != nil {
		return r, err
	}
	done, err := b.store.GetDataExport(ctx, x.TenantID, x.ID, false)
	if err != nil {
		return r, err
	}
	if done.State != domain.DataExportReady {
		return r, fmt.Errorf("export is %s, not READY: %s", done.State, done.FailureReason)
	}
	attrs, err := b.bucket.Attributes(ctx, done.ObjectRef)
	if err != nil {
		return r, err
	}
	if uint64(attrs.Size) != done.ByteLength {
		return r, fmt.Errorf("object holds %d bytes, the export says %d", attrs.Size, done.ByteLength)
	}
	r.rows, r.bytes, r.digest = int64(done.RowCount), int64(done.ByteLength), done.ContentDigest
	return r, nil
}

// forget deletes an export's object, row and job, so that runs leave
// nothing behind but the export.requested audit event.
func (b *exportBench) forget(id uuid.UUID) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_ = export.DeletePrefix(ctx, b.bucket, export.KeyPrefix(benchTenant, queryProject, id), "")
	_, _ = b.e.pool.Exec(ctx, `DELETE FROM data_exports WHERE tenant_id = $1 AND id = $2`, benchTenant, id)
	_, _ = b.e.pool.Exec(ctx, `DELETE FROM river_job WHERE kind = $1 AND args->>'export_id' = $2`,
		jobargs.DataExportJobArgs{}.Kind(), id.String())
}

// baseline copies the range out with COPY TO STDOUT into a SHA-256 hasher
// and a byte counter.
func (b *exportBench) baseline(ctx context.Context, pool *pgxpool.Pool) (exportRun, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return exportRun{}, err
	}
	defer conn.Release()
	sink := &hashCounter{h: sha256.New()}
	r, err := measureExport(ctx, "baseline", "copy", func(ctx context.Context) (int64, int64, error) {
		tag, err := conn.Conn().PgConn().CopyTo(ctx, sink, b.copySQL)
		return tag.RowsAffected(), sink.n, err
	})
	r.digest = fmt.Sprintf("sha256:%x", sink.h.Sum(nil))
	return r, err
}

// hashCounter hashes and counts what is written to it, then drops it.
type hashCounter struct {
	h hash.Hash
	n int64
}

func (w *hashCounter) Write(p []byte) (int, error) {
	w.h.Write(p)
	w.n += int64(len(p))
	return len(p), nil
}

// measureExport runs fn, labelled side and run (ndjson, ndjson+gzip or
// copy) for CPU profiles, and measures its wall time, the CPU time of this
// process and of PostgreSQL, and the RSS growth of this process. fn returns the rows and bytes it moved.
func measureExport(ctx context.Context, side, run string, fn func(ctx context.Context) (rows, bytes int64, err error)) (exportRun, error) {
	// Start from a collected heap with free memory returned to the OS, so
	// that growth is the run's own.
	runtime.GC()
	debug.FreeOSMemory()
	s := startRSSSampler()
	cpu := startCPU()
	var (
		r   exportRun
		err error
	)
	t0 := time.Now()
	pprof.Do(ctx, pprof.Labels("side", side, "scenario", "export", "run", run), func(ctx context.Context) {
		r.rows, r.bytes, err = fn(ctx)
	})
	r.elapsed = time.Since(t0)
	used := cpu.stop()
	r.cpu, r.pg = used.bench, used.pg
	r.rssStart, r.rssPeak = s.stop()
	return r, err
}

// rssSampler follows the peak resident set of this process.
type rssSampler struct {
	start int64
	// hwmReset is true when VmHWM was reset at the start, so that it is
	// the peak since then.
	hwmReset bool
	stopCh   chan struct{}
	wg       sync.WaitGroup
	mu       sync.Mutex
	peak     int64
}

// startRSSSampler notes the current RSS, resets VmHWM (writing "5" to
// /proc/self/clear_refs) and samples VmRSS every rssSampleEvery.
func startRSSSampler() *rssSampler {
	s := &rssSampler{stopCh: make(chan struct{})}
	s.hwmReset = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
	s.start = procStatus("VmRSS")
	s.peak = s.start
	s.wg.Go(func() {
		t := time.NewTicker(rssSampleEvery)
		defer t.Stop()
		for {
			select {
			case <-s.stopCh:
				return
			case <-t.C:
				v := procStatus("VmRSS")
				s.mu.Lock()
				s.peak = max(s.peak, v)
				s.mu.Unlock()
			}
		}
	})
	return s
}

// stop ends the sampling and returns the RSS at the start and the peak.
func (s *rssSampler) stop() (start, peak int64) {
	close(s.stopCh)
	s.wg.Wait()
	peak = max(s.peak, procStatus("VmRSS"))
	if s.hwmReset {
		peak = max(peak, procStatus("VmHWM"))
	}
	return s.start, peak
}

// procStatus returns a "kB" field of /proc/self/status in bytes, 0 when
// it cannot be read.
func procStatus(field string) int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(data)) {
		rest, ok := strings.CutPrefix(line, field+":")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return 0
		}
		return kb << 10
	}
	return 0
}

// sqlLiteral quotes s as an SQL string literal (standard_conforming_strings).
func sqlLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// result turns one of our runs against the baseline into a row. plain is
// the uncompressed run, whose stored size is the uncompressed equivalent of
// the gzip run's; base1 and base2 are the two baseline runs (base their
// sum). The rows/s target applies to the uncompressed export.
func (b *exportBench) result(name string, o, base, plain, base1, base2 exportRun, gzipped bool) result {
	check := func(ok bool) *bool { return &ok }
	m := func(name string, ov, bv float64) metric {
		return metric{Name: name, Ours: round(ov, 1), Baseline: round(bv, 1), Ratio: ratio(ov, bv)}
	}
	rows := m("rows/s", o.rowsPerSec(), base.rowsPerSec())
	if !gzipped {
		rows.Target, rows.Pass = fmt.Sprintf(">= %.2f", exportMinRatio), check(rows.Ratio >= exportMinRatio)
	}
	metrics := []metric{rows, m("MB/s stored", o.mbPerSec(), base.mbPerSec())}
	if gzipped {
		metrics = append(metrics, m("MB/s uncompressed-equivalent", perSec(float64(plain.bytes)/mb, o.elapsed), base.mbPerSec()))
	}
	mib := func(v int64) float64 { return float64(v) / (1 << 20) }
	rss := m("RSS growth MiB", mib(o.rssGrowth()), mib(base.rssGrowth()))
	rss.Target, rss.Pass = fmt.Sprintf("ours <= %d", exportMaxRSS>>20), check(o.rssGrowth() <= exportMaxRSS)
	cpu := m("bench CPU us/row", o.cpuPerRow(), base.cpuPerRow())
	cpu.Ours, cpu.Baseline = round(o.cpuPerRow(), 3), round(base.cpuPerRow(), 3)
	pg := m("PostgreSQL CPU us/row", o.pgCPUPerRow(), base.pgCPUPerRow())
	pg.Ours, pg.Baseline = round(o.pgCPUPerRow(), 3), round(base.pgCPUPerRow(), 3)
	metrics = append(metrics, rss, cpu, pg)

	note := fmt.Sprintf("%d events of %s/%s (occurredAt %s to %s); ours: app.RequestDataExport then app.RunDataExport "+
		"called directly (no River), NDJSON%s to a file bucket in a temp dir, %.1f MB stored in %.2fs (%s); "+
		"baseline: COPY (SELECT the store's %d columns, same range and order) TO STDOUT via PgConn.CopyTo into SHA-256 + byte counter, "+
		"%.1f MB, two runs (%.2fs, %.2fs) summed, interleaved ours-plain, baseline, ours-gzip, baseline after one warm-up COPY; "+
		"RSS growth = peak VmRSS (50 ms samples and VmHWM) - VmRSS at the start, after GC + FreeOSMemory; "+
		"CPU: getrusage of this process, PostgreSQL from /proc",
		o.rows, benchTenant, queryProject, b.from.Format(time.RFC3339), b.to.Format(time.RFC3339),
		map[bool]string{false: "", true: "+gzip"}[gzipped], float64(o.bytes)/mb, o.elapsed.Seconds(), o.digest,
		len(eventColumns), float64(base1.bytes)/mb, base1.elapsed.Seconds(), base2.elapsed.Seconds())
	if takePGCPU(benchDatabase) == nil {
		note += "; NO PostgreSQL PROCESS FOUND ON THIS MACHINE: PostgreSQL CPU is missing"
	}
	return result{Scenario: name, Metrics: metrics, OursOps: 1, BaselineOps: 2,
		Seconds: round(o.elapsed.Seconds(), 1), Note: note}
}
