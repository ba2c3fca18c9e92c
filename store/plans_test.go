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
// the few recorded through the service.
const planProjectEvents = 200_000

// TestQueryPlansDoNotNeedFreshStatistics records a project of a few hundred
// thousand events into a table whose statistics predate it (analyzed when
// only another, smaller project existed; autovacuum never runs in tests),
// then runs every query shape of audit_events through the store and asserts
// the plan PostgreSQL chose for exactly the statement and arguments the store
// sent: each reads the one index that serves both its conditions and its
// order, with no Sort and no sequential or bitmap scan. With the 1-row
// estimate of an unknown project every index of the project costs the same,
// so a shape that needed a sort whichever index it read (the export by time,
// before migration 00021) got any of them plus a sort of the whole range.
//
// The assertions name indexes by their key columns, not their names, and
// accept the scans of partitions under Append or MergeAppend: they hold when
// audit_events is a partitioned table. The project spans two monthly
// partitions (the DEFAULT one, for last month, and this month's), both
// analyzed before it was loaded, and the pages, ranges and streams that
// cross from one to the other are asserted on each side: every statement
// the store sends must read one partition's index.
func TestQueryPlansDoNotNeedFreshStatistics(t *testing.T) {
	ctx := context.Background()
	tracer := &lastQuery{}
	pool, st := tracedStore(t, tracer)

	const tenant, project = "t-new", "p-new"
	// Events are 100 ms apart from base, three hours before this month
	// began: the project's first 108,000 are last month's.
	now := time.Now().UTC()
	month := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	base := month.Add(-3 * time.Hour)
	const crossing = 108_000
	fill := func(tenant, project string, n int) {
		t.Helper()
		_, err := pool.Exec(ctx, `INSERT INTO audit_events (tenant_id, project_id, sequence, id, action, occurred_at, recorded_at,
			subject_type, subject_id, resource_type, resource_id, outcome, details, input_fingerprint, chain_hash,
			chain_version, recorded_by_subject)
		SELECT $1, $2, g, gen_random_uuid(), 'doc.k' || (g % 7), $4::timestamptz + g * interval '100 ms',
			$4::timestamptz + g * interval '100 ms', 'USER', 'u' || (g % 50), 'doc', 'd' || (g % 1000), 'SUCCESS', '{}',
			'\x00', '\x00', 2, 'seed'
		FROM generate_series(1, $3::int) g`, tenant, project, n, base)
		require.NoError(t, err)
		last := base.Add(time.Duration(n) * 100 * time.Millisecond)
		_, err = pool.Exec(ctx, `INSERT INTO audit_project_heads (tenant_id, project_id, last_sequence, last_hash, last_recorded_at)
			VALUES ($1, $2, $3, $4, $5)`, tenant, project, n, make([]byte, 32), last)
		require.NoError(t, err)
		// Where the project's runs of sequences start, as appends record them.
		_, err = pool.Exec(ctx, `INSERT INTO audit_project_segments (tenant_id, project_id, first_sequence, recorded_from)
			VALUES ($1, $2, 1, $3)`, tenant, project, month.AddDate(0, -1, 0))
		require.NoError(t, err)
		if n >= crossing {
			_, err = pool.Exec(ctx, `INSERT INTO audit_project_segments (tenant_id, project_id, first_sequence, recorded_from)
				VALUES ($1, $2, $3, $4)`, tenant, project, crossing, month)
			require.NoError(t, err)
		}
	}
	// The statistics predate the project: the table is analyzed with only
	// another tenant's project in it, then the project is bulk-loaded.
	fill("t-old", "p-old", 20_000)
	_, err := pool.Exec(ctx, "ANALYZE audit_events")
	require.NoError(t, err)
	fill(tenant, project, planProjectEvents)

	// A few more through the service, on top of the bulk.
	a := app.New(st, app.Config{})
	id := app.Identity{Subject: "seed", TenantID: tenant, ProjectIDs: []string{project},
		Permissions: []app.Permission{app.PermissionAuditWrite}}
	var drafts []domain.AuditEventDraft
	for i := range 5 {
		drafts = append(drafts, domain.AuditEventDraft{ProjectID: project, Action: "doc.k3", OccurredAt: base.Add(time.Duration(i) * time.Second),
			Subject: domain.Subject{Type: domain.SubjectUser, ID: "u3"}, Resource: domain.Resource{Type: "doc", ID: "d3"},
			Outcome: domain.OutcomeSuccess})
	}
	_, err = a.RecordAuditEvents(ctx, id, app.RecordAuditEventsInput{Events: drafts})
	require.NoError(t, err)
	head := uint64(planProjectEvents + len(drafts))

	keys := func(cols ...string) []string { return append([]string{"tenant_id", "project_id"}, cols...) }
	pkey := keys("sequence")
	u := func(v uint64) *uint64 { return &v }
	doc3, err := domain.ParseActionPattern("action", "doc.k3")
	require.NoError(t, err)
	deep := uint64(planProjectEvents / 2)
	page := func(order domain.SortOrder, after *uint64, f domain.AuditEventFilter) func() error {
		return func() error {
			events, err := st.SearchAuditEvents(ctx, tenant, project, f, domain.AuditEventPage{Order: order, After: after, Limit: 101})
			if err == nil && len(events) != 101 {
				err = fmt.Errorf("page of %d events, want 101", len(events))
			}
			return err
		}
	}
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
	for _, shape := range []struct {
		name  string
		run   func() error
		index []string
	}{
		{"newest page", page(domain.NewestFirst, nil, domain.AuditEventFilter{}), pkey},
		{"oldest page", page(domain.OldestFirst, nil, domain.AuditEventFilter{}), pkey},
		{"deep page oldest-first", page(domain.OldestFirst, &deep, domain.AuditEventFilter{}), pkey},
		{"deep page newest-first", page(domain.NewestFirst, &deep, domain.AuditEventFilter{}), pkey},
		{"page across the month, oldest-first", page(domain.OldestFirst, u(crossing-50), domain.AuditEventFilter{}), pkey},
		{"page across the month, newest-first", page(domain.NewestFirst, u(crossing+50), domain.AuditEventFilter{}), pkey},
		{"live catch-up", page(domain.OldestFirst, u(head-101), domain.AuditEventFilter{}), pkey},
		{"page by action", page(domain.OldestFirst, &deep, domain.AuditEventFilter{Action: &doc3}), keys("action", "sequence")},
		{"page by subject", page(domain.NewestFirst, &deep, domain.AuditEventFilter{SubjectID: "u7"}), keys("subject_id", "sequence")},
		{"page by resource", page(domain.OldestFirst, u(10_000), domain.AuditEventFilter{ResourceType: "doc", ResourceID: "d7"}),
			keys("resource_type", "resource_id", "sequence")},
		{"page by recorder", page(domain.OldestFirst, &deep, domain.AuditEventFilter{RecordedBySubject: "seed"}),
			keys("recorded_by_subject", "sequence")},
		{"verification range across the month", count(100_000, func(fn func(*domain.AuditEvent) error) error {
			return st.ScanAuditEvents(ctx, tenant, project, 50_001, 150_000, fn)
		}), pkey},
		{"export by sequence across the month", count(100_000, func(fn func(*domain.AuditEvent) error) error {
			return st.StreamAuditEventsBySequence(ctx, tenant, project, 50_001, 150_000, nil, fn)
		}), pkey},
		{"export by time", count(36_000, func(fn func(*domain.AuditEvent) error) error {
			return st.StreamAuditEventsByTime(ctx, tenant, project, base.Add(time.Hour), base.Add(2*time.Hour), nil, fn)
		}), keys("occurred_at", "sequence")},
		{"webhook fan-out refs", func() error {
			refs, err := st.AuditEventRefs(ctx, tenant, project, deep, deep+99)
			if err == nil && len(refs) != 100 {
				err = fmt.Errorf("%d refs, want 100", len(refs))
			}
			return err
		}, pkey},
	} {
		t.Run(shape.name, func(t *testing.T) {
			tracer.reset()
			require.NoError(t, shape.run())
			statements := tracer.get()
			require.NotEmpty(t, statements, "the shape read audit_events")
			for _, q := range statements {
				scans := requireIndexPlan(t, pool, q.sql, q.args, shape.index)
				if shape.index[2] == "sequence" {
					// By sequence: each statement reads one partition.
					require.Equal(t, 1, scans, "statement reads %d partitions: %s", scans, q.sql)
				}
			}
		})
	}
}

