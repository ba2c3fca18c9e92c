package main

// The scale scenario's purge rows: a month of events removed by the
// retention purge as the product runs it (PurgeExpiredAuditEvents), first
// a month whose partition is wholly past every retention (dropped whole),
// then, labelled, a month that shares its partitions with other projects'
// newer events (deleted row by row).

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/store"
)

// scalePurgeDropMonthsAgo is how many months before the current one the
// month dropped whole lies: every event of its partition is then older
// than app.DefaultAuditRetention (400 days), and older than every other
// scale project's (scaleHistory).
const scalePurgeDropMonthsAgo = 15

// scalePurgeRows loads and purges the two months of size (size/20 events
// each, the one project's monthly rate) and returns their rows.
func scalePurgeRows(ctx context.Context, e *env, size int) ([]result, error) {
	if _, err := e.pool.Exec(ctx, `INSERT INTO audit_retention_overrides (tenant_id, retention_days, updated_at, updated_by)
		VALUES ($1, $2, now(), 'bench-scale') ON CONFLICT (tenant_id) DO UPDATE SET retention_days = EXCLUDED.retention_days`,
		scalePurgeTenant, scalePurgeRetentionDays); err != nil {
		return nil, err
	}
	events := uint64(max(size/20, 1000))
	purger := app.New(store.New(e.pool), app.Config{AuditRetention: app.DefaultAuditRetention})
	var out []result

	// A month wholly past every retention: its partition, created for it
	// (again, on a rerun: the last run dropped it), holds only its events.
	month := monthOf(time.Now()).AddDate(0, -scalePurgeDropMonthsAgo, 0)
	if _, err := store.New(e.pool).CreatePastAuditPartitions(ctx, month, month); err != nil {
		return out, err
	}
	partition := "audit_events_p" + month.Format("200601")
	project, err := loadPurgeMonth(ctx, e, size, events, month, month.AddDate(0, 1, 0).Sub(month))
	if err != nil {
		return out, err
	}
	r, err := measurePurge(ctx, e, purger, events, false, fmt.Sprintf(
		"%d events of %s/%s recorded in %s, past the service's %d-day retention and every tenant's, through PurgeExpiredAuditEvents: "+
			"their partition %s is dropped whole (DETACH and DROP)", events, scalePurgeTenant, project, month.Format("2006-01"),
		int(app.DefaultAuditRetention.Hours()/24), partition))
	if err != nil {
		return out, err
	}
	var left bool
	if err := e.pool.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", partition).Scan(&left); err != nil {
		return out, err
	}
	if left {
		return out, fmt.Errorf("purge of %s: partition %s was not dropped (a tenant's retention longer than %s?)",
			project, partition, app.DefaultAuditRetention)
	}
	r.Scenario = "purge of one month by partition drop"
	out = append(out, r)

	// A month 31 to 60 days old under the tenant's 30-day retention: its
	// partitions hold the other projects' events too, so it is deleted
	// row by row (the prefix delete).
	from := time.Now().Add(-60 * 24 * time.Hour)
	if project, err = loadPurgeMonth(ctx, e, size, events, from, 29*24*time.Hour); err != nil {
		return out, err
	}
	r, err = measurePurge(ctx, e, purger, events, true, fmt.Sprintf(
		"%d events of %s/%s, 31 to 60 days old, past the tenant's %d-day retention, through PurgeExpiredAuditEvents: "+
			"the prefix delete in batches of %d (their partitions hold other projects' newer events)",
		events, scalePurgeTenant, project, scalePurgeRetentionDays, app.DefaultPurgeBatch))
	if err != nil {
		return out, err
	}
	r.Scenario = "purge of one month row by row"
	return append(out, r), nil
}

// loadPurgeMonth loads n events of a new project of scalePurgeTenant,
// recorded evenly over [from, from+span), and returns the project. A
// project of its own each time: a purge records its audit event
// (audit.events.purged) in the purged project, so an older month can never
// follow it there.
func loadPurgeMonth(ctx context.Context, e *env, size int, n uint64, from time.Time, span time.Duration) (string, error) {
	project := fmt.Sprintf("%s-%s-%d", scalePurgeProject, randomHex(4), size)
	var loaded atomic.Int64
	return project, copyChained(ctx, e, scalePurgeTenant, project, n, from, span, &loaded)
}

// measurePurge times PurgeExpiredAuditEvents until it has nothing left,
// with audit_events' dead tuples and size before and after. With
// deletes, it waits (at most 15 s) for the purging backends' deletes to
// reach the statistics views.
func measurePurge(ctx context.Context, e *env, purger *app.App, want uint64, deletes bool, note string) (result, error) {
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
	var dead1, size1 int64
	for wait := time.Now(); ; {
		if dead1, size1, err = deadTuples(); err != nil {
			return result{}, err
		}
		if !deletes || dead1-dead0 >= purged || time.Since(wait) > 15*time.Second {
			break
		}
		if err := sleepCtx(ctx, 200*time.Millisecond); err != nil {
			return result{}, err
		}
	}
	if purged < int64(want) {
		return result{}, fmt.Errorf("purged %d events, want at least %d", purged, want)
	}
	o := measurement{units: purged, ops: purged, elapsed: took}
	return newResult("purge", o, measurement{}, fmt.Sprintf(
		"%s; audit_events dead tuples %d before, %d after; table %d MB before, %d MB after",
		note, dead0, dead1, size0>>20, size1>>20),
		metric{Name: "seconds", Ours: round(took.Seconds(), 2)},
		metric{Name: "events/s", Ours: round(float64(purged)/took.Seconds(), 0)},
		metric{Name: "dead tuples added", Ours: float64(dead1 - dead0)},
		metric{Name: "table MB added", Ours: float64((size1 - size0) >> 20)},
	), nil
}
