package app_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/store"
	"github.com/aetheriot/aether-audit/store/storetest"
)

func TestPurgeExpiredAuditEvents(t *testing.T) {
	pool := storetest.NewPool(t)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := &manualClock{now: t0}
	a := app.New(store.New(pool), app.Config{Now: clock.Now, AuditRetention: 30 * 24 * time.Hour, PurgeBatch: 3})
	ctx := context.Background()
	writer := app.Identity{Subject: "svc", TenantID: "t1", ProjectIDs: []string{app.AllProjects}, Permissions: []app.Permission{app.PermissionAuditWrite}}
	reader := app.Identity{Subject: "dash", TenantID: "t1", ProjectIDs: []string{app.AllProjects}, Permissions: []app.Permission{app.PermissionAuditRead}}
	record := func(project string, n int) {
		for range n {
			d := draft(project, "device.updated")
			d.OccurredAt = clock.Now()
			_, err := a.RecordAuditEvent(ctx, writer, d, "")
			require.NoError(t, err)
		}
	}
	record("p1", 5)
	record("p2", 2)
	clock.Add(20 * 24 * time.Hour)
	record("p1", 2)

	// Nothing is older than 30 days yet.
	clock.Add(5 * 24 * time.Hour)
	purges, err := a.PurgeExpiredAuditEvents(ctx, 100)
	require.NoError(t, err)
	require.Empty(t, purges)

	// 35 days after t0: p1's first 5 events (in batches of 3) and p2's 2 go.
	clock.Add(10 * 24 * time.Hour)
	purges, err = a.PurgeExpiredAuditEvents(ctx, 100)
	require.NoError(t, err)
	require.Len(t, purges, 3)
	got := map[string][][2]uint64{}
	for _, p := range purges {
		got[p.ProjectID] = append(got[p.ProjectID], [2]uint64{p.From, p.Through})
		require.Equal(t, int64(p.Through-p.From+1), p.Count)
		require.Equal(t, clock.Now().Add(-30*24*time.Hour), p.Cutoff)
	}
	require.Equal(t, map[string][][2]uint64{"p1": {{1, 3}, {4, 5}}, "p2": {{1, 2}}}, got)

	// Each purge is audited in its project, with the range it removed.
	page, err := a.SearchAuditEvents(ctx, reader, app.SearchAuditEventsInput{ProjectID: "p1",
		Filter: app.AuditEventFilterInput{Action: "audit.events.purged"}})
	require.NoError(t, err)
	require.Len(t, page.Edges, 2)
	var details struct {
		From        string `json:"fromSequence"`
		Through     string `json:"throughSequence"`
		Count       int64  `json:"count"`
		ThroughHash string `json:"throughChainHash"`
	}
	require.NoError(t, json.Unmarshal(page.Edges[0].Event.Details, &details))
	require.Equal(t, "1", details.From)
	require.Equal(t, "3", details.Through)
	require.Equal(t, int64(3), details.Count)
	require.Equal(t, purges[0].ThroughHash.String(), details.ThroughHash)
	require.Len(t, details.ThroughHash, 64)
	require.Equal(t, "system:retention", page.Edges[0].Event.Subject.ID)
	require.Equal(t, &domain.Recorder{Issuer: app.ServiceIssuer, Subject: "system:retention"}, page.Edges[0].Event.RecordedBy)

	// What remains: p1's two younger events and the two purge events.
	var remaining []uint64
	rows, err := pool.Query(ctx, "SELECT sequence FROM audit_events WHERE tenant_id = 't1' AND project_id = 'p1' ORDER BY sequence")
	require.NoError(t, err)
	for rows.Next() {
		var s uint64
		require.NoError(t, rows.Scan(&s))
		remaining = append(remaining, s)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []uint64{6, 7, 8, 9}, remaining)

	// The rest of the chain still verifies, from the purged prefix's anchor.
	v, err := a.VerifyAuditChain(ctx, reader, "p1", nil, nil)
	require.NoError(t, err)
	require.True(t, v.Valid)
	require.Equal(t, uint64(5), v.PurgedThrough)
	require.Equal(t, uint64(4), v.CheckedCount)
	require.Equal(t, uint64(9), v.HeadSequence)
	six := uint64(6)
	v, err = a.VerifyAuditChain(ctx, reader, "p1", &six, nil)
	require.NoError(t, err)
	require.True(t, v.Valid)
	three := uint64(3)
	_, err = a.VerifyAuditChain(ctx, reader, "p1", &three, nil)
	requireCode(t, err, app.CodeBadUserInput)

	// A second run finds nothing more to purge.
	purges, err = a.PurgeExpiredAuditEvents(ctx, 100)
	require.NoError(t, err)
	require.Empty(t, purges)

	// The purge path is the only way to delete, and only the purged prefix:
	// neither a plain DELETE, nor one with the purge switch above the
	// prefix, nor moving a head back is allowed.
	_, err = pool.Exec(ctx, "DELETE FROM audit_events WHERE tenant_id = 't1' AND project_id = 'p1' AND sequence = 6")
	require.ErrorContains(t, err, "append-only")
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "SELECT set_config('aether.audit_purge', 'on', true)")
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "DELETE FROM audit_events WHERE tenant_id = 't1' AND project_id = 'p1' AND sequence = 6")
	require.ErrorContains(t, err, "append-only")
	require.NoError(t, tx.Rollback(ctx))
	_, err = pool.Exec(ctx, "UPDATE audit_project_heads SET purged_through = 2 WHERE tenant_id = 't1' AND project_id = 'p1'")
	require.ErrorContains(t, err, "only move forward")
	_, err = pool.Exec(ctx, "UPDATE audit_project_heads SET purged_through = 100 WHERE tenant_id = 't1' AND project_id = 'p1'")
	require.ErrorContains(t, err, "audit_project_heads_purge_within")
	require.Equal(t, 5, countEvents(t, pool), "p1 keeps 4 events and p2 its purge event: nothing else was deleted")
}

