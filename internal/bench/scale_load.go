package main

// The scale scenario's loader: each size's events, chained, spread over the
// months they claim to be from, and the deliveries in proportion, written
// with COPY and INSERT … SELECT (the path under test is not ingest).

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/store"
)

// scaleLoaders is how many projects of the many-projects half load at
// once, besides the one project's own stream: with it, three COPY streams,
// each fed by a goroutine that chains the next batch while the last one is
// written.
const scaleLoaders = 2

// scaleOneProjectOf is the project of the bench tenant that holds half of
// size's events (the rows measure it).
func scaleOneProjectOf(size int) string { return scaleOneProject + "-" + humanCount(size) }

// scaleManyProjectOf is the p-th project, of each scale tenant, of size's
// share of the many-projects half.
func scaleManyProjectOf(size, p int) string { return "p" + strconv.Itoa(p) + "-" + humanCount(size) }

// loadScale grows the layout to size events (and its deliveries): size's
// own projects, each loaded once (a rerun completes what a stopped one
// left), hold what the sizes loaded before do not, so that the table holds
// about size events: half in scaleOneProjectOf(size), the rest over
// scaleTenants × scaleProjectsPerTenant projects of size. Every project's
// events are recorded evenly over the last scaleHistory, in the monthly
// partitions created for them first (CreatePastAuditPartitions), never in
// the DEFAULT partition.
func loadScale(ctx context.Context, e *env, size int) error {
	now := time.Now().UTC()
	start := now.Add(-scaleHistory)
	st := store.New(e.pool)
	if _, err := st.CreatePastAuditPartitions(ctx, start, now); err != nil {
		return err
	}
	one := scaleOneProjectOf(size)
	suffix := "-" + humanCount(size)
	// Events of the scale projects of other sizes.
	var others int64
	if err := e.pool.QueryRow(ctx, `SELECT COALESCE(sum(last_sequence), 0)::bigint FROM audit_project_heads
		WHERE ((tenant_id = $1 AND project_id LIKE $2 || '-%') OR tenant_id LIKE 'scale-t%')
		  AND right(project_id, length($3)) <> $3`, benchTenant, scaleOneProject, suffix).Scan(&others); err != nil {
		return err
	}
	half := uint64(size / 2)
	per := uint64(max(int64(size)-int64(half)-others, 0)) / (scaleTenants * scaleProjectsPerTenant)
	t0 := time.Now()
	var loaded atomic.Int64
	errs := make(chan error, 2)
	go func() {
		errs <- growProject(ctx, e, benchTenant, one, half, start, &loaded, true)
	}()
	go func() {
		if per == 0 {
			errs <- nil
			return
		}
		fmt.Fprintf(os.Stderr, "bench: scale: %d projects of size %s to %d events each\n",
			scaleTenants*scaleProjectsPerTenant, humanCount(size), per)
		projects := make(chan [2]string)
		var wg sync.WaitGroup
		var first error
		var once sync.Once
		for range scaleLoaders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for p := range projects {
					if err := growProject(ctx, e, p[0], p[1], per, start, &loaded, false); err != nil {
						once.Do(func() { first = err })
					}
				}
			}()
		}
	feed:
		for t := range scaleTenants {
			for p := range scaleProjectsPerTenant {
				if first != nil {
					break feed
				}
				projects <- [2]string{scaleTenantID(t), scaleManyProjectOf(size, p)}
			}
		}
		close(projects)
		wg.Wait()
		errs <- first
	}()
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(30 * time.Second):
				n := loaded.Load()
				fmt.Fprintf(os.Stderr, "bench: scale: %d events loaded, %.0f events/s\n", n, float64(n)/time.Since(t0).Seconds())
			}
		}
	}()
	err1, err2 := <-errs, <-errs
	close(done)
	if err1 != nil {
		return err1
	}
	if err2 != nil {
		return err2
	}
	if n := loaded.Load(); n > 0 {
		fmt.Fprintf(os.Stderr, "bench: scale: %d events loaded in %s (%.0f events/s)\n", n,
			time.Since(t0).Round(time.Second), float64(n)/time.Since(t0).Seconds())
	}
	return loadDeliveries(ctx, e, int64(float64(size)*scaleDeliveriesPerEvent))
}

