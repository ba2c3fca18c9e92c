package app_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/store"
	"github.com/aetheriot/aether-audit/store/storetest"
)

// TestRuntimeRoleRecordsAndPurges runs the application over a pool logged
// in as the runtime role (store.GrantAppRole): recording (single, batch and
// idempotent) and the retention purge work and are audited, the chain
// verifies, and the role itself cannot delete what the purge may.
func TestRuntimeRoleRecordsAndPurges(t *testing.T) {
	_, appURL, _ := storetest.NewAppRoleDatabase(t)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, appURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)

	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := &manualClock{now: t0}
	a := app.New(store.New(pool), app.Config{Now: clock.Now, AuditRetention: 30 * 24 * time.Hour, PurgeBatch: 3})
	writer := app.Identity{Subject: "svc", TenantID: "t1", ProjectIDs: []string{app.AllProjects}, Permissions: []app.Permission{app.PermissionAuditWrite}}
	reader := app.Identity{Subject: "dash", TenantID: "t1", ProjectIDs: []string{app.AllProjects}, Permissions: []app.Permission{app.PermissionAuditRead}}

	for range 4 {
		d := draft("p1", "device.updated")
		d.OccurredAt = clock.Now()
		_, err := a.RecordAuditEvent(ctx, writer, d, "")
		require.NoError(t, err)
	}
	two := []domain.AuditEventDraft{draft("p1", "device.updated"), draft("p1", "device.updated")}
	for i := range two {
		two[i].OccurredAt = clock.Now()
	}
	batch := app.RecordAuditEventsInput{Events: two, IdempotencyKey: "k1"}
	_, err = a.RecordAuditEvents(ctx, writer, batch)
	require.NoError(t, err)
	clock.Add(20 * 24 * time.Hour)
	d := draft("p1", "device.updated")
	d.OccurredAt = clock.Now()
	_, err = a.RecordAuditEvent(ctx, writer, d, "")
	require.NoError(t, err)

	// 35 days after t0: the first 6 events go, in batches of 3, each
	// batch audited.
	clock.Add(15 * 24 * time.Hour)
	purges, err := a.PurgeExpiredAuditEvents(ctx, 100)
	require.NoError(t, err)
	require.Len(t, purges, 2)
	require.Equal(t, [2]uint64{1, 3}, [2]uint64{purges[0].From, purges[0].Through})
	require.Equal(t, [2]uint64{4, 6}, [2]uint64{purges[1].From, purges[1].Through})
	page, err := a.SearchAuditEvents(ctx, reader, app.SearchAuditEventsInput{ProjectID: "p1",
		Filter: app.AuditEventFilterInput{Action: "audit.events.purged"}})
	require.NoError(t, err)
	require.Len(t, page.Edges, 2)

	v, err := a.VerifyAuditChain(ctx, reader, "p1", nil, nil)
	require.NoError(t, err)
	require.True(t, v.Valid)
	require.Equal(t, uint64(6), v.PurgedThrough)
	require.Equal(t, uint64(9), v.HeadSequence)

	// The runtime role cannot delete, not even the purged prefix's
	// neighbour with the purge switch on.
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "SELECT set_config('aether.audit_purge', 'on', true)")
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "DELETE FROM audit_events WHERE tenant_id = 't1' AND project_id = 'p1' AND sequence = 7")
	var pgErr *pgconn.PgError
	require.True(t, errors.As(err, &pgErr), "%v", err)
	require.Equal(t, "42501", pgErr.Code)
	require.NoError(t, tx.Rollback(ctx))
	require.Equal(t, 3, countEvents(t, pool), "7 and the two purge events (8, 9) remain")
}