func TestSetAuditRetention(t *testing.T) {
	pool := storetest.NewPool(t)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := &manualClock{now: t0}
	// This service allows windows from a day; the default floor is below.
	a := app.New(store.New(pool), app.Config{Now: clock.Now, MinAuditRetention: 24 * time.Hour})
	ctx := context.Background()
	writer := app.Identity{Subject: "svc", TenantID: "t1", ProjectIDs: []string{app.AllProjects}, Permissions: []app.Permission{app.PermissionAuditWrite}}
	admin := app.Identity{Subject: "root", TenantID: "t1", ProjectIDs: []string{app.AllProjects}, Permissions: []app.Permission{app.PermissionAdmin, app.PermissionAuditRead}}
	other := app.Identity{Subject: "svc", TenantID: "t2", ProjectIDs: []string{app.AllProjects}, Permissions: []app.Permission{app.PermissionAuditWrite}}
	d := draft("p1", "device.updated")
	d.OccurredAt = t0
	for _, p := range []string{"p1", "p2"} {
		d.ProjectID = p
		_, err := a.RecordAuditEvent(ctx, writer, d, "")
		require.NoError(t, err)
	}
	d.ProjectID = "p1"
	_, err := a.RecordAuditEvent(ctx, other, d, "")
	require.NoError(t, err)

	r, err := a.AuditRetention(ctx, admin)
	require.NoError(t, err)
	require.Nil(t, r.Override)
	require.Equal(t, app.DefaultAuditRetention, r.Retention)

	ten := 10
	_, err = a.SetAuditRetention(ctx, admin, &ten, false)
	requireCode(t, err, app.CodeConfirmationRequired)
	zero := 0
	_, err = a.SetAuditRetention(ctx, admin, &zero, true)
	requireCode(t, err, app.CodeBadUserInput)
	scoped := admin
	scoped.ProjectIDs = []string{"p1"}
	_, err = a.SetAuditRetention(ctx, scoped, &ten, true)
	requireCode(t, err, app.CodeForbidden)
	notAdmin := admin
	notAdmin.Permissions = []app.Permission{app.PermissionAuditRead}
	_, err = a.SetAuditRetention(ctx, notAdmin, &ten, true)
	requireCode(t, err, app.CodeForbidden)
	_, err = a.AuditRetention(ctx, notAdmin)
	requireCode(t, err, app.CodeForbidden)

	// A tenant without any audit history has nowhere to record the change.
	empty := admin
	empty.TenantID = "t3"
	_, err = a.SetAuditRetention(ctx, empty, &ten, true)
	requireCode(t, err, app.CodeInvalidState)

	r, err = a.SetAuditRetention(ctx, admin, &ten, true)
	require.NoError(t, err)
	require.Equal(t, 10, *r.Override)
	require.Equal(t, 10*24*time.Hour, r.Retention)

	// Audited in each of the tenant's projects, and only there.
	for _, p := range []string{"p1", "p2"} {
		page, err := a.SearchAuditEvents(ctx, admin, app.SearchAuditEventsInput{ProjectID: p,
			Filter: app.AuditEventFilterInput{Action: "audit.retention.updated"}})
		require.NoError(t, err)
		require.Len(t, page.Edges, 1, p)
		require.Equal(t, "root", page.Edges[0].Event.Subject.ID)
	}

	// The tenant's window applies to it alone: 11 days on, t1's original
	// events go, t2's (default 400 days) stay.
	clock.Add(11 * 24 * time.Hour)
	purges, err := a.PurgeExpiredAuditEvents(ctx, 100)
	require.NoError(t, err)
	require.Len(t, purges, 2)
	for _, p := range purges {
		require.Equal(t, "t1", p.TenantID)
	}

	// Back to the default.
	r, err = a.SetAuditRetention(ctx, admin, nil, true)
	require.NoError(t, err)
	require.Nil(t, r.Override)
	require.Equal(t, app.DefaultAuditRetention, r.Retention)

	// By default a tenant may not go below the service's floor of 30 days.
	floored := app.New(store.New(pool), app.Config{Now: clock.Now})
	_, err = floored.SetAuditRetention(ctx, admin, &ten, true)
	requireCode(t, err, app.CodeBadUserInput)
	require.Contains(t, err.Error(), "minimum is 30 days")
	thirty := 30
	r, err = floored.SetAuditRetention(ctx, admin, &thirty, true)
	require.NoError(t, err)
	require.Equal(t, 30*24*time.Hour, r.Retention)
}