// growProject appends events to tenant/project, chained on its head, up
// to target events, recorded evenly from start (or after its newest event)
// to now, adding what it wrote to loaded.
func growProject(ctx context.Context, e *env, tenant, project string, target uint64, start time.Time, loaded *atomic.Int64, progress bool) error {
	st := store.New(e.pool)
	head, err := st.AuditHead(ctx, tenant, project)
	if err != nil {
		return err
	}
	if head.Sequence >= target {
		return nil
	}
	if progress {
		fmt.Fprintf(os.Stderr, "bench: scale: %s/%s from %d to %d events\n", tenant, project, head.Sequence, target)
	}
	from := start
	if head.Sequence > 0 {
		from = head.RecordedAt.Add(time.Microsecond)
	}
	return copyChained(ctx, e, tenant, project, target-head.Sequence, from, time.Since(from), loaded)
}

// scaleBatch is one transaction of copyChained: the rows, the runs of
// sequences that start in them (audit_project_segments), and the head
// after them.
type scaleBatch struct {
	rows     [][]any
	segments [][2]any // first sequence, month
	head     domain.ChainHead
}

// copyChained appends n events to tenant/project after its head (read
// from the head row), recorded evenly over [from, from+span), with COPY in
// transactions of scaleCopyBatch, each moving the head and recording where
// the project enters a new month, as store.Tx.AppendAuditEvents does: reads
// by sequence then prune to each run's partition. One goroutine chains the
// next batch while the last one is written.
func copyChained(ctx context.Context, e *env, tenant, project string, n uint64, from time.Time, span time.Duration, loaded *atomic.Int64) error {
	templates, err := scaleTemplates()
	if err != nil {
		return err
	}
	head, err := store.New(e.pool).AuditHead(ctx, tenant, project)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	batches := make(chan scaleBatch, 1)
	go func() {
		defer close(batches)
		prev := head
		step := span / time.Duration(max(n, 1))
		for done := uint64(0); done < n; {
			b := scaleBatch{rows: make([][]any, 0, min(scaleCopyBatch, n-done))}
			for i := uint64(0); i < min(scaleCopyBatch, n-done); i++ {
				k := done + i
				seq := prev.Sequence + 1
				ev := restamp(&templates[seq%uint64(len(templates))], project, seq)
				ev.TenantID = tenant
				ev.RecordedAt = from.Add(time.Duration(k) * step).UTC().Truncate(time.Microsecond)
				ev.OccurredAt = ev.RecordedAt
				ev.ChainHash = ev.ComputeChainHash(prev.Hash)
				if month := monthOf(ev.RecordedAt); seq == 1 || !month.Equal(monthOf(prev.RecordedAt)) {
					b.segments = append(b.segments, [2]any{int64(seq), month})
				}
				prev = domain.ChainHead{Sequence: seq, Hash: ev.ChainHash, RecordedAt: ev.RecordedAt}
				b.rows = append(b.rows, rowValues(&ev))
			}
			done += uint64(len(b.rows))
			b.head = prev
			select {
			case batches <- b:
			case <-ctx.Done():
				return
			}
		}
	}()
	for b := range batches {
		err := pgx.BeginFunc(ctx, e.pool, func(t pgx.Tx) error {
			if _, err := t.CopyFrom(ctx, pgx.Identifier{"audit_events"}, eventColumns, pgx.CopyFromRows(b.rows)); err != nil {
				return err
			}
			for _, s := range b.segments {
				if _, err := t.Exec(ctx, `INSERT INTO audit_project_segments (tenant_id, project_id, first_sequence, recorded_from)
					VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`, tenant, project, s[0], s[1]); err != nil {
					return err
				}
			}
			_, err := t.Exec(ctx, `INSERT INTO audit_project_heads (tenant_id, project_id, last_sequence, last_hash, last_recorded_at)
				VALUES ($1, $2, $3, $4, $5) ON CONFLICT (tenant_id, project_id) DO UPDATE
				SET last_sequence = EXCLUDED.last_sequence, last_hash = EXCLUDED.last_hash, last_recorded_at = EXCLUDED.last_recorded_at`,
				tenant, project, int64(b.head.Sequence), b.head.Hash[:], b.head.RecordedAt)
			return err
		})
		if err != nil {
			return fmt.Errorf("copying events of %s/%s: %w", tenant, project, err)
		}
		loaded.Add(int64(len(b.rows)))
	}
	return ctx.Err()
}

// monthOf is the first instant of t's month in UTC: the lower bound of its
// partition.
func monthOf(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}

// scaleTemplates returns the demo events copyChained restamps, made once.
var scaleTemplates = sync.OnceValues(func() ([]domain.AuditEvent, error) {
	return sealedEvents(19, scaleOneProject, 1000)
})

// scaleDeliveryHistory is the time the scale deliveries' ids are spread
// over: within the service's default delivery retention (90 days), so that
// a bench server's maintain_partitions keeps them.
const scaleDeliveryHistory = 60 * 24 * time.Hour

