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

// TestDeliveryJobStatementsPlanGenericFromTheFirstCall runs a delivery
// job's statements once each on a fresh connection, as the River job runs
// them (its reads and its intent on the pool) and as the dispatcher and
// the outcome do (in transactions): PostgreSQL's counters of the
// connection's prepared statements show that each ran its generic plan,
// never a custom one (by default the first five executions of a statement
// on a connection are custom plans), while a statement of the default
// mode (GetWebhookDelivery), run after them on the pool and in the
// transaction, still got its custom plans, and the
// connection's own plan_cache_mode is untouched.
func TestDeliveryJobStatementsPlanGenericFromTheFirstCall(t *testing.T) {
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(storetest.NewDatabase(t))
	require.NoError(t, err)
	cfg.MaxConns = 1 // one connection, whose statements the counters are
	store.ConfigurePool(cfg)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	st := store.New(pool)

	now := time.Now().UTC().Truncate(time.Microsecond)
	dest := domain.WebhookDestination{ID: uuid.Must(uuid.NewV7()), TenantID: "t1", ProjectID: "p1",
		URL: "https://receiver.example/hook", CreatedAt: now, CreatedBy: "test", State: domain.WebhookDestinationEnabled}
	secret := domain.SealedWebhookSecret{ID: uuid.Must(uuid.NewV7()), Sealed: []byte("sealed"), CreatedAt: now}
	sub := uuid.Must(uuid.NewV7())
	var ds []domain.WebhookDelivery
	var ids, events []uuid.UUID
	for seq := range uint64(2) {
		event := uuid.Must(uuid.NewV7())
		id := domain.FanoutDeliveryID(sub, event, now)
		ds = append(ds, domain.WebhookDelivery{ID: id, TenantID: "t1", ProjectID: "p1", SubscriptionID: sub,
			DestinationID: dest.ID, EventID: event, EventSequence: seq + 1, EventType: "device.rebooted",
			IdempotencyKey: domain.WebhookDeliveryIdempotencyKey(id), State: domain.WebhookDeliveryPending,
			MaxAttempts: 3, CreatedAt: now, UpdatedAt: now})
		ids, events = append(ids, id), append(events, event)
	}
	require.NoError(t, st.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
		if err := tx.InsertWebhookDestination(ctx, dest, secret); err != nil {
			return err
		}
		return tx.InsertWebhookDeliveries(ctx, ds)
	}))

	// The River job: its reads, then its intent, on the pool.
	sc, err := st.WebhookBatchSendContext(ctx, "t1", dest.ID, ids, events, now)
	require.NoError(t, err)
	require.Len(t, sc.Deliveries, 2)
	started := now.Add(time.Millisecond)
	var starts, ends []domain.WebhookDeliveryChange
	for _, d := range sc.Deliveries {
		s := d
		s.State, s.AttemptCount, s.UpdatedAt, s.NextAttemptAt = domain.WebhookDeliveryDelivering, 1, started, nil
		starts = append(starts, domain.WebhookDeliveryChange{PrevState: d.State, PrevAttempts: 0, Delivery: s,
			Attempt: domain.WebhookDeliveryAttempt{Number: 1, Outcome: domain.WebhookAttemptDelivering, StartedAt: started}})
		finished, status := started.Add(time.Millisecond), 200
		e := s
		e.State, e.DeliveredAt, e.UpdatedAt = domain.WebhookDeliveryDelivered, &finished, finished
		ends = append(ends, domain.WebhookDeliveryChange{PrevState: s.State, PrevAttempts: 1, Delivery: e,
			Attempt: domain.WebhookDeliveryAttempt{Number: 1, Outcome: domain.WebhookAttemptSucceeded, StartedAt: started,
				FinishedAt: &finished, StatusCode: &status, Latency: time.Millisecond}})
	}
	saved, err := st.SaveWebhookDeliveriesIf(ctx, starts)
	require.NoError(t, err)
	require.Len(t, saved, 2)
	_, err = st.GetWebhookDelivery(ctx, "t1", ids[0], false)
	require.NoError(t, err)

	// The dispatcher's read and the outcome, in a transaction, with a
	// statement of the default mode after them.
	require.NoError(t, st.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
		if _, err := tx.WebhookBatchSendContext(ctx, "t1", dest.ID, ids, events, now); err != nil {
			return err
		}
		saved, err := tx.SaveWebhookDeliveriesIf(ctx, ends)
		if err != nil {
			return err
		}
		require.Len(t, saved, 2)
		if _, err := tx.RecordWebhookDestinationSuccesses(ctx, "t1", dest.ID, 2, now); err != nil {
			return err
		}
		_, err = tx.GetWebhookDelivery(ctx, "t1", ids[0], false)
		return err
	}))

	plans := map[string][2]int64{} // statement: generic, custom plans
	rows, err := pool.Query(ctx, `SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements`)
	require.NoError(t, err)
	for rows.Next() {
		var sql string
		var n [2]int64
		require.NoError(t, rows.Scan(&sql, &n[0], &n[1]))
		plans[sql] = n
	}
	require.NoError(t, rows.Err())
	for name, c := range map[string]struct {
		sql   string
		calls int64
	}{
		"GetWebhookDestination":             {dbsqlc.GetWebhookDestination, 2},
		"ValidWebhookDestinationSecrets":    {dbsqlc.ValidWebhookDestinationSecrets, 2},
		"BatchSendWebhookDeliveries":        {dbsqlc.BatchSendWebhookDeliveries, 2},
		"FindAuditEventsByID":               {dbsqlc.FindAuditEventsByID, 4}, // bounded, then unbounded for the missing events
		"startAttempts":                     {store.StartAttemptsSQL, 1},
		"recordSuccesses":                   {store.RecordSuccessesSQL, 1},
		"RecordWebhookDestinationSuccesses": {dbsqlc.RecordWebhookDestinationSuccesses, 1},
	} {
		require.Contains(t, plans, c.sql, name)
		require.Equal(t, [2]int64{c.calls, 0}, plans[c.sql], "%s: generic and custom plans", name)
	}
	require.Equal(t, [2]int64{0, 2}, plans[dbsqlc.GetWebhookDelivery], "GetWebhookDelivery: generic and custom plans")
	var mode string
	require.NoError(t, pool.QueryRow(ctx, "SHOW plan_cache_mode").Scan(&mode))
	require.Equal(t, "auto", mode, "the connection's own mode")
}

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

// TestDeliveryJobGenericPlansPruneAtExecution: the generic plans the
// delivery job's statements on webhook_deliveries run from their first
// call read, for ids of one month, that month's partition alone, through
// an index (one lookup per id), the other partitions pruned when the plan
// starts ("Subplans Removed"): the plan a custom plan would be, without
// planning per call.
func TestDeliveryJobGenericPlansPruneAtExecution(t *testing.T) {
	ctx := context.Background()
	pool := storetest.NewPool(t)
	first := "webhook_deliveries_p" + time.Now().UTC().Format("200601")
	var bound time.Time
	require.NoError(t, pool.QueryRow(ctx, `SELECT range_to FROM aether_partitions WHERE partition_name = $1`, first).Scan(&bound))
	months := []time.Time{bound.Add(-24 * time.Hour), bound.Add(24 * time.Hour), bound.AddDate(0, 1, 1)}
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
