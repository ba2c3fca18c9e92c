package main

// The scale scenario (issue 19; only when named: -scenario scale): how the
// hot paths hold up as history grows. For each size of -scale-sizes (events
// in the scale layout) it grows the layout to that size, then measures
// twice: right after loading, with whatever statistics the table had before
// (the bench runs no ANALYZE first; autovacuum is off on this machine), and
// again after an ANALYZE.
//
// Layout, in the bench database, kept for reruns (a rerun loads only what
// a larger size adds):
//   - half the events in one project, bench/scale-one (tenant bench, so
//     that the bench's token reads it), recorded over the last 300 days,
//     with valid hash chains (verification is measured on it);
//   - the other half over 1,000 tenants × 5 projects (scale-tNNNN/pN),
//     also chained;
//   - webhook deliveries in proportion: 0.8 per event (40M at 50M), all
//     DELIVERED, of one disabled subscription of bench/scale-one;
//   - for each purge row, a month of a new project of tenant scale-purge
//     (at the one project's monthly rate), 31 to 60 days old, under a
//     30-day tenant retention, which the row removes.
//
// Events and deliveries are written with COPY and INSERT … SELECT (the path
// under test is not ingest); ingest is measured by the ingest-batch
// scenario's own code, pages by query-page's (queryPageRow), the live
// fan-out by live-fanout's at 1,000 subscribers and webhook deliveries by
// webhook-delivery's fan-out rows, each run as is against the grown table.

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/store"
)

const (
	// scaleOneProject is the bench tenant's project holding half of each
	// size.
	scaleOneProject = "scale-one"
	// scalePurgeTenant holds the months the purge rows remove, each in a
	// project named after scalePurgeProject; scalePurgeRetentionDays is the
	// tenant's window.
	scalePurgeTenant        = "scale-purge"
	scalePurgeProject       = "month"
	scalePurgeRetentionDays = 30
	// scaleTenants × scaleProjectsPerTenant projects share the other half.
	scaleTenants           = 1000
	scaleProjectsPerTenant = 5
	// scaleHistory is the time the one project's events are spread over.
	scaleHistory = 300 * 24 * time.Hour
	// scaleDeliveriesPerEvent is the delivery rows loaded per event.
	scaleDeliveriesPerEvent = 0.8
	// scaleCopyBatch is the rows per COPY transaction.
	scaleCopyBatch = 50_000
	// scaleVerifyEvents is the most events the verify row recomputes.
	scaleVerifyEvents = app.MaxVerifyRange
)

// scaleTenantID is the id of the i-th tenant of the many-projects half.
func scaleTenantID(i int) string { return fmt.Sprintf("scale-t%04d", i) }

// runScale grows the layout size by size and measures each twice.
func runScale(ctx context.Context, e *env, opts options) ([]result, error) {
	var out []result
	for _, size := range opts.scaleSizes {
		t0 := time.Now()
		if err := loadScale(ctx, e, size); err != nil {
			return out, fmt.Errorf("loading %d events: %w", size, err)
		}
		fmt.Fprintf(os.Stderr, "bench: scale %d: loaded in %s\n", size, time.Since(t0).Round(time.Second))
		for _, analyzed := range []bool{false, true} {
			if analyzed {
				if _, err := e.pool.Exec(ctx, "ANALYZE audit_events, webhook_deliveries"); err != nil {
					return out, err
				}
			}
			rs, err := measureScale(ctx, e, opts, size, analyzed)
			out = append(out, rs...)
			if err != nil {
				return out, err
			}
		}
	}
	return out, nil
}

// scaleLabel names a row of the scale scenario.
func scaleLabel(size int, analyzed bool, what string) string {
	stats := "as loaded"
	if analyzed {
		stats = "analyzed"
	}
	return fmt.Sprintf("scale %s %s: %s", humanCount(size), stats, what)
}

