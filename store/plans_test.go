package store_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/store"
	"github.com/aetheriot/aether-audit/store/storetest"
)

// planProjectEvents is how many events the test's new project holds before
// the few recorded through the service; bulkProjectEvents, how many each
// of its projects loaded without their runs holds.
const (
	planProjectEvents = 200_000
	bulkProjectEvents = 50_000
)

// TestQueryPlansDoNotNeedFreshStatistics records projects into a table
// whose statistics predate them (autovacuum never runs in tests), then runs
// every query shape of audit_events through the store and asserts the plan
// PostgreSQL chose for exactly the statement and arguments the store sent:
// each reads one partition, through the one index that serves both its
// conditions and its order, with no Sort and no sequential or bitmap scan.
// With the 1-row estimate of an unknown project every index of the project
// costs the same, so a shape that needed a sort whichever index it read (the
// export by time, before migration 00021) got any of them plus a sort of the
// whole range; and a statement over several partitions got a Sort over an
// Append of them (the empty months ahead cost nothing to scan unordered)
// that read the whole project after a deep page's cursor (the scale
// benchmark's deep page at 10M, issue 19).
//
// The assertions name indexes by their key columns, not their names, and
// accept a sequential scan of an empty partition (a month ahead). The
// projects:
//   - p-new spans two monthly partitions (the DEFAULT one, for last month,
//     and this month's), both analyzed before it was loaded; the pages,
//     ranges and streams that cross from one to the other are asserted on
//     each side;
//   - p-old, a small project the statistics know (analyzed);
//   - p-bulk and p-fresh were loaded without their runs
//     (audit_project_segments) and with a head that knows no time, as
//     events stored before partitioning are (or a bulk load that bypasses
//     the store): the store cannot bound their reads by a month. p-bulk is
//     in this month's partition, analyzed when it held a tenth of p-bulk
//     (estimates of sequence > a deep cursor are then a few rows); p-fresh
//     in a month's partition created after the ANALYZE, never analyzed;
//   - p-gap has a run last month and the next in the month after next:
//     its first run's events are all last month's (an append that moved
//     it on would have started a run), so its reads end with that month.
func TestQueryPlansDoNotNeedFreshStatistics(t *testing.T) {
	ctx := context.Background()
	tracer := &lastQuery{}
	pool, st := tracedStore(t, tracer, 0)

	// Events are 100 ms apart from base, three hours before this month
	// began: p-new's first 108,000 are last month's.
	now := time.Now().UTC()
	month := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	base := month.Add(-3 * time.Hour)
	const crossing = 108_000
	// load inserts events from..to of tenant/project, event g recorded
	// (and occurred) at at + g × 100 ms.
	load := func(tenant, project string, from, to int, at time.Time) {
		t.Helper()
		_, err := pool.Exec(ctx, `INSERT INTO audit_events (tenant_id, project_id, sequence, id, action, occurred_at, recorded_at,
			subject_type, subject_id, resource_type, resource_id, outcome, details, input_fingerprint, chain_hash,
			chain_version, recorded_by_subject)
		SELECT $1, $2, g, gen_random_uuid(), 'doc.k' || (g % 7), $5::timestamptz + g * interval '100 ms',
			$5::timestamptz + g * interval '100 ms', 'USER', 'u' || (g % 50), 'doc', 'd' || (g % 1000), 'SUCCESS', '{}',
			'\x00', '\x00', 2, 'seed'
		FROM generate_series($3::int, $4::int) g`, tenant, project, from, to, at)
		require.NoError(t, err)
	}
	// setHead sets the head of tenant/project at sequence n, recorded at
	// last (the zero time: a head that knows no time).
	setHead := func(tenant, project string, n int, last time.Time) {
		t.Helper()
		if last.IsZero() {
			last = time.Time{}.UTC()
		}
		_, err := pool.Exec(ctx, `INSERT INTO audit_project_heads (tenant_id, project_id, last_sequence, last_hash, last_recorded_at)
			VALUES ($1, $2, $3, $4, $5) ON CONFLICT (tenant_id, project_id) DO UPDATE SET last_sequence = EXCLUDED.last_sequence`,
			tenant, project, n, make([]byte, 32), last)
		require.NoError(t, err)
	}
	fill := func(tenant, project string, n int) {
		t.Helper()
		load(tenant, project, 1, n, base)
		setHead(tenant, project, n, base.Add(time.Duration(n)*100*time.Millisecond))
		// Where the project's runs of sequences start, as appends record them.
		_, err := pool.Exec(ctx, `INSERT INTO audit_project_segments (tenant_id, project_id, first_sequence, recorded_from)
			VALUES ($1, $2, 1, $3)`, tenant, project, month.AddDate(0, -1, 0))
		require.NoError(t, err)
		if n >= crossing {
			_, err = pool.Exec(ctx, `INSERT INTO audit_project_segments (tenant_id, project_id, first_sequence, recorded_from)
				VALUES ($1, $2, $3, $4)`, tenant, project, crossing, month)
			require.NoError(t, err)
		}
	}
	// The statistics predate the projects: the table is analyzed with only
	// another tenant's project and a tenth of p-bulk in it, then the
	// projects are bulk-loaded.
	fill("t-old", "p-old", 20_000)
	bulkAt := month.Add(time.Hour)
	load("t-bulk", "p-bulk", 1, bulkProjectEvents/10, bulkAt)
	_, err := pool.Exec(ctx, "ANALYZE audit_events")
	require.NoError(t, err)
	fill("t-new", "p-new", planProjectEvents)
	load("t-bulk", "p-bulk", bulkProjectEvents/10+1, bulkProjectEvents, bulkAt)
	setHead("t-bulk", "p-bulk", bulkProjectEvents, time.Time{})
	// p-fresh: in a month's partition created after the ANALYZE.
	freshAt := month.AddDate(0, 6, 0)
	_, err = st.CreateAuditPartitions(ctx, freshAt)
	require.NoError(t, err)
	var analyzed float64
	require.NoError(t, pool.QueryRow(ctx, `SELECT reltuples FROM pg_class WHERE oid = to_regclass($1)`,
		"audit_events_p"+freshAt.Format("200601")).Scan(&analyzed))
	require.Equal(t, float64(-1), analyzed, "p-fresh's partition was never analyzed")
	load("t-fresh", "p-fresh", 1, bulkProjectEvents, freshAt.Add(time.Hour))
	setHead("t-fresh", "p-fresh", bulkProjectEvents, time.Time{})
	// p-gap: a run last month, none this month or the next, a run the
	// month after (its events recorded from gapAt).
	gapAt := month.AddDate(0, 2, 0).Add(time.Hour)
	load("t-gap", "p-gap", 1, 5_000, base)
	load("t-gap", "p-gap", 5_001, 20_000, gapAt)
	setHead("t-gap", "p-gap", 20_000, gapAt.Add(20_000*100*time.Millisecond))
	_, err = pool.Exec(ctx, `INSERT INTO audit_project_segments (tenant_id, project_id, first_sequence, recorded_from)
		VALUES ('t-gap', 'p-gap', 1, $1), ('t-gap', 'p-gap', 5001, $2)`, month.AddDate(0, -1, 0), month.AddDate(0, 2, 0))
	require.NoError(t, err)

	// A few more through the service, on top of the bulk.
	a := app.New(st, app.Config{})
	id := app.Identity{Subject: "seed", TenantID: "t-new", ProjectIDs: []string{"p-new"},
		Permissions: []app.Permission{app.PermissionAuditWrite}}
	var drafts []domain.AuditEventDraft
	for i := range 5 {
		drafts = append(drafts, domain.AuditEventDraft{ProjectID: "p-new", Action: "doc.k3", OccurredAt: base.Add(time.Duration(i) * time.Second),
			Subject: domain.Subject{Type: domain.SubjectUser, ID: "u3"}, Resource: domain.Resource{Type: "doc", ID: "d3"},
			Outcome: domain.OutcomeSuccess})
	}
	_, err = a.RecordAuditEvents(ctx, id, app.RecordAuditEventsInput{Events: drafts})
	require.NoError(t, err)

	for _, p := range []struct {
		tenant, project string
		head            uint64
		at              time.Time // event g was recorded at at + g × 100 ms
		crossing        uint64    // the first sequence of a second run, 0 for none
		known           bool      // analyzed: filtered pages may read the primary key
	}{
		{"t-new", "p-new", uint64(planProjectEvents + len(drafts)), base, crossing, false},
		{"t-old", "p-old", 20_000, base, 0, true},
		{"t-bulk", "p-bulk", bulkProjectEvents, bulkAt, 0, false},
		{"t-fresh", "p-fresh", bulkProjectEvents, freshAt.Add(time.Hour), 0, false},
		{"t-gap", "p-gap", 20_000, gapAt, 5_001, false},
	} {
		t.Run(p.project, func(t *testing.T) {
			for _, shape := range planShapes(ctx, st, p.tenant, p.project, p.head, p.at, p.crossing) {
				t.Run(shape.name, func(t *testing.T) {
					tracer.reset()
					require.NoError(t, shape.run())
					statements := tracer.get()
					require.NotEmpty(t, statements, "the shape read audit_events")
					for _, q := range statements {
						indexes := [][]string{shape.index}
						if p.known && shape.filtered {
							// The statistics know every event matches: reading
							// the primary key in order and filtering is as good.
							indexes = append(indexes, []string{"tenant_id", "project_id", "sequence"})
						}
						scans := requireIndexScans(t, pool, "audit_events", q.sql, q.args, false, indexes)
						require.Equal(t, 1, scans, "statement reads %d partitions: %s", scans, q.sql)
					}
				})
			}
		})
	}
}