// loadDeliveries grows webhook_deliveries' scale rows (DELIVERED, of one
// disabled subscription of bench/scale-one) to n, month by month over the
// last scaleDeliveryHistory: webhook_deliveries is partitioned by the
// month of its UUIDv7 ids (migration 00024), so each month's rows get ids
// of that month's times, in a partition created for it first
// (aether_create_partition), never in the DEFAULT partition. On a database
// that keeps webhook_deliveries_legacy (it held rows when migration 00029
// ran), the months before its bound are that partition's, so they land
// there; on a new one, each month gets its own partition.
func loadDeliveries(ctx context.Context, e *env, n int64) error {
	var dest, sub uuid.UUID
	err := e.pool.QueryRow(ctx, `SELECT destination_id, id FROM webhook_subscriptions
		WHERE tenant_id = $1 AND project_id = $2 AND created_by = 'bench-scale'`, benchTenant, scaleOneProject).Scan(&dest, &sub)
	if err == pgx.ErrNoRows {
		dest, sub = uuid.New(), uuid.New()
		err = pgx.BeginFunc(ctx, e.pool, func(t pgx.Tx) error {
			if _, err := t.Exec(ctx, `INSERT INTO webhook_destinations (tenant_id, project_id, id, url, created_at, created_by)
				VALUES ($1, $2, $3, 'https://scale.invalid/hook', now(), 'bench-scale')`, benchTenant, scaleOneProject, dest); err != nil {
				return err
			}
			_, err := t.Exec(ctx, `INSERT INTO webhook_subscriptions (tenant_id, project_id, id, destination_id, event_types, state,
				after_sequence, created_at, created_by, disabled_at)
				VALUES ($1, $2, $3, $4, ARRAY['scale.loaded'], 'DISABLED', 0, now(), 'bench-scale', now())`, benchTenant, scaleOneProject, sub, dest)
			return err
		})
	}
	if err != nil {
		return err
	}
	var have int64
	if err := e.pool.QueryRow(ctx, `SELECT COALESCE(max(event_sequence), 0) FROM webhook_deliveries
		WHERE tenant_id = $1 AND project_id = $2 AND subscription_id = $3`, benchTenant, scaleOneProject, sub).Scan(&have); err != nil {
		return err
	}
	if have >= n {
		return nil
	}
	t0 := time.Now()
	fmt.Fprintf(os.Stderr, "bench: scale: webhook deliveries from %d to %d\n", have, n)
	to := time.Now().UTC()
	from := to.Add(-scaleDeliveryHistory)
	st := store.New(e.pool)
	for m := monthOf(from); m.Before(to); m = m.AddDate(0, 1, 0) {
		if _, err := st.CreatePartition(ctx, "webhook_deliveries", m); err != nil {
			return err
		}
	}
	// Rows have+1..n, the k-th at from + k/n of the span, in statements of
	// at most a million rows that each stay within one month.
	spanMS := scaleDeliveryHistory.Milliseconds()
	for have < n {
		at := from.Add(time.Duration(float64(spanMS)*float64(have)/float64(n)) * time.Millisecond)
		monthEnd := monthOf(at).AddDate(0, 1, 0)
		last := min(n, have+1_000_000)
		if end := int64(float64(n) * float64(monthEnd.Sub(from).Milliseconds()) / float64(spanMS)); end < last {
			last = max(end, have+1)
		}
		if _, err := e.pool.Exec(ctx, `INSERT INTO webhook_deliveries (tenant_id, project_id, id, subscription_id, destination_id,
			event_id, event_sequence, event_type, idempotency_key, state, attempt_count, max_attempts, created_at, updated_at, delivered_at)
			SELECT $1, $2, (lpad(to_hex(x.ms), 12, '0') || '7' || substr(md5(g::text), 1, 3) || '8'
					|| substr(md5(random()::text), 1, 15))::uuid,
				$3, $4, gen_random_uuid(), g, 'scale.loaded', 'msg_' || g, 'DELIVERED', 1, 8,
				to_timestamp(x.ms / 1000.0), to_timestamp(x.ms / 1000.0), to_timestamp(x.ms / 1000.0)
			FROM generate_series($5::bigint + 1, $6::bigint) g,
				LATERAL (SELECT $7::bigint + ($8::bigint * (g - 1) / $9::bigint) AS ms) x`,
			benchTenant, scaleOneProject, sub, dest, have, last, from.UnixMilli(), spanMS, n); err != nil {
			return err
		}
		have = last
	}
	fmt.Fprintf(os.Stderr, "bench: scale: webhook deliveries loaded in %s\n", time.Since(t0).Round(time.Second))
	return nil
}
