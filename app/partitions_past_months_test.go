package app_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/store"
	"github.com/aetheriot/aether-audit/store/storetest"
)

// TestMaintenanceCreatesPastMonthsOfDefaultRows: rows of a past month that
// has no partition (a backfilled or clock-skewed row; a new database
// starts at its current month) sit in the DEFAULT partition of each
// partitioned table. The maintenance jobs, run as the runtime role
// (MaintainPartitions, CreateAuditPartitions), create that month's
// partition and move the rows into it (migration 00033): each row is then
// in its month's partition, unchanged, every DEFAULT partition is empty,
// and the rows are still found (audit events by sequence, in pages and by
// the chain's verification; the delivery by id).
func TestMaintenanceCreatesPastMonthsOfDefaultRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ownerURL, appURL, _ := storetest.NewAppRoleDatabase(t)
	owner, err := pgxpool.New(ctx, ownerURL)
	require.NoError(t, err)
	t.Cleanup(owner.Close)
	pool, err := pgxpool.New(ctx, appURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	st := store.New(pool)
	now := time.Now().UTC().Truncate(time.Microsecond)
	past := monthStart(now, -1).Add(5 * 24 * time.Hour) // before the new database's first partition
	month := past.Format("200601")
	at := func(clock time.Time) *app.App {
		return app.New(st, app.Config{Now: func() time.Time { return clock }, Logger: slog.New(slog.DiscardHandler)})
	}
	writer := app.Identity{Subject: "svc", TenantID: "t1", ProjectIDs: []string{"p1"}, Permissions: []app.Permission{app.PermissionAuditWrite, app.PermissionAuditRead}}

	// Two events recorded by a clock a month behind, then one now.
	for i, clock := range []time.Time{past, past.Add(time.Hour), now} {
		e, err := at(clock).RecordAuditEvent(ctx, writer, draft("p1", "device.booted"), "")
		require.NoError(t, err)
		require.Equal(t, uint64(i+1), e.Sequence)
	}
	require.Equal(t, "audit_events_default", partitionOf(t, pool, "audit_events", "sequence", 1))
	rows, delivery := insertHistoryRows(t, owner, past)
	for _, r := range rows {
		require.Equal(t, r.table+"_default", partitionOf(t, owner, r.table, r.column, r.value))
	}

	a := at(now)
	out, err := a.MaintainPartitions(ctx)
	require.NoError(t, err)
	created, err := a.CreateAuditPartitions(ctx)
	require.NoError(t, err)
	require.Positive(t, created)

	for _, r := range rows {
		require.Contains(t, out.Created, r.table+"_p"+month)
		require.Equal(t, r.table+"_p"+month, partitionOf(t, owner, r.table, r.column, r.value), "%s", r.table)
	}
	for _, table := range []string{"audit_events", "webhook_deliveries", "webhook_delivery_attempts", "alarm_history", "telemetry_history"} {
		var left int
		require.NoError(t, owner.QueryRow(ctx, "SELECT count(*) FROM "+table+"_default").Scan(&left))
		require.Zero(t, left, "%s_default is empty", table)
	}
	d, err := st.GetWebhookDelivery(ctx, "t1", delivery, false)
	require.NoError(t, err)
	require.Equal(t, delivery, d.ID)

	reader := app.Identity{Subject: "ops", TenantID: "t1", ProjectIDs: []string{"p1"}, Permissions: []app.Permission{app.PermissionAuditRead}}
	for seq := uint64(1); seq <= 2; seq++ {
		require.Equal(t, "audit_events_p"+month, partitionOf(t, owner, "audit_events", "sequence", seq))
	}
	requireEventsFound(t, st, a, reader, 3)
	v, err := a.VerifyAuditChain(ctx, reader, "p1", nil, nil)
	require.NoError(t, err)
	require.True(t, v.Valid)
	require.Equal(t, uint64(3), v.HeadSequence)

	// Idempotent: a second run finds nothing left to create.
	again, err := a.MaintainPartitions(ctx)
	require.NoError(t, err)
	require.Empty(t, again.Created)
}