// planShape is a query shape of audit_events: run reads through the store,
// and each statement it sends must read index (key columns); filtered: a
// page filtered by a column other than sequence.
type planShape struct {
	name     string
	run      func() error
	index    []string
	filtered bool
}

// planShapes returns every query shape of audit_events on tenant/project,
// whose events 1..head were recorded 100 ms apart from at (after the
// first); with crossing, the pages and ranges that cross from the run
// before crossing to the run from it.
func planShapes(ctx context.Context, st *store.Store, tenant, project string, head uint64, at time.Time, crossing uint64) []planShape {
	keys := func(cols ...string) []string { return append([]string{"tenant_id", "project_id"}, cols...) }
	pkey := keys("sequence")
	u := func(v uint64) *uint64 { return &v }
	doc3, err := domain.ParseActionPattern("action", "doc.k3")
	if err != nil {
		panic(err)
	}
	deep := head / 2
	// pageOf reads a page of at most 101 events and requires want.
	pageOf := func(want int, order domain.SortOrder, after *uint64, f domain.AuditEventFilter) func() error {
		return func() error {
			events, err := st.SearchAuditEvents(ctx, tenant, project, f, domain.AuditEventPage{Order: order, After: after, Limit: 101})
			if err == nil && len(events) != want {
				err = fmt.Errorf("page of %d events, want %d", len(events), want)
			}
			return err
		}
	}
	page := func(order domain.SortOrder, after *uint64, f domain.AuditEventFilter) func() error {
		return pageOf(101, order, after, f)
	}
	// Resource d7 is that of events 7, 1007, 2007, …
	d7After := head / 20
	d7 := min(101, int((head-7)/1000-(d7After-7)/1000))
	count := func(want uint64, run func(fn func(*domain.AuditEvent) error) error) func() error {
		return func() error {
			var n uint64
			if err := run(func(*domain.AuditEvent) error { n++; return nil }); err != nil {
				return err
			}
			if n != want {
				return fmt.Errorf("streamed %d events, want %d", n, want)
			}
			return nil
		}
	}
	// Ranges: half the project from its first quarter (across the runs,
	// with a crossing).
	from, to := head/4+1, head/4+head/2
	shapes := []planShape{
		{"newest page", page(domain.NewestFirst, nil, domain.AuditEventFilter{}), pkey, false},
		{"oldest page", page(domain.OldestFirst, nil, domain.AuditEventFilter{}), pkey, false},
		{"deep page oldest-first", page(domain.OldestFirst, &deep, domain.AuditEventFilter{}), pkey, false},
		{"deep page newest-first", page(domain.NewestFirst, &deep, domain.AuditEventFilter{}), pkey, false},
		{"live catch-up", page(domain.OldestFirst, u(head-101), domain.AuditEventFilter{}), pkey, false},
		{"page by action", page(domain.OldestFirst, &deep, domain.AuditEventFilter{Action: &doc3}), keys("action", "sequence"), true},
		{"page by subject", page(domain.NewestFirst, &deep, domain.AuditEventFilter{SubjectID: "u7"}), keys("subject_id", "sequence"), true},
		{"page by resource", pageOf(d7, domain.OldestFirst, &d7After, domain.AuditEventFilter{ResourceType: "doc", ResourceID: "d7"}),
			keys("resource_type", "resource_id", "sequence"), true},
		{"page by recorder", page(domain.OldestFirst, &deep, domain.AuditEventFilter{RecordedBySubject: "seed"}),
			keys("recorded_by_subject", "sequence"), true},
		{"event by sequence", func() error {
			_, err := st.GetAuditEventBySequence(ctx, tenant, project, deep)
			return err
		}, pkey, false},
		{"verification range", count(to-from+1, func(fn func(*domain.AuditEvent) error) error {
			return st.ScanAuditEvents(ctx, tenant, project, from, to, fn)
		}), pkey, false},
		{"export by sequence", count(to-from+1, func(fn func(*domain.AuditEvent) error) error {
			return st.StreamAuditEventsBySequence(ctx, tenant, project, from, to, nil, fn)
		}), pkey, false},
		// Events 6,000 to 11,999 occurred in the window.
		{"export by time", count(6_000, func(fn func(*domain.AuditEvent) error) error {
			return st.StreamAuditEventsByTime(ctx, tenant, project, at.Add(10*time.Minute), at.Add(20*time.Minute), nil, fn)
		}), keys("occurred_at", "sequence"), false},
		{"webhook fan-out refs", func() error {
			refs, err := st.AuditEventRefs(ctx, tenant, project, deep, deep+99)
			if err == nil && len(refs) != 100 {
				err = fmt.Errorf("%d refs, want 100", len(refs))
			}
			return err
		}, pkey, false},
	}
	if crossing > 0 {
		shapes = append(shapes,
			planShape{"page across the month, oldest-first", page(domain.OldestFirst, u(crossing-50), domain.AuditEventFilter{}), pkey, false},
			planShape{"page across the month, newest-first", page(domain.NewestFirst, u(crossing+50), domain.AuditEventFilter{}), pkey, false},
		)
	}
	return shapes
}

