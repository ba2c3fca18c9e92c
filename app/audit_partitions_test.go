package app_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/store"
	"github.com/aetheriot/aether-audit/store/storetest"
)

// partitionClock is the app's clock in the tests of partitioned history:
// set, never advanced by itself.
type partitionClock struct{ at atomic.Int64 }

func (c *partitionClock) set(t time.Time) { c.at.Store(t.UnixNano()) }
func (c *partitionClock) now() time.Time  { return time.Unix(0, c.at.Load()).UTC() }

// nextMonth is the start of the month after this one: audit_events has a
// partition for this month and for the next (migration 00022 creates them
// ahead).
func nextMonth() time.Time {
	now := time.Now().UTC()
	return time.Date(now.Year(), now.Month()+1, 1, 0, 0, 0, 0, time.UTC)
}

// TestAuditGuaranteesAcrossPartitions records a project's events on both
// sides of a month's turn, so that they lie in two partitions of
// audit_events, and checks every guarantee of docs/guarantees.md across
// it: dense sequences, the hash chain and its verification, keyset pages
// in both orders, the live catch-up, exports by sequence and by time,
// idempotent re-recording of an id recorded in the other month, and
// recorded_at that does not go back when the clock does.
func TestAuditGuaranteesAcrossPartitions(t *testing.T) {
	ctx := context.Background()
	pool := storetest.NewPool(t)
	st := store.New(pool)
	clock := &partitionClock{}
	a := app.New(st, app.Config{Now: clock.now})
	writer := app.Identity{Subject: "svc", TenantID: "t1", ProjectIDs: []string{"p1"}, Permissions: []app.Permission{app.PermissionAuditWrite}}
	reader := app.Identity{Subject: "dash", TenantID: "t1", ProjectIDs: []string{"p1"}, Permissions: []app.Permission{app.PermissionAuditRead}}
	turn := nextMonth()

	record := func(at time.Time, drafts ...domain.AuditEventDraft) []domain.AuditEvent {
		t.Helper()
		clock.set(at)
		events, err := a.RecordAuditEvents(ctx, writer, app.RecordAuditEventsInput{Events: drafts})
		require.NoError(t, err)
		return events
	}
	early := withID(draft("p1", "device.registered"))
	early.OccurredAt = turn.Add(-time.Hour)
	before := record(turn.Add(-2*time.Second), early, draft("p1", "device.updated"), draft("p1", "device.updated"))
	late := draft("p1", "device.late")
	late.OccurredAt = turn.Add(-2 * time.Hour) // occurred before the first ones, recorded after the turn
	after := record(turn.Add(time.Second), late, draft("p1", "device.updated"))
	// The clock steps back across the turn: recorded_at stays at the head's.
	stepped := record(turn.Add(-5*time.Second), draft("p1", "device.updated"))
	require.Equal(t, after[1].RecordedAt, stepped[0].RecordedAt)
	all := append(append(append([]domain.AuditEvent{}, before...), after...), stepped...)

	// Two partitions: this month's and the next.
	rows, err := pool.Query(ctx, `SELECT sequence, tableoid::regclass::text FROM audit_events
		WHERE tenant_id = 't1' AND project_id = 'p1' ORDER BY sequence`)
	require.NoError(t, err)
	partitions := map[uint64]string{}
	for rows.Next() {
		var seq int64
		var part string
		require.NoError(t, rows.Scan(&seq, &part))
		partitions[uint64(seq)] = part
	}
	require.NoError(t, rows.Err())
	require.Len(t, partitions, 6)
	thisMonth := "audit_events_p" + turn.AddDate(0, -1, 0).Format("200601")
	next := "audit_events_p" + turn.Format("200601")
	for seq := uint64(1); seq <= 6; seq++ {
		want := next
		if seq <= 3 {
			want = thisMonth
		}
		require.Equal(t, want, partitions[seq], "partition of event %d", seq)
	}

	// Dense sequences and the chain, verified across the turn.
	for i, e := range all {
		require.Equal(t, uint64(i+1), e.Sequence)
	}
	v, err := a.VerifyAuditChain(ctx, reader, "p1", nil, nil)
	require.NoError(t, err)
	require.True(t, v.Valid, "%+v", v)
	require.Equal(t, uint64(6), v.CheckedCount)

	// Keyset pages of two events, both ways, and a catch-up from before the turn.
	walk := func(order domain.SortOrder, after *uint64) []uint64 {
		var seqs []uint64
		in := app.SearchAuditEventsInput{ProjectID: "p1", First: ptr(2), Order: order, AfterSequence: after}
		for {
			page, err := a.SearchAuditEvents(ctx, reader, in)
			require.NoError(t, err)
			for _, edge := range page.Edges {
				seqs = append(seqs, edge.Event.Sequence)
			}
			if !page.HasNextPage {
				return seqs
			}
			in.After, in.AfterSequence = page.EndCursor, nil
		}
	}
	require.Equal(t, []uint64{1, 2, 3, 4, 5, 6}, walk(domain.OldestFirst, nil))
	require.Equal(t, []uint64{6, 5, 4, 3, 2, 1}, walk(domain.NewestFirst, nil))
	require.Equal(t, []uint64{3, 4, 5, 6}, walk(domain.OldestFirst, ptr(uint64(2))))
	got, err := st.GetAuditEventBySequence(ctx, "t1", "p1", 4)
	require.NoError(t, err)
	require.Equal(t, late.Action, got.Action)

	// Exports: by sequence across the turn, by time in occurrence order
	// (the late event, recorded in the next month, occurred first).
	var bySeq []uint64
	require.NoError(t, st.StreamAuditEventsBySequence(ctx, "t1", "p1", 2, 5, nil, func(e *domain.AuditEvent) error {
		bySeq = append(bySeq, e.Sequence)
		return nil
	}))
	require.Equal(t, []uint64{2, 3, 4, 5}, bySeq)
	var byTime []string
	require.NoError(t, st.StreamAuditEventsByTime(ctx, "t1", "p1", turn.Add(-3*time.Hour), turn, nil, func(e *domain.AuditEvent) error {
		byTime = append(byTime, e.Action)
		return nil
	}))
	require.Equal(t, []string{"device.late", "device.registered"}, byTime)
	refs, err := st.AuditEventRefs(ctx, "t1", "p1", 3, 4)
	require.NoError(t, err)
	require.Len(t, refs, 2)
	require.Equal(t, []uint64{3, 4}, []uint64{refs[0].Sequence, refs[1].Sequence})

	// Re-recording the first month's event in the next month: the stored
	// event, nothing new.
	again := record(turn.Add(time.Minute), early)
	require.Equal(t, before[0].Sequence, again[0].Sequence)
	require.Equal(t, before[0].ChainHash, again[0].ChainHash)
	require.Equal(t, 6, countEvents(t, pool))
}

