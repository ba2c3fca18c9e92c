package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/jobs"
	"github.com/aetheriot/aether-audit/store"
	"github.com/aetheriot/aether-audit/store/storetest"
)

// TestAuditPartitionsCreatedAhead runs River as the runtime role, with an
// app whose clock is half a year ahead: the periodic job creates the
// monthly partitions of audit_events through three months past that,
// through the SECURITY DEFINER function (the role may not create tables),
// and each new partition has the history settings of migration 00021, its
// own unique keys, the append-only triggers and the TRUNCATE guard.
func TestAuditPartitionsCreatedAhead(t *testing.T) {
	ownerURL, appURL, role := storetest.NewAppRoleDatabase(t)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, appURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	owner, err := pgxpool.New(ctx, ownerURL)
	require.NoError(t, err)
	t.Cleanup(owner.Close)

	now := time.Now().UTC()
	ahead := time.Date(now.Year(), now.Month()+6, 1, 12, 0, 0, 0, time.UTC)
	a := app.New(store.New(pool), app.Config{Now: func() time.Time { return ahead }})
	client, err := jobs.NewClient(pool, store.New(pool), jobs.ClientConfig{App: a, FetchCooldown: 10 * time.Millisecond})
	require.NoError(t, err)
	require.NoError(t, client.Start(ctx))
	t.Cleanup(func() { _ = client.Stop(context.Background()) })

	last := "audit_events_p" + ahead.AddDate(0, app.AuditPartitionMonthsAhead, 0).Format("200601")
	require.Eventually(t, func() bool {
		var exists bool
		require.NoError(t, owner.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", last).Scan(&exists))
		return exists
	}, 30*time.Second, 20*time.Millisecond, "partition %s created", last)

	// Every month from now to there, none twice, none skipped.
	var months []string
	rows, err := owner.Query(ctx, `SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		WHERE i.inhparent = 'audit_events'::regclass AND c.relname LIKE 'audit\_events\_p%' ORDER BY c.relname`)
	require.NoError(t, err)
	for rows.Next() {
		var name string
		require.NoError(t, rows.Scan(&name))
		months = append(months, name)
	}
	require.NoError(t, rows.Err())
	var want []string
	for m := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC); !m.After(ahead.AddDate(0, app.AuditPartitionMonthsAhead, 0)); m = m.AddDate(0, 1, 0) {
		want = append(want, "audit_events_p"+m.Format("200601"))
	}
	require.Equal(t, want, months)

	var (
		ownerName    string
		options      []string
		keys         int
		truncate     bool
		rowTriggers  int
		rolePrivsAny bool
	)
	require.NoError(t, owner.QueryRow(ctx, `SELECT pg_get_userbyid(c.relowner), c.reloptions,
			(SELECT count(*) FROM pg_index i WHERE i.indrelid = c.oid AND i.indisunique),
			EXISTS (SELECT 1 FROM pg_trigger g WHERE g.tgrelid = c.oid AND g.tgname = 'audit_events_no_truncate'),
			(SELECT count(*) FROM pg_trigger g WHERE g.tgrelid = c.oid AND g.tgname IN ('audit_events_no_update', 'audit_events_purge_only')),
			has_table_privilege($2, c.oid, 'UPDATE') OR has_table_privilege($2, c.oid, 'DELETE') OR has_table_privilege($2, c.oid, 'TRUNCATE')
		FROM pg_class c WHERE c.oid = to_regclass($1)`, last, role).
		Scan(&ownerName, &options, &keys, &truncate, &rowTriggers, &rolePrivsAny))
	require.NotEqual(t, role, ownerName)
	require.Subset(t, options, []string{"autovacuum_analyze_scale_factor=0", "autovacuum_analyze_threshold=50000",
		"autovacuum_vacuum_insert_threshold=200000"})
	require.Equal(t, 2, keys, "(tenant, project, sequence) and (tenant, id)")
	require.True(t, truncate)
	require.Equal(t, 2, rowTriggers)
	require.False(t, rolePrivsAny)

	// The runtime role cannot create a partition itself.
	_, err = pool.Exec(ctx, "CREATE TABLE audit_events_p999912 PARTITION OF audit_events FOR VALUES FROM ('9999-12-01') TO ('9999-12-31')")
	require.Error(t, err)
}