// tracedStore returns a pool on a new test database whose statements go
// through tracer, of at most maxConns connections (0: the pool's default),
// and a store over it.
func tracedStore(t *testing.T, tracer pgx.QueryTracer, maxConns int32) (*pgxpool.Pool, *store.Store) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(storetest.NewDatabase(t))
	require.NoError(t, err)
	cfg.ConnConfig.Tracer = tracer
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool, store.New(pool)
}

// lastQuery is a pgx tracer that keeps the statements sent since its last
// reset that contain match (default: that read audit_events), with their
// arguments.
type lastQuery struct {
	match      string
	mu         sync.Mutex
	statements []tracedQuery
}

// tracedQuery is one statement a lastQuery saw.
type tracedQuery struct {
	sql  string
	args []any
}

// TraceQueryStart implements pgx.QueryTracer.
func (l *lastQuery) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if strings.Contains(data.SQL, cmp.Or(l.match, "FROM audit_events")) {
		l.mu.Lock()
		l.statements = append(l.statements, tracedQuery{data.SQL, slices.Clone(data.Args)})
		l.mu.Unlock()
	}
	return ctx
}

// TraceQueryEnd implements pgx.QueryTracer.
func (l *lastQuery) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (l *lastQuery) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.statements = nil
}

func (l *lastQuery) get() []tracedQuery {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.statements)
}

