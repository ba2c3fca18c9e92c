package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/store/storetest"
)

// TestRuntimeRoleMaintainsPartitionsOnlyThroughFunctions: the serving role
// creates and drops partitions through the SECURITY DEFINER functions of
// migration 00024, for registered tables only and never ahead of time on a
// drop, but cannot create, alter, detach or drop a table itself nor
// register one.
func TestRuntimeRoleMaintainsPartitionsOnlyThroughFunctions(t *testing.T) {
	_, appURL, _ := storetest.NewAppRoleDatabase(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, appURL)
	require.NoError(t, err)
	defer conn.Close(ctx)

	month := time.Now().UTC().Format("200601") // the current month's partitions
	ahead := time.Now().UTC().AddDate(0, 6, 0)
	var name *string
	require.NoError(t, conn.QueryRow(ctx, "SELECT aether_create_partition('webhook_deliveries', $1)", ahead).Scan(&name))
	require.NotNil(t, name)
	created := *name
	require.Equal(t, "webhook_deliveries_p"+ahead.Format("200601"), created)
	require.NoError(t, conn.QueryRow(ctx, "SELECT aether_create_partition('webhook_deliveries', $1)", ahead).Scan(&name))
	require.Nil(t, name, "a month is created once")

	var dropped int
	require.NoError(t, conn.QueryRow(ctx, "SELECT count(*) FROM aether_drop_partitions('alarm_history', now() - interval '1 day')").Scan(&dropped))
	require.Zero(t, dropped, "nothing that old in a new database")

	for _, stmt := range []string{
		"SELECT aether_create_partition('audit_events', now())",
		"SELECT aether_create_partition('river_job', now())",
		"SELECT * FROM aether_drop_partitions('webhook_deliveries', now() + interval '1 day')",
	} {
		_, err := conn.Exec(ctx, stmt)
		requireCode(t, err, "22023", stmt)
	}
	for _, stmt := range []string{
		"CREATE TABLE evil (a int)",
		"CREATE TABLE evil PARTITION OF webhook_deliveries FOR VALUES FROM ('ffff0000-0000-7000-8000-000000000000') TO (MAXVALUE)",
		"DROP TABLE " + created,
		"DROP TABLE webhook_delivery_attempts_p" + month,
		"ALTER TABLE webhook_deliveries DETACH PARTITION " + created,
		"ALTER TABLE alarm_history DETACH PARTITION alarm_history_p" + month,
		"TRUNCATE telemetry_history_p" + month,
		"INSERT INTO aether_partitioned_tables (table_name, bound_kind) VALUES ('audit_events', 'UUIDV7')",
		"DELETE FROM aether_partitions",
	} {
		_, err := conn.Exec(ctx, stmt)
		requireCode(t, err, "42501", stmt)
	}
}
