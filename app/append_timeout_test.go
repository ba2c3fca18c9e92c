package app

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/store"
	"github.com/aetheriot/aether-audit/store/storetest"
)

// testAppendTimeout is the append bound of these tests: short, so that
// the tests wait little, and far below the minute a wait took before
// appends were bounded.
const testAppendTimeout = 2 * time.Second

// testAppendSlack is what a noisy machine may add to an append's bound
// (and appendGrace) before its caller must have its answer.
const testAppendSlack = 2 * time.Second

// appendsAfterOne returns a pool on a new test database, an App over it
// whose appends are bounded by bound (0: the default), and a writer of
// tenant t1's project p1, whose first event is recorded: the project's
// head exists, for the tests that block it.
func appendsAfterOne(t *testing.T, bound time.Duration) (*pgxpool.Pool, *App, Identity) {
	t.Helper()
	pool := storetest.NewPool(t)
	a := New(store.New(pool), Config{AppendTimeout: bound})
	writer := Identity{Subject: "svc", TenantID: "t1", ProjectIDs: []string{"p1"}, Permissions: []Permission{PermissionAuditWrite}}
	_, err := a.RecordAuditEvent(context.Background(), writer, coalesceDraft("device.first"), "")
	require.NoError(t, err)
	return pool, a, writer
}

// lockHead holds tenant t1's project p1's head row locked from another
// session, as a transaction of another process would, until the returned
// release is called.
func lockHead(t *testing.T, pool *pgxpool.Pool) (release func()) {
	t.Helper()
	ctx := context.Background()
	blocker, err := pool.Begin(ctx)
	require.NoError(t, err)
	_, err = blocker.Exec(ctx, "SELECT 1 FROM audit_project_heads WHERE tenant_id = 't1' AND project_id = 'p1' FOR UPDATE")
	require.NoError(t, err)
	var once sync.Once
	release = func() { once.Do(func() { require.NoError(t, blocker.Rollback(ctx)) }) }
	t.Cleanup(release)
	return release
}

// requireAppendUnavailable requires err to be the UNAVAILABLE answer of an
// append that recorded nothing, given within its bound since start.
func requireAppendUnavailable(t *testing.T, err error, start time.Time) {
	t.Helper()
	require.Error(t, err)
	e := ErrorOf(err)
	require.Equal(t, CodeUnavailable, e.Code, "%v", err)
	require.Equal(t, appendRetryAfter, e.RetryAfter)
	require.Contains(t, e.Message, "nothing was recorded")
	require.Less(t, time.Since(start), testAppendTimeout+appendGrace+testAppendSlack, "answered within the bound")
}

// lockWaiters counts the sessions of the test's database that wait for a
// lock, a row's (whose lock in pg_locks, the holder's transaction id, names
// no database) or a table's.
const lockWaiters = "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"

// requireNoLockWaiters requires that no session of the database waits for a
// lock: an append that gave up left no backend behind still queued for the
// head (which would commit once the head is free).
func requireNoLockWaiters(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(),
		lockWaiters).Scan(&n))
	require.Zero(t, n, "sessions still waiting for a lock")
}

// requireChain requires p1's events to be exactly n, dense, with a valid
// chain.
func requireChain(t *testing.T, a *App, pool *pgxpool.Pool, n uint64) {
	t.Helper()
	ctx := context.Background()
	var count, top uint64
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*), coalesce(max(sequence), 0) FROM audit_events WHERE tenant_id = 't1' AND project_id = 'p1'").Scan(&count, &top))
	require.Equal(t, n, count)
	require.Equal(t, n, top, "dense")
	v, err := a.VerifyAuditChain(ctx, Identity{TenantID: "t1", ProjectIDs: []string{"p1"}, Permissions: []Permission{PermissionAuditRead}}, "p1", nil, nil)
	require.NoError(t, err)
	require.True(t, v.Valid)
	require.Equal(t, n, v.HeadSequence)
}

