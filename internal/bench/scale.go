package main

// The scale scenario (issue 19; only when named: -scenario scale): how the
// hot paths hold up as history grows. For each size of -scale-sizes (events
// in the scale layout) it grows the layout to that size, then measures
// twice: right after loading, with whatever statistics the table had before
// (the bench runs no ANALYZE first; autovacuum is off on this machine), and
// again after an ANALYZE.
//
// Layout, in the bench database, kept for reruns (scale_load.go; a rerun
// loads only what a size not loaded yet adds, so that the table holds about
// that many events):
//   - half of each size's events in one project of its own,
//     bench/scale-one-<size> (tenant bench, so that the bench's token reads
//     it), with a valid hash chain (verification is measured on it);
//   - the rest, less what the sizes loaded before hold, over 1,000 tenants
//     × 5 projects of the size (scale-tNNNN/pN-<size>), also chained;
//   - every project's events recorded evenly over the last scaleHistory,
//     in monthly partitions created for them first, never in the DEFAULT
//     partition, with the runs by month the store's reads prune by;
//   - webhook deliveries in proportion: 0.8 per event (40M at 50M), all
//     DELIVERED, of one disabled subscription of bench/scale-one, with
//     UUIDv7 ids of the last 60 days (deliveries are partitioned by the
//     month of their id);
//   - for each pass, two months of new projects of tenant scale-purge,
//     which the purge rows remove (scale_purge.go).
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
	"time"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/store"
)

const (
	// scaleOneProject names the bench tenant's projects holding half of
	// each size (scaleOneProjectOf) and is the project of the scale
	// deliveries' subscription.
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
	// scaleHistory is the time every scale project's events are spread
	// over.
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
		r, err := scaleDiskRow(ctx, e)
		if err != nil {
			return out, err
		}
		r.Scenario = scaleLabel(size, false, r.Scenario)
		out = append(out, r)
		fmt.Fprintf(os.Stderr, "bench: %s: %s\n", r.Scenario, r.Note)
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

// scaleDiskRow measures what the layout takes on disk: audit_events and
// webhook_deliveries with their indexes (pg_total_relation_size over their
// partitions), per row, and what the largest size of the issue (50M events,
// 40M deliveries) would take at those rates.
func scaleDiskRow(ctx context.Context, e *env) (result, error) {
	var events, eventBytes, deliveries, deliveryBytes int64
	// Events by the chain heads (each project's events past its purged
	// prefix: exact, without a scan), deliveries counted (the statistics
	// views lag the loader's backends by seconds); sizes exact.
	if err := e.pool.QueryRow(ctx, `SELECT
		(SELECT COALESCE(sum(last_sequence - purged_through), 0)::bigint FROM audit_project_heads),
		(SELECT sum(pg_total_relation_size(t.relid))::bigint FROM pg_partition_tree('audit_events') t WHERE t.isleaf),
		(SELECT count(*) FROM webhook_deliveries),
		(SELECT sum(pg_total_relation_size(t.relid))::bigint FROM pg_partition_tree('webhook_deliveries') t WHERE t.isleaf)`).
		Scan(&events, &eventBytes, &deliveries, &deliveryBytes); err != nil {
		return result{}, err
	}
	perEvent := float64(eventBytes) / float64(max(events, 1))
	perDelivery := float64(deliveryBytes) / float64(max(deliveries, 1))
	at50M := (50e6*perEvent + 40e6*perDelivery) / 1e9
	return newResult("disk", measurement{}, measurement{}, fmt.Sprintf(
		"audit_events %d rows in %.1f GB, webhook_deliveries %d rows in %.1f GB, indexes included (pg_total_relation_size over the partitions); "+
			"at these rates 50M events and 40M deliveries take %.0f GB", events, float64(eventBytes)/1e9, deliveries,
		float64(deliveryBytes)/1e9, at50M),
		metric{Name: "bytes/event", Ours: round(perEvent, 0)},
		metric{Name: "bytes/delivery", Ours: round(perDelivery, 0)},
		metric{Name: "GB at 50M events", Ours: round(at50M, 1)},
	), nil
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
	one := scaleOneProjectOf(size)
	head, err := st.AuditHead(ctx, benchTenant, one)
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
		r, err := queryPageRow(ctx, e, opts, pool, pageTarget{project: one, total: head.Sequence, newest: row.newest},
			row.name, row.query, row.sql, " of "+one, nil, pageTargets{})
		if err := add(row.name, []result{r}, err); err != nil {
			return out, err
		}
	}

	r, err := scaleVerifyRow(ctx, e, one, head.Sequence)
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

	rs, err = scalePurgeRows(ctx, e, size)
	if err := add("purge", rs, err); err != nil {
		return out, err
	}
	return out, nil
}

// scaleVerifyRow times verifyAuditChain over the one project's first
// scaleVerifyEvents events (one call) against pgx streaming the same rows
// and SHA-256-free decoding, so that the ratio is the cost of recomputing.
func scaleVerifyRow(ctx context.Context, e *env, project string, head uint64) (result, error) {
	n := min(head, scaleVerifyEvents)
	from, to := uint64(1), n
	id := app.Identity{Subject: "bench", TenantID: benchTenant, ProjectIDs: []string{project},
		Permissions: []app.Permission{app.PermissionAuditRead}}
	t0 := time.Now()
	in := app.VerifyAuditChainInput{ProjectID: project, FromSequence: &from, ToSequence: &to}
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
		in = app.VerifyAuditChainInput{ProjectID: project, ResumeToken: *v.ResumeToken}
	}
	ours := time.Since(t0)
	if !v.Valid || v.CheckedCount != n {
		return result{}, fmt.Errorf("verification of %d events: valid %v, checked %d, complete %v", n, v.Valid, v.CheckedCount, v.Complete)
	}
	t0 = time.Now()
	var read uint64
	err := store.New(e.pool).ScanAuditEvents(ctx, benchTenant, project, from, to, func(*domain.AuditEvent) error {
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
			n, project, calls, app.MaxVerifyRange, app.DefaultVerifyTimeBudget),
		throughput("events/s", o, b, 0)), nil
}