// TestAuditEventIDUniqueAcrossPartitions records one new client id in two
// projects at once, one just before a month's turn and one just after, so
// that the two events would go to two partitions whose unique indexes do
// not meet: one is recorded, the other finds it (an id is unique in its
// tenant) and records nothing.
func TestAuditEventIDUniqueAcrossPartitions(t *testing.T) {
	ctx := context.Background()
	pool := storetest.NewPool(t)
	st := store.New(pool)
	turn := nextMonth()
	after := app.New(st, app.Config{Now: func() time.Time { return turn.Add(time.Second) }})
	writer := app.Identity{Subject: "svc", TenantID: "t1", ProjectIDs: []string{"p1", "p2"}, Permissions: []app.Permission{app.PermissionAuditWrite}}

	id := uuid.New()
	d1, d2 := draft("p1", "device.registered"), draft("p2", "device.registered")
	d1.ID, d2.ID = id, id

	// The first holds its transaction open after its lookup of the id.
	locked := make(chan struct{})
	release := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	var firstErr error
	go func() {
		defer wg.Done()
		firstErr = st.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
			head, _, err := tx.LockAuditHead(ctx, "t1", "p1")
			if err != nil {
				return err
			}
			found, err := tx.FindAuditEventsByID(ctx, "t1", []uuid.UUID{id})
			if err != nil {
				return err
			}
			if len(found) != 0 {
				return nil
			}
			if err := d1.Normalize("", turn); err != nil {
				return err
			}
			events, next := head.Append("t1", []domain.AuditEventDraft{d1}, turn.Add(-time.Second))
			events[0].InputFingerprint = d1.Fingerprint()
			if err := tx.AppendAuditEvents(ctx, "t1", "p1", events, head, next); err != nil {
				return err
			}
			close(locked)
			<-release
			return nil
		})
	}()
	<-locked
	var second error
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, second = after.RecordAuditEvents(ctx, writer, app.RecordAuditEventsInput{Events: []domain.AuditEventDraft{d2}})
	}()
	// The second waits for the id's lock.
	require.Eventually(t, func() bool {
		var waiting bool
		require.NoError(t, pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted)`).Scan(&waiting))
		return waiting
	}, 10*time.Second, 10*time.Millisecond)
	close(release)
	wg.Wait()
	require.NoError(t, firstErr)
	<-done
	// The id is the first's (in p1): recording it in p2 is refused or
	// answered with the stored event, never a second row.
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM audit_events WHERE tenant_id = 't1' AND id = $1`, id).Scan(&n))
	require.Equal(t, 1, n, "second append: %v", second)
}

