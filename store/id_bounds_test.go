package store_test

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/store"
	"github.com/aetheriot/aether-audit/store/dbsqlc"
	"github.com/aetheriot/aether-audit/store/storetest"
)

// explainGeneric runs sql, a statement of parameters of types, with args
// through its generic plan (a prepared statement under
// force_generic_plan) under EXPLAIN (ANALYZE), in a transaction it rolls
// back, and returns the partitions of root the plan reads with their node
// types, and the subplans its execution pruned.
func explainGeneric(t *testing.T, pool *pgxpool.Pool, root, sql string, types []string, args ...any) (map[string]string, int) {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck // only rolls back
	_, err = tx.Exec(ctx, "SET LOCAL plan_cache_mode = force_generic_plan")
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "PREPARE generic_statement("+strings.Join(types, ", ")+") AS "+sql)
	require.NoError(t, err)
	defer func() {
		_, err := tx.Exec(ctx, "DEALLOCATE generic_statement") // not undone by the rollback
		require.NoError(t, err)
	}()
	// EXECUTE takes no bind parameters: its arguments are literals.
	literals := make([]string, len(args))
	for i, a := range args {
		require.NoError(t, tx.QueryRow(ctx, "SELECT quote_nullable($1::"+types[i]+"::text)", a).Scan(&literals[i]))
	}
	var raw []byte
	require.NoError(t, tx.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE generic_statement("+
		strings.Join(literals, ", ")+")").Scan(&raw))
	scans, _, removed := planPartitions(t, tx, root, raw)
	return scans, removed
}

// TestDeliveryJobGenericPlansPruneAtExecution: the generic plans of the
// delivery job's statements on webhook_deliveries, which PostgreSQL's
// default plan cache mode settles on after five custom plans on a
// connection, read, for ids of one month, that month's partition alone,
// through an index (one lookup per id), the other partitions pruned when
// the plan starts ("Subplans Removed") by the ids' bounds (idBounds):
// the plan a custom plan would be. The test forces the generic plans in
// its own transaction (explainGeneric).
func TestDeliveryJobGenericPlansPruneAtExecution(t *testing.T) {
	ctx := context.Background()
	pool := storetest.NewPool(t)
	bound, months := deliveryMonths(t, pool)
	var ids []uuid.UUID
	dest := uuid.New()
	for _, at := range months {
		for range 2000 {
			ids = append(ids, domain.FanoutDeliveryID(uuid.New(), uuid.New(), at))
		}
		_, err := pool.Exec(ctx, `INSERT INTO webhook_deliveries (tenant_id, project_id, id, subscription_id, destination_id,
			event_id, event_sequence, event_type, idempotency_key, state, max_attempts, created_at, updated_at)
			SELECT 't1', 'p1', id, gen_random_uuid(), $2, gen_random_uuid(), 1, 'a.b', 'k', 'DELIVERING', 3, $3, $3
			FROM unnest($1::uuid[]) AS id`, ids[len(ids)-2000:], dest, at)
		require.NoError(t, err)
	}
	_, err := pool.Exec(ctx, "ANALYZE webhook_deliveries")
	require.NoError(t, err)
	month := "webhook_deliveries_p" + bound.Format("200601")
	two := []uuid.UUID{ids[2500], ids[2600]} // the second month's
	lo, hi := store.IDBounds(two)
	now := time.Now()
	for _, c := range []struct {
		name  string
		sql   string
		types []string
		args  []any
	}{
		{"BatchSendWebhookDeliveries", dbsqlc.BatchSendWebhookDeliveries, []string{"text", "uuid[]", "uuid", "uuid", "uuid"},
			[]any{"t1", two, dest, lo, hi}},
		{"startAttempts", store.StartAttemptsSQL, []string{"text", "uuid[]", "text[]", "int[]", "timestamptz", "uuid", "uuid"},
			[]any{"t1", two, []string{"PENDING", "PENDING"}, []int32{0, 0}, now, lo, hi}},
		{"recordSuccesses", store.RecordSuccessesSQL,
			[]string{"text", "uuid[]", "int[]", "timestamptz[]", "int[]", "bigint[]", "text[]", "timestamptz", "uuid", "uuid"},
			[]any{"t1", two, []int32{0, 0}, []time.Time{now, now}, []int32{200, 200}, []int64{1, 1}, []string{"", ""}, now, lo, hi}},
	} {
		scans, removed := explainGeneric(t, pool, "webhook_deliveries", c.sql, c.types, c.args...)
		require.Equal(t, []string{month}, slices.Collect(maps.Keys(scans)), "%s reads one partition", c.name)
		require.Contains(t, []string{"Index Scan", "Index Only Scan"}, scans[month], "%s: a lookup per id", c.name)
		require.Positive(t, removed, "%s prunes at execution", c.name)
	}
}
