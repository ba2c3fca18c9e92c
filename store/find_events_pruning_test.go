package store_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/store"
	"github.com/aetheriot/aether-audit/store/dbsqlc"
	"github.com/aetheriot/aether-audit/store/storetest"
)

// genericPartitionScans runs dbsqlc.FindAuditEventsByID of tenant, ids and
// the bounds (nil: none) as a prepared statement through its generic plan
// (the plan pgx's cached statements come to), under EXPLAIN (ANALYZE), and
// returns the partitions of audit_events it read and how many subplans its
// execution pruned.
func genericPartitionScans(t *testing.T, pool *pgxpool.Pool, tenant string, ids []uuid.UUID, from, to *time.Time) (map[string]string, int) {
	t.Helper()
	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	_, err = conn.Exec(ctx, "SET plan_cache_mode = force_generic_plan")
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "PREPARE find_events(text, uuid[], timestamptz, timestamptz) AS "+dbsqlc.FindAuditEventsByID)
	require.NoError(t, err)
	defer func() {
		_, err := conn.Exec(ctx, "DEALLOCATE find_events; RESET plan_cache_mode")
		require.NoError(t, err)
	}()
	// EXECUTE takes no bind parameters: its arguments are literals.
	literal := func(v any) string {
		require.NoError(t, conn.QueryRow(ctx, "SELECT quote_nullable($1::text)", v).Scan(&v))
		return v.(string)
	}
	idTexts := make([]string, len(ids))
	for i, id := range ids {
		idTexts[i] = id.String()
	}
	bound := func(b *time.Time) string {
		if b == nil {
			return "NULL"
		}
		return literal(b.Format(time.RFC3339Nano))
	}
	var raw []byte
	require.NoError(t, conn.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE find_events("+literal(tenant)+", "+
		literal("{"+strings.Join(idTexts, ",")+"}")+", "+bound(from)+", "+bound(to)+")").Scan(&raw))
	scans, _, removed := planPartitions(t, conn, "audit_events", raw)
	return scans, removed
}

// TestFindAuditEventsByIDPrunesInAGenericPlan: FindAuditEventsByID with
// bounds on the recording time reads only the partitions of its range,
// even through the generic plan of a prepared statement, where the bounds
// are parameters known only at execution; without bounds it finds the
// tenant's events in every month, one outside any range the bounded call
// was given included.
func TestFindAuditEventsByIDPrunesInAGenericPlan(t *testing.T) {
	ctx := context.Background()
	pool := storetest.NewPool(t)
	st := store.New(pool)
	now := time.Now().UTC()
	thisMonth := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	_, err := st.CreateAuditPartitions(ctx, thisMonth.AddDate(0, 3, 0))
	require.NoError(t, err)
	var ids []uuid.UUID
	for i := range 4 { // an event in each of four months
		id := uuid.New()
		ids = append(ids, id)
		at := thisMonth.AddDate(0, i, 2)
		_, err := pool.Exec(ctx, `INSERT INTO audit_events (tenant_id, project_id, sequence, id, action, occurred_at, recorded_at,
			subject_type, subject_id, resource_type, resource_id, outcome, details, input_fingerprint, chain_hash,
			chain_version, recorded_by_subject)
			VALUES ('t1', 'p1', $1, $2, 'doc.k', $3, $3, 'USER', 'u', 'doc', 'd', 'SUCCESS', '{}', '\x00', '\x00', 2, 'seed')`,
			i+1, id, at)
		require.NoError(t, err)
	}
	var partitions int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_partition_tree('audit_events') WHERE isleaf`).Scan(&partitions))
	require.GreaterOrEqual(t, partitions, 5, "several monthly partitions")

	// Bounded within the second month: that month's partition only.
	from := thisMonth.AddDate(0, 1, 1)
	to := from.AddDate(0, 0, 3)
	scans, removed := genericPartitionScans(t, pool, "t1", ids, &from, &to)
	second := "audit_events_p" + from.Format("200601")
	require.Len(t, scans, 1, "the bounded generic plan reads its month only")
	require.Contains(t, scans, second)
	require.Equal(t, partitions-1, removed, "the other partitions are pruned at execution")

	rows, _ := pool.Query(ctx, dbsqlc.FindAuditEventsByID, "t1", ids, from, to)
	found, err := pgx.CollectRows(rows, pgx.RowToStructByPos[dbsqlc.AuditEvent])
	require.NoError(t, err)
	require.Len(t, found, 1)
	require.Equal(t, ids[1], found[0].ID)

	// Unbounded: every partition, and every event, the first month's (outside
	// the range above) included.
	scans, removed = genericPartitionScans(t, pool, "t1", ids, nil, nil)
	require.Len(t, scans, partitions)
	require.Zero(t, removed)
	byID, err := st.FindAuditEventsByID(ctx, "t1", ids)
	require.NoError(t, err)
	require.Len(t, byID, 4)
	require.Contains(t, byID, ids[0])
}
