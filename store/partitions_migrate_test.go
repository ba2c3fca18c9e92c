package store_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/migrations"
	"github.com/aetheriot/aether-audit/store"
)

// TestPartitionMigrationKeepsRows migrates a database with deliveries,
// attempts, alarm and telemetry history in the unpartitioned tables of
// migration 00023 to the partitioned ones: every row stays, readable
// through the parent, in the legacy partition it became (no copy), and the
// months after it exist, each partition with its storage parameters.
func TestPartitionMigrationKeepsRows(t *testing.T) {
	pool := emptyDatabase(t)
	ctx := context.Background()
	db := stdlib.OpenDBFromPool(pool)
	t.Cleanup(func() { db.Close() })
	provider, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS)
	require.NoError(t, err)
	_, err = provider.UpTo(ctx, 23)
	require.NoError(t, err)

	old := time.Now().AddDate(0, -2, 0).UTC()
	delivery := domain.FanoutDeliveryID(uuid.New(), uuid.New(), old)
	_, err = pool.Exec(ctx, `INSERT INTO webhook_deliveries (tenant_id, project_id, id, subscription_id, destination_id,
		event_id, event_sequence, event_type, idempotency_key, state, max_attempts, created_at, updated_at)
		VALUES ('t', 'p', $1, gen_random_uuid(), gen_random_uuid(), gen_random_uuid(), 1, 'a.b', 'k', 'DEAD_LETTERED', 3, $2, $2)`,
		delivery, old)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO webhook_delivery_attempts (delivery_id, number, outcome, started_at)
		VALUES ($1, 1, 'FAILED', $2), ($1, 2, 'FAILED', $2)`, delivery, old)
	require.NoError(t, err)
	future := time.Now().AddDate(0, 3, 0).UTC() // a device clock ahead
	_, err = pool.Exec(ctx, `INSERT INTO alarm_history (tenant_id, project_id, id, occurred_at, alarm_id, device_id, severity, state, message)
		VALUES ('t', 'p', gen_random_uuid(), $1, 'a1', 'd1', 'MAJOR', 'RAISED', 'm'),
		       ('t', 'p', gen_random_uuid(), $2, 'a1', 'd1', 'MAJOR', 'CLEARED', 'm')`, old, future)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO telemetry_history (tenant_id, project_id, device_id, metric, occurred_at, value)
		VALUES ('t', 'p', 'd1', 'temp', $1, 21.5)`, old)
	require.NoError(t, err)

	require.NoError(t, store.Migrate(ctx, pool, slog.New(slog.NewTextHandler(io.Discard, nil))))

	for table, want := range map[string]int{"webhook_deliveries": 1, "webhook_delivery_attempts": 2, "alarm_history": 2, "telemetry_history": 1} {
		var kind string
		require.NoError(t, pool.QueryRow(ctx, "SELECT relkind::text FROM pg_class WHERE oid = $1::regclass", table).Scan(&kind))
		require.Equal(t, "p", kind, "%s is partitioned", table)
		var n, legacy int
		require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&n))
		require.Equal(t, want, n, "%s keeps its rows", table)
		require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM "+table+"_legacy").Scan(&legacy))
		require.Equal(t, want, legacy, "%s's rows stay in the table they were in", table)
		var partitions int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM aether_partitions WHERE table_name = $1 AND range_to > now()`,
			table).Scan(&partitions))
		require.GreaterOrEqual(t, partitions, 3, "%s: the legacy partition and the next two months", table)
	}
	// The legacy history partitions reach past the latest occurred_at.
	var legacyTo time.Time
	require.NoError(t, pool.QueryRow(ctx, `SELECT range_to FROM aether_partitions WHERE partition_name = 'alarm_history_legacy'`).Scan(&legacyTo))
	require.True(t, legacyTo.After(future))

	// Every delivery partition keeps fillfactor 50 (HOT updates).
	var missing int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_partition_tree('webhook_deliveries') t
		JOIN pg_class c ON c.oid = t.relid
		WHERE t.isleaf AND NOT COALESCE(c.reloptions @> ARRAY['fillfactor=50'], false)`).Scan(&missing))
	require.Zero(t, missing, "every delivery partition has fillfactor 50")
	var leaves int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_partition_tree('webhook_deliveries') WHERE isleaf`).Scan(&leaves))
	require.GreaterOrEqual(t, leaves, 4, "legacy, two months ahead and the default")

	// A delivery and its attempts are found by id through one partition.
	var state string
	require.NoError(t, pool.QueryRow(ctx, "SELECT state FROM webhook_deliveries WHERE id = $1", delivery).Scan(&state))
	require.Equal(t, "DEAD_LETTERED", state)
}