// purgeDuringVerify is the real store, running a purge (as another process
// would) right after the first read of the purged prefix, and returning
// that read as it was before.
type purgeDuringVerify struct {
	*store.Store
	purge func()
	once  sync.Once
}

func (s *purgeDuringVerify) AuditPurgedPrefix(ctx context.Context, tenantID, projectID string) (domain.PurgedPrefix, error) {
	p, err := s.Store.AuditPurgedPrefix(ctx, tenantID, projectID)
	s.once.Do(s.purge)
	return p, err
}

// TestVerifyAuditChainDuringAPurge: a purge committing while the chain is
// read does not make a valid chain look broken.
func TestVerifyAuditChainDuringAPurge(t *testing.T) {
	pool := storetest.NewPool(t)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := &manualClock{now: t0}
	purger := app.New(store.New(pool), app.Config{Now: clock.Now, AuditRetention: 24 * time.Hour})
	ctx := context.Background()
	writer := app.Identity{Subject: "svc", TenantID: "t1", ProjectIDs: []string{"p1"}, Permissions: []app.Permission{app.PermissionAuditWrite}}
	reader := app.Identity{Subject: "dash", TenantID: "t1", ProjectIDs: []string{"p1"}, Permissions: []app.Permission{app.PermissionAuditRead}}
	for range 5 {
		d := draft("p1", "device.updated")
		d.OccurredAt = t0
		_, err := purger.RecordAuditEvent(ctx, writer, d, "")
		require.NoError(t, err)
	}
	clock.Add(48 * time.Hour)
	st := &purgeDuringVerify{Store: store.New(pool), purge: func() {
		purges, err := purger.PurgeExpiredAuditEvents(ctx, 10)
		require.NoError(t, err)
		require.Len(t, purges, 1)
	}}
	verifier := app.New(st, app.Config{Now: clock.Now})
	v, err := verifier.VerifyAuditChain(ctx, reader, "p1", nil, nil)
	require.NoError(t, err)
	require.True(t, v.Valid, "%+v", v)
	require.Equal(t, uint64(5), v.PurgedThrough)
	require.Equal(t, uint64(1), v.CheckedCount, "the purge's own event")
}