// humanCount writes 1000000 as 1M.
func humanCount(n int) string {
	if n%1_000_000 == 0 {
		return strconv.Itoa(n/1_000_000) + "M"
	}
	if n%1_000 == 0 {
		return strconv.Itoa(n/1_000) + "k"
	}
	return strconv.Itoa(n)
}

// measureScale runs every row at the current size.
func measureScale(ctx context.Context, e *env, opts options, size int, analyzed bool) ([]result, error) {
	var out []result
	add := func(what string, rs []result, err error) error {
		for _, r := range rs {
			r.Scenario = scaleLabel(size, analyzed, r.Scenario)
			out = append(out, r)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	}
	var stats string
	// Summed over the partitions of audit_events (the newest analyze of any).
	if err := e.pool.QueryRow(ctx, `SELECT format('statistics of %s rows (last analyzed %s); the table holds %s',
		sum(greatest(c.reltuples, 0))::bigint, COALESCE(max(s.last_analyze)::text, 'never'), sum(s.n_live_tup))
		FROM pg_partition_tree('audit_events') t JOIN pg_class c ON c.oid = t.relid
		JOIN pg_stat_user_tables s ON s.relid = c.oid WHERE t.isleaf`).Scan(&stats); err != nil {
		return out, err
	}
	fmt.Fprintf(os.Stderr, "bench: %s\n", scaleLabel(size, analyzed, stats))

	rs, err := runIngestBatch(ctx, e, opts)
	if err := add("ingest-batch", rs, err); err != nil {
		return out, err
	}

	st := store.New(e.pool)
	head, err := st.AuditHead(ctx, benchTenant, scaleOneProject)
	if err != nil {
		return out, err
	}
	pool, err := e.baselinePool(ctx, queryClients)
	if err != nil {
		return out, err
	}
	defer pool.Close()
	newestQuery := strings.Replace(pageQuery, "after: $after)", "after: $after, order: NEWEST_FIRST)", 1)
	newestSQL := "SELECT " + eventColumnList + ` FROM audit_events
	WHERE tenant_id = $1 AND project_id = $2 ORDER BY sequence DESC LIMIT ` + strconv.Itoa(pageSize+1)
	for _, row := range []struct {
		name, query, sql string
		newest           bool
	}{
		{"query-page newest-first", newestQuery, newestSQL, true},
		{"query-page random deep page", pageQuery, pageSQL, false},
	} {
		r, err := queryPageRow(ctx, e, opts, pool, pageTarget{project: scaleOneProject, total: head.Sequence, newest: row.newest},
			row.name, row.query, row.sql, " of "+scaleOneProject, nil, pageTargets{})
		if err := add(row.name, []result{r}, err); err != nil {
			return out, err
		}
	}

	r, err := scaleVerifyRow(ctx, e, head.Sequence)
	if err := add("verify", []result{r}, err); err != nil {
		return out, err
	}

	fo := opts
	fo.fanoutSubscribers, fo.fanoutOnlyListed = []int{1000}, true
	rs, err = runLiveFanout(ctx, e, fo)
	if err := add("live-fanout", rs, err); err != nil {
		return out, err
	}

	wo := opts
	wo.webhookRows = map[string]bool{"fanout": true}
	wo.webhookRepeats = 1
	wo.webhookNoVacuum = !analyzed
	wo.webhookTenantTag = fmt.Sprintf("-%d-%t", size, analyzed)
	rs, err = runWebhookDelivery(ctx, e, wo)
	if err := add("webhook-delivery", rs, err); err != nil {
		return out, err
	}

	r, err = scalePurgeRow(ctx, e, size)
	if err := add("purge", []result{r}, err); err != nil {
		return out, err
	}
	return out, nil
}

// scaleVerifyRow times verifyAuditChain over the one project's first
// scaleVerifyEvents events (one call) against pgx streaming the same rows
// and SHA-256-free decoding, so that the ratio is the cost of recomputing.
func scaleVerifyRow(ctx context.Context, e *env, head uint64) (result, error) {
	n := min(head, scaleVerifyEvents)
	from, to := uint64(1), n
	id := app.Identity{Subject: "bench", TenantID: benchTenant, ProjectIDs: []string{scaleOneProject},
		Permissions: []app.Permission{app.PermissionAuditRead}}
	t0 := time.Now()
	in := app.VerifyAuditChainInput{ProjectID: scaleOneProject, FromSequence: &from, ToSequence: &to}
	var v app.ChainVerification
	calls := 0
	for {
		var err error
		if v, err = e.app.VerifyAuditChainResumable(ctx, id, in); err != nil {
			return result{}, err
		}
		calls++
		if v.Complete || v.ResumeToken == nil {
			break
		}
		in = app.VerifyAuditChainInput{ProjectID: scaleOneProject, ResumeToken: *v.ResumeToken}
	}
	ours := time.Since(t0)
	if !v.Valid || v.CheckedCount != n {
		return result{}, fmt.Errorf("verification of %d events: valid %v, checked %d, complete %v", n, v.Valid, v.CheckedCount, v.Complete)
	}
	t0 = time.Now()
	var read uint64
	err := store.New(e.pool).ScanAuditEvents(ctx, benchTenant, scaleOneProject, from, to, func(*domain.AuditEvent) error {
		read++
		return nil
	})
	if err != nil {
		return result{}, err
	}
	base := time.Since(t0)
	o := measurement{units: int64(n), ops: int64(calls), elapsed: ours}
	b := measurement{units: int64(read), ops: 1, elapsed: base}
	return newResult("verifyAuditChain", o, b,
		fmt.Sprintf("events 1..%d of %s in %d call(s) (each at most %d events or %s); baseline: the store's scan of the same rows, decoded, no hashing",
			n, scaleOneProject, calls, app.MaxVerifyRange, app.DefaultVerifyTimeBudget),
		throughput("events/s", o, b, 0)), nil
}

// scalePurgeRow loads a month of a new scale-purge project (at the one project's
// monthly rate at this size, 31 to 60 days old) and times the retention
// purge that removes it, with audit_events' dead tuples and size before
// and after.
func scalePurgeRow(ctx context.Context, e *env, size int) (result, error) {
	month := max(size/2*30/300, 1000)
	if _, err := e.pool.Exec(ctx, `INSERT INTO audit_retention_overrides (tenant_id, retention_days, updated_at, updated_by)
		VALUES ($1, $2, now(), 'bench-scale') ON CONFLICT (tenant_id) DO UPDATE SET retention_days = EXCLUDED.retention_days`,
		scalePurgeTenant, scalePurgeRetentionDays); err != nil {
		return result{}, err
	}
	// A project of its own each time: a purge records its audit event
	// (audit.events.purged) in the purged project, so an older month can
	// never follow it there.
	project := fmt.Sprintf("%s-%s-%d", scalePurgeProject, randomHex(4), size)
	if err := copyChained(ctx, e, scalePurgeTenant, project, 0, uint64(month),
		time.Now().Add(-60*24*time.Hour), 29*24*time.Hour, false); err != nil {
		return result{}, err
	}
	deadTuples := func() (dead, bytes int64, err error) {
		// Summed over the partitions of audit_events (a partitioned table
		// has no rows of its own; a dropped partition leaves nothing).
		err = e.pool.QueryRow(ctx, `SELECT COALESCE(sum(s.n_dead_tup), 0)::bigint, COALESCE(sum(pg_table_size(t.relid)), 0)::bigint
			FROM pg_partition_tree('audit_events') t LEFT JOIN pg_stat_user_tables s ON s.relid = t.relid
			WHERE t.isleaf`).Scan(&dead, &bytes)
		return dead, bytes, err
	}
	dead0, size0, err := deadTuples()
	if err != nil {
		return result{}, err
	}
	purger := app.New(store.New(e.pool), app.Config{AuditRetention: 10 * 365 * 24 * time.Hour})
	t0 := time.Now()
	var purged int64
	for {
		ps, err := purger.PurgeExpiredAuditEvents(ctx, 100)
		if err != nil {
			return result{}, err
		}
		if len(ps) == 0 {
			break
		}
		for _, p := range ps {
			purged += p.Count
		}
	}
	took := time.Since(t0)
	// The purging backends report their deletes to the statistics views
	// within seconds of committing: wait for them (or 15 s).
	var dead1, size1 int64
	for wait := time.Now(); ; {
		if dead1, size1, err = deadTuples(); err != nil {
			return result{}, err
		}
		if dead1-dead0 >= purged || time.Since(wait) > 15*time.Second {
			break
		}
		if err := sleepCtx(ctx, 200*time.Millisecond); err != nil {
			return result{}, err
		}
	}
	if purged < int64(month) {
		return result{}, fmt.Errorf("purged %d events, want at least %d", purged, month)
	}
	o := measurement{units: purged, ops: purged, elapsed: took}
	return newResult("purge of one month", o, measurement{}, fmt.Sprintf(
		"%d events of %s/%s older than its %d-day retention, through PurgeExpiredAuditEvents (batches of %d); "+
			"audit_events dead tuples %d before, %d after; table %d MB before, %d MB after",
		purged, scalePurgeTenant, project, scalePurgeRetentionDays, app.DefaultPurgeBatch,
		dead0, dead1, size0>>20, size1>>20),
		metric{Name: "seconds", Ours: round(took.Seconds(), 2)},
		metric{Name: "events/s", Ours: round(float64(purged)/took.Seconds(), 0)},
		metric{Name: "dead tuples added", Ours: float64(dead1 - dead0)},
		metric{Name: "table MB added", Ours: float64((size1 - size0) >> 20)},
	), nil
}

// loadScale grows the layout to size events (and its deliveries).
func loadScale(ctx context.Context, e *env, size int) error {
	half := uint64(size / 2)
	// Projects start scaleHistory ago; a project grown again continues
	// after its newest event, so recorded times keep the sequence order.
	start := time.Now().Add(-scaleHistory)
	if err := growProject(ctx, e, benchTenant, scaleOneProject, half, start); err != nil {
		return err
	}
	per := half / (scaleTenants * scaleProjectsPerTenant)
	if per > 0 {
		fmt.Fprintf(os.Stderr, "bench: scale: %d projects to %d events each\n", scaleTenants*scaleProjectsPerTenant, per)
		for t := range scaleTenants {
			for p := range scaleProjectsPerTenant {
				if err := growProject(ctx, e, scaleTenantID(t), "p"+strconv.Itoa(p), per, start); err != nil {
					return err
				}
			}
		}
	}
	return loadDeliveries(ctx, e, int64(float64(size)*scaleDeliveriesPerEvent))
}

// growProject appends events to tenant/project, chained on its head, up
// to target events, recorded evenly from start (or after its newest event)
// to now.
func growProject(ctx context.Context, e *env, tenant, project string, target uint64, start time.Time) error {
	st := store.New(e.pool)
	head, err := st.AuditHead(ctx, tenant, project)
	if err != nil {
		return err
	}
	if head.Sequence >= target {
		return nil
	}
	if target >= 1_000_000 {
		fmt.Fprintf(os.Stderr, "bench: scale: %s/%s from %d to %d events\n", tenant, project, head.Sequence, target)
	}
	from := start
	if head.Sequence > 0 {
		last, err := st.GetAuditEventBySequence(ctx, tenant, project, head.Sequence)
		if err != nil {
			return err
		}
		from = last.RecordedAt.Add(time.Microsecond)
	}
	return copyChained(ctx, e, tenant, project, head.Sequence, target-head.Sequence, from, time.Since(from), target >= 1_000_000)
}

// copyChained appends n events to tenant/project after its head seq (its
// chain read from the head row), recorded evenly over [from, from+span),
// with COPY in transactions of scaleCopyBatch, moving the head with each.
// With progress, it reports every 10 transactions.
func copyChained(ctx context.Context, e *env, tenant, project string, seq, n uint64, from time.Time, span time.Duration, progress bool) error {
	templates, err := scaleTemplates()
	if err != nil {
		return err
	}
	st := store.New(e.pool)
	head, err := st.AuditHead(ctx, tenant, project)
	if err != nil {
		return err
	}
	prev := head.Hash
	step := span / time.Duration(max(n, 1))
	rows := make([][]any, 0, scaleCopyBatch)
	for done, tx := uint64(0), 0; done < n; tx++ {
		rows = rows[:0]
		for i := uint64(0); i < min(scaleCopyBatch, n-done); i++ {
			k := done + i
			ev := restamp(&templates[k%uint64(len(templates))], project, seq+k+1)
			ev.TenantID = tenant
			ev.RecordedAt = from.Add(time.Duration(k) * step).UTC().Truncate(time.Microsecond)
			ev.OccurredAt = ev.RecordedAt
			ev.ChainHash = ev.ComputeChainHash(prev)
			prev = ev.ChainHash
			rows = append(rows, rowValues(&ev))
		}
		last := seq + done + uint64(len(rows))
		err := pgx.BeginFunc(ctx, e.pool, func(t pgx.Tx) error {
			if _, err := t.CopyFrom(ctx, pgx.Identifier{"audit_events"}, eventColumns, pgx.CopyFromRows(rows)); err != nil {
				return err
			}
			_, err := t.Exec(ctx, `INSERT INTO audit_project_heads (tenant_id, project_id, last_sequence, last_hash) VALUES ($1, $2, $3, $4)
				ON CONFLICT (tenant_id, project_id) DO UPDATE SET last_sequence = EXCLUDED.last_sequence, last_hash = EXCLUDED.last_hash`,
				tenant, project, int64(last), prev[:])
			return err
		})
		if err != nil {
			return fmt.Errorf("copying events of %s/%s: %w", tenant, project, err)
		}
		done += uint64(len(rows))
		if progress && tx%10 == 9 {
			fmt.Fprintf(os.Stderr, "bench: scale: %s/%s at %d events\n", tenant, project, last)
		}
	}
	return nil
}

// scaleTemplates returns the demo events copyChained restamps, made once.
var scaleTemplates = sync.OnceValues(func() ([]domain.AuditEvent, error) {
	return sealedEvents(19, scaleOneProject, 1000)
})

// loadDeliveries grows webhook_deliveries' scale rows (DELIVERED, of one
// disabled subscription of bench/scale-one) to n. Their ids are UUIDv7s of
// now, as the service's: webhook_deliveries is partitioned by the month of
// its ids (migration 00024), and random ids would fill its default
// partition.
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
	if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM webhook_deliveries WHERE subscription_id = $1`, sub).Scan(&have); err != nil {
		return err
	}
	if have >= n {
		return nil
	}
	fmt.Fprintf(os.Stderr, "bench: scale: webhook deliveries from %d to %d\n", have, n)
	for have < n {
		k := min(n-have, 1_000_000)
		if _, err := e.pool.Exec(ctx, `INSERT INTO webhook_deliveries (tenant_id, project_id, id, subscription_id, destination_id,
			event_id, event_sequence, event_type, idempotency_key, state, attempt_count, max_attempts, created_at, updated_at, delivered_at)
			SELECT $1, $2, (lpad(to_hex((extract(epoch FROM now()) * 1000)::bigint), 12, '0') || '7'
					|| substr(md5(g::text || random()::text), 1, 3) || '8' || substr(md5(random()::text), 1, 15))::uuid,
				$3, $4, gen_random_uuid(), $5 + g, 'scale.loaded', 'msg_' || ($5 + g), 'DELIVERED', 1, 8,
				now(), now(), now()
			FROM generate_series(1, $6::bigint) g`, benchTenant, scaleOneProject, sub, dest, have, k); err != nil {
			return err
		}
		have += k
	}
	return nil
}