// TestRetentionDropsExpiredPartitions purges, as the runtime role, a month
// whose every event is past the retention window: its partition is
// dropped whole (no row deleted), each project's purged prefix moves over
// its events there with the anchor of its last one, and each purge is
// audited. A project whose older events lie elsewhere (here in the DEFAULT
// partition, recorded before the month's partition existed) holds the
// partition back: the prefix delete purges it row by row, and the next run
// drops the partition.
func TestRetentionDropsExpiredPartitions(t *testing.T) {
	_, appURL, _ := storetest.NewAppRoleDatabase(t)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, appURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	clock := &partitionClock{}
	a := app.New(store.New(pool), app.Config{Now: clock.now, AuditRetention: 30 * 24 * time.Hour})
	writer := app.Identity{Subject: "svc", TenantID: "t1", ProjectIDs: []string{app.AllProjects}, Permissions: []app.Permission{app.PermissionAuditWrite}}
	reader := app.Identity{Subject: "dash", TenantID: "t1", ProjectIDs: []string{app.AllProjects}, Permissions: []app.Permission{app.PermissionAuditRead}}
	record := func(at time.Time, project string, n int) {
		t.Helper()
		clock.set(at)
		for range n {
			d := draft(project, "device.updated")
			d.OccurredAt = at
			_, err := a.RecordAuditEvent(ctx, writer, d, "")
			require.NoError(t, err)
		}
	}
	turn := nextMonth()
	month := "audit_events_p" + turn.AddDate(0, -1, 0).Format("200601")
	record(turn.AddDate(0, -2, 0), "p3", 2) // no partition that far back: DEFAULT
	record(turn.Add(-48*time.Hour), "p1", 3)
	record(turn.Add(-47*time.Hour), "p2", 2)
	record(turn.Add(-46*time.Hour), "p3", 1)
	record(turn.Add(48*time.Hour), "p1", 2) // next month: kept
	partitionExists := func() bool {
		var ok bool
		require.NoError(t, pool.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", month).Scan(&ok))
		return ok
	}

	// 31 days after the turn, the month is past retention.
	clock.set(turn.Add(31 * 24 * time.Hour))
	purges, err := a.PurgeExpiredAuditEvents(ctx, 100)
	require.NoError(t, err)
	byProject := map[string]domain.AuditPurge{}
	for _, p := range purges {
		require.NotContains(t, byProject, p.ProjectID, "one purge per project")
		byProject[p.ProjectID] = p
	}
	require.Equal(t, uint64(3), byProject["p1"].Through)
	require.Equal(t, uint64(2), byProject["p2"].Through)
	require.Equal(t, uint64(3), byProject["p3"].Through, "p3 by the prefix delete")
	require.True(t, partitionExists(), "p3's events kept the partition in the first run")

	purges, err = a.PurgeExpiredAuditEvents(ctx, 100)
	require.NoError(t, err)
	require.Empty(t, purges)
	require.False(t, partitionExists(), "the second run drops it")

	// Each project: the purge audited, what remains verifies from the anchor.
	for _, p := range []string{"p1", "p2", "p3"} {
		page, err := a.SearchAuditEvents(ctx, reader, app.SearchAuditEventsInput{ProjectID: p, Order: domain.OldestFirst})
		require.NoError(t, err)
		var actions []string
		for _, e := range page.Edges {
			actions = append(actions, e.Event.Action)
		}
		require.Contains(t, actions, "audit.events.purged", p)
		require.Equal(t, byProject[p].Through+1, page.Edges[0].Event.Sequence, "%s: the expired events are gone", p)
		v, err := a.VerifyAuditChain(ctx, reader, p, nil, nil)
		require.NoError(t, err)
		require.True(t, v.Valid, "%s: %+v", p, v)
	}
	var remaining int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM audit_events WHERE tenant_id = 't1' AND action = 'device.updated'`).Scan(&remaining))
	require.Equal(t, 2, remaining, "p1's events of the next month")
}
