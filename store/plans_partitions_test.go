package store_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/store"
	"github.com/aetheriot/aether-audit/store/dbsqlc"
	"github.com/aetheriot/aether-audit/store/storetest"
)

// partitionScans explains sql with args and returns the partitions of
// root its plan reads, with the plan's node types.
func partitionScans(t *testing.T, pool *pgxpool.Pool, root, sql string, args ...any) (map[string]string, map[string]bool) {
	t.Helper()
	var raw []byte
	require.NoError(t, pool.QueryRow(context.Background(), "EXPLAIN (FORMAT JSON) "+sql, args...).Scan(&raw))
	scans, nodes, _ := planPartitions(t, pool, root, raw)
	return scans, nodes
}

// rowQuerier is what planPartitions asks its questions of: a pool or one
// of its connections.
type rowQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// planPartitions walks raw, the output of EXPLAIN (FORMAT JSON), and
// returns the partitions of root the plan reads with their node types, the
// plan's node types, and the subplans its Appends pruned at execution.
func planPartitions(t *testing.T, q rowQuerier, root string, raw []byte) (map[string]string, map[string]bool, int) {
	t.Helper()
	var plans []struct {
		Plan planNode `json:"Plan"`
	}
	require.NoError(t, json.Unmarshal(raw, &plans))
	scans, nodes, removed := map[string]string{}, map[string]bool{}, 0
	var walk func(n planNode)
	walk = func(n planNode) {
		nodes[n.NodeType] = true
		removed += n.SubplansRemoved
		if n.Relation != "" && n.NodeType != "ModifyTable" {
			var r string
			require.NoError(t, q.QueryRow(context.Background(), `SELECT COALESCE(pg_partition_root(to_regclass($1)), to_regclass($1))::text`,
				n.Relation).Scan(&r))
			if r == root {
				scans[n.Relation] = n.NodeType
			}
		}
		for _, c := range n.Plans {
			walk(c)
		}
	}
	walk(plans[0].Plan)
	return scans, nodes, removed
}

// deliveryMonths returns the end of this month's webhook_deliveries
// partition and three times: a day before it, a day after it, and a month
// and a day after it, in three partitions.
func deliveryMonths(t *testing.T, pool *pgxpool.Pool) (bound time.Time, months []time.Time) {
	t.Helper()
	first := "webhook_deliveries_p" + time.Now().UTC().Format("200601")
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT range_to FROM aether_partitions WHERE partition_name = $1`, first).Scan(&bound))
	return bound, []time.Time{bound.Add(-24 * time.Hour), bound.Add(24 * time.Hour), bound.AddDate(0, 1, 1)}
}

// bounds is store.IDBounds of ids, as statement arguments.
func bounds(ids ...uuid.UUID) []any {
	lo, hi := store.IDBounds(ids)
	return []any{lo, hi}
}

// TestWebhookPlansPruneToOnePartition: with deliveries in three monthly
// partitions, every lookup by delivery id (a delivery, a job's packed ids,
// the attempts of a page) reads only the partition of that id (how it
// reads it, the planner picks by the partition's size), and the
// newest-first page of a project reads its partitions in
// order through the project index, without a sort.
func TestWebhookPlansPruneToOnePartition(t *testing.T) {
	ctx := context.Background()
	pool := storetest.NewPool(t)
	bound, months := deliveryMonths(t, pool)
	var ids []uuid.UUID
	for _, at := range months {
		for range 200 {
			id := domain.FanoutDeliveryID(uuid.New(), uuid.New(), at)
			ids = append(ids, id)
			_, err := pool.Exec(ctx, `INSERT INTO webhook_deliveries (tenant_id, project_id, id, subscription_id, destination_id,
				event_id, event_sequence, event_type, idempotency_key, state, max_attempts, created_at, updated_at)
				VALUES ('t1', 'p1', $1, gen_random_uuid(), gen_random_uuid(), gen_random_uuid(), 1, 'a.b', 'k', 'PENDING', 3, $2, $2)`, id, at)
			require.NoError(t, err)
			_, err = pool.Exec(ctx, `INSERT INTO webhook_delivery_attempts (delivery_id, number, outcome, started_at) VALUES ($1, 1, 'FAILED', $2)`, id, at)
			require.NoError(t, err)
		}
	}
	_, err := pool.Exec(ctx, "ANALYZE webhook_deliveries, webhook_delivery_attempts")
	require.NoError(t, err)
	one := ids[250] // the second month's
	month := "webhook_deliveries_p" + bound.Format("200601")
	attempts := "webhook_delivery_attempts_p" + bound.Format("200601")

	for _, c := range []struct {
		name, root, sql, partition string
		args                       []any
	}{
		{"GetWebhookDelivery", "webhook_deliveries", dbsqlc.GetWebhookDelivery, month, []any{"t1", one}},
		{"LockWebhookDelivery", "webhook_deliveries", dbsqlc.LockWebhookDelivery, month, []any{"t1", one}},
		{"BatchSendWebhookDeliveries", "webhook_deliveries", dbsqlc.BatchSendWebhookDeliveries, month,
			append([]any{"t1", [][16]byte{one, ids[260]}, uuid.New()}, bounds(one, ids[260])...)},
		{"UpdateWebhookDelivery", "webhook_deliveries", dbsqlc.UpdateWebhookDelivery, month,
			[]any{"PENDING", 0, 3, nil, time.Now(), nil, nil, "", "t1", one}},
		{"ListWebhookDeliveryAttempts", "webhook_delivery_attempts", dbsqlc.ListWebhookDeliveryAttempts, attempts,
			[]any{[]uuid.UUID{one, ids[201]}}},
		// The events of a delivery job, recorded within the times of its
		// fan-out delivery ids (store.WebhookBatchSendContext).
		{"FindAuditEventsByID bounded", "audit_events", dbsqlc.FindAuditEventsByID,
			"audit_events_p" + bound.Format("200601"),
			[]any{"t1", [][16]byte{uuid.New(), uuid.New()}, months[1], months[1].Add(time.Millisecond)}},
	} {
		scans, _ := partitionScans(t, pool, c.root, c.sql, c.args...)
		require.Len(t, scans, 1, "%s reads one partition: %v", c.name, scans)
		require.Contains(t, scans, c.partition, c.name)
	}

	// The newest-first page: partitions in order, no sort.
	page := `SELECT id FROM webhook_deliveries WHERE tenant_id = $1 AND project_id = $2 ORDER BY id DESC LIMIT 51`
	scans, nodes := partitionScans(t, pool, "webhook_deliveries", page, "t1", "p1")
	require.False(t, nodes["Sort"], "no sort: %v", nodes)
	for rel, node := range scans {
		require.Contains(t, []string{"Index Scan", "Index Only Scan", "Index Scan Backward", "Index Only Scan Backward"}, node, rel)
	}
	// A deep page prunes the partitions after its cursor: it reads the
	// first month and the default partition, which catches the keys before
	// every month (a new database has no legacy partition below the first
	// month, migration 00029).
	scans, _ = partitionScans(t, pool, "webhook_deliveries", `SELECT id FROM webhook_deliveries
		WHERE tenant_id = $1 AND project_id = $2 AND id < $3 ORDER BY id DESC LIMIT 51`, "t1", "p1", ids[10])
	require.Len(t, scans, 2, "only partitions before the cursor: %v", scans)
	require.Contains(t, scans, "webhook_deliveries_p"+months[0].UTC().Format("200601"))
	require.Contains(t, scans, "webhook_deliveries_default")
}
