package store_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/migrations"
	"github.com/aetheriot/aether-audit/store"
)

// migratedTo28 returns a new database migrated up to migration 00028, as a
// database created before migration 00029 is: every partitioned table has
// an empty <table>_legacy partition covering the current month.
func migratedTo28(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool := emptyDatabase(t)
	db := stdlib.OpenDBFromPool(pool)
	t.Cleanup(func() { db.Close() })
	provider, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS)
	require.NoError(t, err)
	_, err = provider.UpTo(context.Background(), 28)
	require.NoError(t, err)
	return pool
}

// legacyAttached reports whether table_legacy exists and is a partition
// of table.
func legacyAttached(t *testing.T, pool *pgxpool.Pool, table string) bool {
	t.Helper()
	var attached bool
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM pg_inherits i
		JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = $1::regclass AND c.relname = $2)`,
		table, table+"_legacy").Scan(&attached))
	return attached
}

// TestEmptyLegacyPartitionsDropped: on a database created before migration
// 00029 where only deliveries were written this month (into their legacy
// partition), the migration keeps webhook_deliveries_legacy with its row
// and drops the three empty legacy partitions, whose current month gets a
// partition of its own: rows of now land there, and the registry lists the
// months without a gap.
func TestEmptyLegacyPartitionsDropped(t *testing.T) {
	pool := migratedTo28(t)
	ctx := context.Background()
	month := time.Now().UTC().Format("200601")
	id, err := uuid.NewV7()
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO webhook_deliveries (tenant_id, project_id, id, subscription_id, destination_id,
		event_id, event_sequence, event_type, idempotency_key, state, max_attempts, created_at, updated_at)
		VALUES ('t', 'p', $1, gen_random_uuid(), gen_random_uuid(), gen_random_uuid(), 1, 'a.b', 'k', 'PENDING', 3, now(), now())`, id)
	require.NoError(t, err)
	var where string
	require.NoError(t, pool.QueryRow(ctx, `SELECT tableoid::regclass::text FROM webhook_deliveries WHERE id = $1`, id).Scan(&where))
	require.Equal(t, "webhook_deliveries_legacy", where, "before 00029, this month's rows go to the legacy partition")
	for _, table := range []string{"webhook_deliveries", "webhook_delivery_attempts", "alarm_history", "telemetry_history"} {
		require.True(t, legacyAttached(t, pool, table), table)
	}

	require.NoError(t, store.Migrate(ctx, pool, slog.New(slog.NewTextHandler(io.Discard, nil))))

	require.True(t, legacyAttached(t, pool, "webhook_deliveries"), "a legacy partition with rows stays")
	require.NoError(t, pool.QueryRow(ctx, `SELECT tableoid::regclass::text FROM webhook_deliveries WHERE id = $1`, id).Scan(&where))
	require.Equal(t, "webhook_deliveries_legacy", where, "its row stays where it was")
	st := store.New(pool)
	for _, table := range []string{"webhook_delivery_attempts", "alarm_history", "telemetry_history"} {
		require.False(t, legacyAttached(t, pool, table), "%s: the empty legacy partition is detached", table)
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_class WHERE relname = $1`, table+"_legacy").Scan(&n))
		require.Zero(t, n, "%s_legacy is dropped", table)
		parts, err := st.Partitions(ctx, table)
		require.NoError(t, err)
		require.Equal(t, table+"_p"+month, parts[0].Name, "%s: the registry starts at the current month", table)
		require.GreaterOrEqual(t, len(parts), 3, "%s: this month and the two after it", table)
		for i := 1; i < len(parts); i++ {
			require.Equal(t, parts[i-1].To, parts[i].From, "%s: months follow each other", table)
		}
	}
	_, err = pool.Exec(ctx, `INSERT INTO webhook_delivery_attempts (delivery_id, number, outcome, started_at) VALUES ($1, 1, 'FAILED', now())`, id)
	require.NoError(t, err)
	require.NoError(t, pool.QueryRow(ctx, `SELECT tableoid::regclass::text FROM webhook_delivery_attempts WHERE delivery_id = $1`, id).Scan(&where))
	require.Equal(t, "webhook_delivery_attempts_p"+month, where)
	_, err = pool.Exec(ctx, `INSERT INTO telemetry_history (tenant_id, project_id, device_id, metric, occurred_at, value)
		VALUES ('t', 'p', 'd1', 'temp', now(), 1)`)
	require.NoError(t, err)
	require.NoError(t, pool.QueryRow(ctx, `SELECT tableoid::regclass::text FROM telemetry_history`).Scan(&where))
	require.Equal(t, "telemetry_history_p"+month, where)
}

// TestLegacyPartitionDropFailsOnBusyTable: when a writer holds its lock on
// a table whose legacy partition is empty, migration 00029 waits at most
// its lock_timeout and fails with lock_not_available, changing nothing
// (goose's transaction rolls back the tables it had done); once the writer
// is gone, it applies.
func TestLegacyPartitionDropFailsOnBusyTable(t *testing.T) {
	pool := migratedTo28(t)
	ctx := context.Background()
	writer, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer writer.Rollback(ctx) //nolint:errcheck // rolled back below
	// An insert not yet committed: the table looks empty, its lock is held.
	_, err = writer.Exec(ctx, `INSERT INTO telemetry_history (tenant_id, project_id, device_id, metric, occurred_at, value)
		VALUES ('t', 'p', 'd1', 'temp', now(), 1)`)
	require.NoError(t, err)

	began := time.Now()
	err = store.Migrate(ctx, pool, slog.New(slog.NewTextHandler(io.Discard, nil)))
	requireCode(t, err, "55P03", "migration 00029 against a held lock")
	require.Less(t, time.Since(began), 30*time.Second, "bounded by lock_timeout")
	current, err := store.MigrationsCurrent(ctx, pool)
	require.NoError(t, err)
	require.False(t, current)
	for _, table := range []string{"alarm_history", "telemetry_history", "webhook_deliveries", "webhook_delivery_attempts"} {
		require.True(t, legacyAttached(t, pool, table), "%s: nothing changed", table)
	}

	require.NoError(t, writer.Rollback(ctx))
	require.NoError(t, store.Migrate(ctx, pool, slog.New(slog.NewTextHandler(io.Discard, nil))))
	for _, table := range []string{"alarm_history", "telemetry_history", "webhook_deliveries", "webhook_delivery_attempts"} {
		require.False(t, legacyAttached(t, pool, table), table)
	}
}