// planNode is a node of EXPLAIN (FORMAT JSON).
type planNode struct {
	NodeType  string `json:"Node Type"`
	Relation  string `json:"Relation Name"`
	IndexName string `json:"Index Name"`
	// SubplansRemoved counts the partitions an Append pruned when it
	// started (EXPLAIN ANALYZE of a generic plan).
	SubplansRemoved int        `json:"Subplans Removed"`
	Plans           []planNode `json:"Plans"`
}

// requireIndexScans explains sql with args and requires that it scans
// table (or its partitions), each time with an index scan of an index whose
// key columns are one of keys, and, unless sorts, that no node sorts. It
// returns how many scans of table (partitions) the plan has.
func requireIndexScans(t *testing.T, pool *pgxpool.Pool, table, sql string, args []any, sorts bool, keys [][]string) int {
	t.Helper()
	ctx := context.Background()
	require.NotEmpty(t, sql, "the shape read %s", table)
	var raw []byte
	require.NoError(t, pool.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+sql, args...).Scan(&raw))
	var plans []struct {
		Plan planNode `json:"Plan"`
	}
	require.NoError(t, json.Unmarshal(raw, &plans))
	require.Len(t, plans, 1)
	scans := 0
	var walk func(n planNode)
	walk = func(n planNode) {
		if !sorts && !onlyEmptyScans(t, pool, n) {
			// A sort of what an empty partition holds sorts nothing.
			require.NotContains(t, []string{"Sort", "Incremental Sort"}, n.NodeType, "plan sorts:\n%s", raw)
		}
		if n.Relation != "" && n.NodeType != "ModifyTable" {
			var root string
			require.NoError(t, pool.QueryRow(ctx, `SELECT COALESCE(pg_partition_root(to_regclass($1)), to_regclass($1))::text`,
				n.Relation).Scan(&root))
			if root == table {
				scans++
				if n.NodeType == "Seq Scan" && emptyRelation(t, pool, n.Relation) {
					// A partition with no row yet (a month ahead): the
					// planner sees its real size, so it reads its index
					// once it holds rows.
					return
				}
				require.Contains(t, []string{"Index Scan", "Index Only Scan"}, n.NodeType, "plan does not read an index:\n%s", raw)
				var cols []string
				require.NoError(t, pool.QueryRow(ctx, `SELECT array_agg(a.attname::text ORDER BY k.ord)
					FROM pg_index i, unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord), pg_attribute a
					WHERE i.indexrelid = to_regclass($1) AND k.ord <= i.indnkeyatts
					  AND a.attrelid = i.indrelid AND a.attnum = k.attnum`, n.IndexName).Scan(&cols))
				require.Contains(t, keys, cols, "plan reads %s through index %s:\n%s", table, n.IndexName, raw)
			}
		}
		for _, c := range n.Plans {
			walk(c)
		}
	}
	walk(plans[0].Plan)
	require.Positive(t, scans, "plan reads %s:\n%s", table, raw)
	return scans
}

// onlyEmptyScans reports whether every scan under n is a sequential scan
// of an empty relation (and there is one).
func onlyEmptyScans(t *testing.T, pool *pgxpool.Pool, n planNode) bool {
	t.Helper()
	if n.Relation != "" {
		return n.NodeType == "Seq Scan" && len(n.Plans) == 0 && emptyRelation(t, pool, n.Relation)
	}
	for _, c := range n.Plans {
		if !onlyEmptyScans(t, pool, c) {
			return false
		}
	}
	return len(n.Plans) > 0
}

// emptyRelation reports whether the table rel holds no row.
func emptyRelation(t *testing.T, pool *pgxpool.Pool, rel string) bool {
	t.Helper()
	var any bool
	require.NoError(t, pool.QueryRow(context.Background(),
		"SELECT EXISTS (SELECT 1 FROM "+pgx.Identifier{rel}.Sanitize()+")").Scan(&any))
	return !any
}
