package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/store"
	"github.com/aetheriot/aether-audit/store/storetest"
)

// TestCreatePastAuditPartitions: the owner creates the partitions of past
// months (migration 00026) as the periodic creator creates future ones, a
// month already covered is skipped, bad bounds are refused, and the runtime
// role may not call it (it still keeps months ahead through the
// one-argument creator).
func TestCreatePastAuditPartitions(t *testing.T) {
	ownerURL, appURL, _ := storetest.NewAppRoleDatabase(t)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, ownerURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	st := store.New(pool)

	month := time.Now().UTC()
	month = time.Date(month.Year(), month.Month(), 1, 0, 0, 0, 0, time.UTC)
	old := month.AddDate(0, -14, 0)
	n, err := st.CreatePastAuditPartitions(ctx, old.Add(40*time.Hour), old.AddDate(0, 1, 3))
	require.NoError(t, err)
	require.Equal(t, 2, n, "the months of both bounds")
	n, err = st.CreatePastAuditPartitions(ctx, old, month)
	require.NoError(t, err)
	require.Equal(t, 12, n, "the two made and the current month are skipped")
	n, err = st.CreatePastAuditPartitions(ctx, old, month.AddDate(0, 1, 0))
	require.NoError(t, err)
	require.Zero(t, n, "every month exists (the next one since migrating)")

	// Built like a month the periodic job creates.
	name := "audit_events_p" + old.Format("200601")
	var bound string
	var trigger, analyzeThreshold bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT pg_get_expr(c.relpartbound, c.oid),
		EXISTS (SELECT 1 FROM pg_trigger g WHERE g.tgrelid = c.oid AND g.tgname = 'audit_events_no_truncate'),
		'autovacuum_analyze_threshold=50000' = ANY (c.reloptions)
		FROM pg_class c WHERE c.relname = $1`, name).Scan(&bound, &trigger, &analyzeThreshold))
	var from, to time.Time
	require.NoError(t, pool.QueryRow(ctx, `SELECT substring($1 FROM 'FROM \(''([^'']+)''\)')::timestamptz,
		substring($1 FROM 'TO \(''([^'']+)''\)')::timestamptz`, bound).Scan(&from, &to))
	require.True(t, from.Equal(old) && to.Equal(old.AddDate(0, 1, 0)), "%s: %s", name, bound)
	require.True(t, trigger, "the TRUNCATE guard")
	require.True(t, analyzeThreshold, "the analyze settings of migration 00021")
	var keys int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_constraint
		WHERE conrelid = $1::regclass AND conname IN ($1 || '_pkey', $1 || '_tenant_id_id_key', $1 || '_bound')`, name).Scan(&keys))
	require.Equal(t, 3, keys)

	for _, stmt := range []string{
		"SELECT aether_create_audit_partitions(now(), now() - interval '2 months')",
		"SELECT aether_create_audit_partitions(NULL, now())",
		"SELECT aether_create_audit_partitions('-infinity', now())",
		"SELECT aether_create_audit_partitions(now() - interval '241 months', now())",
		"SELECT aether_create_audit_partitions(now(), now() + interval '11 years')",
	} {
		_, err := pool.Exec(ctx, stmt)
		requireCode(t, err, "22023", stmt)
	}

	conn, err := pgx.Connect(ctx, appURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	appPool, err := pgxpool.New(ctx, appURL)
	require.NoError(t, err)
	t.Cleanup(appPool.Close)
	_, err = store.New(appPool).CreatePastAuditPartitions(ctx, old.AddDate(0, -1, 0), old.AddDate(0, -1, 0))
	requireCode(t, err, "42501", "the runtime role creating a past month")
	require.NoError(t, conn.QueryRow(ctx, "SELECT aether_create_audit_partitions(now() + interval '2 months')").Scan(&n))
	require.Zero(t, n, "the months ahead exist")
}