// tracedStore returns a pool on a new test database whose statements go
// through tracer, and a store over it.
func tracedStore(t *testing.T, tracer pgx.QueryTracer) (*pgxpool.Pool, *store.Store) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(storetest.NewDatabase(t))
	require.NoError(t, err)
	cfg.ConnConfig.Tracer = tracer
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
	NodeType  string     `json:"Node Type"`
	Relation  string     `json:"Relation Name"`
	IndexName string     `json:"Index Name"`
	Plans     []planNode `json:"Plans"`
}

// requireIndexPlan explains sql with args as the store ran it and requires
// that every scan of audit_events (or of one of its partitions) is an index
// scan of an index whose key columns are index, and that no node sorts. It
// returns how many scans of audit_events (partitions) the plan has.
func requireIndexPlan(t *testing.T, pool *pgxpool.Pool, sql string, args []any, index []string) int {
	t.Helper()
	return requireIndexScans(t, pool, "audit_events", sql, args, false, [][]string{index})
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
		if !sorts {
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

// emptyRelation reports whether the table rel holds no row.
func emptyRelation(t *testing.T, pool *pgxpool.Pool, rel string) bool {
	t.Helper()
	var any bool
	require.NoError(t, pool.QueryRow(context.Background(),
		"SELECT EXISTS (SELECT 1 FROM "+pgx.Identifier{rel}.Sanitize()+")").Scan(&any))
	return !any
}
