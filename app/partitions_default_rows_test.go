package app_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/store"
	"github.com/aetheriot/aether-audit/store/storetest"
)

// TestMaintenanceTakesDefaultRowsIntoTheirMonth: rows of a month that has
// no partition yet (a device clock far ahead for the history tables, a
// server clock ahead for deliveries, attempts and audit events) land in
// the DEFAULT partition. When the maintenance jobs later create that
// month (MaintainPartitions for the registered tables,
// CreateAuditPartitions for audit_events) they move those rows into it
// (migration 00032) instead of failing or skipping the month: every row
// is then in its month's partition, unchanged; the DEFAULT partition holds
// none of the month; audit events are still found by sequence, the chain
// verifies, and appends continue it.
func TestMaintenanceTakesDefaultRowsIntoTheirMonth(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.NewPool(t)
	st := store.New(pool)
	now := time.Now().UTC().Truncate(time.Microsecond)
	ahead := monthStart(now, 5).Add(9 * 24 * time.Hour) // a month no partition covers yet
	month := ahead.Format("200601")
	at := func(clock time.Time) *app.App {
		return app.New(st, app.Config{Now: func() time.Time { return clock }, Logger: slog.New(slog.DiscardHandler),
			Partitions: app.PartitionConfig{MonthsAhead: 3}})
	}
	writer := app.Identity{Subject: "svc", TenantID: "t1", ProjectIDs: []string{"p1"}, Permissions: []app.Permission{app.PermissionAuditWrite, app.PermissionAuditRead}}

	// Two events now, three recorded by a clock five months ahead.
	for i, clock := range []time.Time{now, now, ahead, ahead.Add(time.Second), ahead.Add(time.Hour)} {
		e, err := at(clock).RecordAuditEvent(ctx, writer, draft("p1", "device.booted"), "")
		require.NoError(t, err)
		require.Equal(t, uint64(i+1), e.Sequence)
	}
	require.Equal(t, "audit_events_default", partitionOf(t, pool, "audit_events", "sequence", 3))

	// A delivery, its attempt, an alarm and a telemetry point of that month.
	rows, _ := insertHistoryRows(t, pool, ahead)
	for _, r := range rows {
		require.Equal(t, r.table+"_default", partitionOf(t, pool, r.table, r.column, r.value))
	}

	// Two months on, the jobs create the months through that one.
	later := at(monthStart(now, 2).Add(time.Hour))
	out, err := later.MaintainPartitions(ctx)
	require.NoError(t, err)
	_, err = later.CreateAuditPartitions(ctx)
	require.NoError(t, err)

	for _, r := range rows {
		require.Contains(t, out.Created, r.table+"_p"+month)
		require.Equal(t, r.table+"_p"+month, partitionOf(t, pool, r.table, r.column, r.value), "%s", r.table)
	}
	reader := app.Identity{Subject: "ops", TenantID: "t1", ProjectIDs: []string{"p1"}, Permissions: []app.Permission{app.PermissionAuditRead}}
	for seq := uint64(3); seq <= 5; seq++ {
		require.Equal(t, "audit_events_p"+month, partitionOf(t, pool, "audit_events", "sequence", seq))
	}
	requireEventsFound(t, st, later, reader, 5)
	var left int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM audit_events_default").Scan(&left))
	require.Zero(t, left)

	e, err := at(ahead.Add(2*time.Hour)).RecordAuditEvent(ctx, writer, draft("p1", "device.booted"), "")
	require.NoError(t, err)
	require.Equal(t, uint64(6), e.Sequence)
	require.Equal(t, "audit_events_p"+month, partitionOf(t, pool, "audit_events", "sequence", 6))
	v, err := later.VerifyAuditChain(ctx, reader, "p1", nil, nil)
	require.NoError(t, err)
	require.True(t, v.Valid)
	require.Equal(t, uint64(6), v.HeadSequence)
	page, err := later.SearchAuditEvents(ctx, reader, app.SearchAuditEventsInput{ProjectID: "p1"})
	require.NoError(t, err)
	require.Len(t, page.Edges, 6)
}