// TestBlockedLoneAppendFailsWithinItsBound: a lone append (on its caller's
// goroutine, with a caller that sets no deadline) to a project whose head
// another session holds fails with UNAVAILABLE within the append bound,
// ended by PostgreSQL itself (lock_timeout: no backend stays queued for
// the head); nothing is written, and the next append once the head is free
// continues the chain. So does an append with an idempotency key, which
// takes the general path.
func TestBlockedLoneAppendFailsWithinItsBound(t *testing.T) {
	pool, a, writer := appendsAfterOne(t, testAppendTimeout)
	ctx := context.Background()
	var err error
	_, err = a.RecordAuditEvent(ctx, writer, coalesceDraft("device.second"), "")
	require.NoError(t, err, "the second append expects the head the first left")

	release := lockHead(t, pool)
	start := time.Now()
	_, err = a.RecordAuditEvent(ctx, writer, coalesceDraft("device.lone"), "")
	requireAppendUnavailable(t, err, start)
	requireNoLockWaiters(t, pool)

	start = time.Now()
	_, err = a.RecordAuditEvents(ctx, writer, RecordAuditEventsInput{Events: []domain.AuditEventDraft{coalesceDraft("device.keyed")}, IdempotencyKey: "k1"})
	requireAppendUnavailable(t, err, start)
	requireNoLockWaiters(t, pool)
	release()
	requireChain(t, a, pool, 2)

	e, err := a.RecordAuditEvent(ctx, writer, coalesceDraft("device.next"), "")
	require.NoError(t, err)
	require.Equal(t, uint64(3), e.Sequence)
	events, err := a.RecordAuditEvents(ctx, writer, RecordAuditEventsInput{Events: []domain.AuditEventDraft{coalesceDraft("device.keyed")}, IdempotencyKey: "k1"})
	require.NoError(t, err, "the key of the refused call was not left claimed")
	require.Equal(t, uint64(4), events[0].Sequence)
	requireChain(t, a, pool, 4)
}

// TestBlockedCoalescedAppendsFailWithinTheirBound: while another session
// holds the project's head, appends pile up behind a lone one, more than
// one shared transaction takes (maxCoalescedEvents), so that they would
// run one after another, each waiting its own bound. Every caller still
// gets UNAVAILABLE within the bound from its own arrival, nothing is
// written, no backend stays queued for the head, and once the head is
// free the next appends, single and concurrent, continue the chain.
func TestBlockedCoalescedAppendsFailWithinTheirBound(t *testing.T) {
	pool, a, writer := appendsAfterOne(t, testAppendTimeout)
	ctx := context.Background()
	var err error

	release := lockHead(t, pool)
	key := projectKey{"t1", "p1"}
	waiting := func() int {
		a.coalescer.mu.Lock()
		defer a.coalescer.mu.Unlock()
		if q := a.coalescer.queues[key]; q != nil {
			return len(q.waiting)
		}
		return -1
	}
	batch := func(n int) []domain.AuditEventDraft {
		out := make([]domain.AuditEventDraft, n)
		for i := range out {
			out[i] = coalesceDraft(fmt.Sprintf("device.e%d", i))
		}
		return out
	}
	var wg sync.WaitGroup
	send := func(events []domain.AuditEventDraft) {
		wg.Go(func() {
			start := time.Now()
			_, err := a.RecordAuditEvents(ctx, writer, RecordAuditEventsInput{Events: events})
			requireAppendUnavailable(t, err, start)
		})
	}
	send(batch(1))
	require.Eventually(t, func() bool { return waiting() == 0 }, 10*time.Second, time.Millisecond, "the lead holds the queue")
	// Five shared transactions' worth, which would run one after another
	// (each waiting a whole bound, the last caller six).
	const piled = 5 * maxCoalescedEvents / MaxRecordBatch
	for range piled {
		send(batch(MaxRecordBatch))
	}
	wg.Wait()
	requireNoLockWaiters(t, pool)
	require.Equal(t, -1, waiting(), "the queue is gone")
	release()
	requireChain(t, a, pool, 1)

	e, err := a.RecordAuditEvent(ctx, writer, coalesceDraft("device.next"), "")
	require.NoError(t, err)
	require.Equal(t, uint64(2), e.Sequence)
	var ok sync.WaitGroup
	for range 8 {
		ok.Go(func() {
			_, err := a.RecordAuditEvents(ctx, writer, RecordAuditEventsInput{Events: batch(3)})
			require.NoError(t, err)
		})
	}
	ok.Wait()
	requireChain(t, a, pool, 2+8*3)
}
