package app

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/domain"
)

// lockTable holds table locked in ACCESS EXCLUSIVE mode from another
// session, as a partition's creation or an operator's LOCK TABLE does,
// until the returned release is called.
func lockTable(t *testing.T, pool *pgxpool.Pool, table string) (release func()) {
	t.Helper()
	ctx := context.Background()
	blocker, err := pool.Begin(ctx)
	require.NoError(t, err)
	_, err = blocker.Exec(ctx, "LOCK TABLE "+table+" IN ACCESS EXCLUSIVE MODE")
	require.NoError(t, err)
	var once sync.Once
	release = func() { once.Do(func() { require.NoError(t, blocker.Rollback(ctx)) }) }
	t.Cleanup(release)
	return release
}

// awaitLockWaiter waits until a session of the database waits for a lock.
func awaitLockWaiter(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, pool.QueryRow(context.Background(),
			lockWaiters).Scan(&n))
		return n > 0
	}, 30*time.Second, 5*time.Millisecond, "an append waits for the lock")
}

// TestAppendsBlockedByATableLockFailWithinTheirBound: while another
// session holds audit_events in ACCESS EXCLUSIVE mode (what creating a
// partition takes), every kind of append waits in a statement after the
// head lock (the insert, the lookup of client ids): a lone event, a batch
// with client ids, a batch with an idempotency key, and concurrent
// appends sharing transactions. Each fails with UNAVAILABLE within its
// bound, nothing is written, no backend stays queued for the table, and
// appends work again once the table is free.
func TestAppendsBlockedByATableLockFailWithinTheirBound(t *testing.T) {
	pool, a, writer := appendsAfterOne(t, testAppendTimeout)
	ctx := context.Background()
	var err error

	release := lockTable(t, pool, "audit_events")
	withID := func(action string) domain.AuditEventDraft {
		d := coalesceDraft(action)
		d.ID = uuid.New()
		return d
	}
	// In order: the first two run in one batch (the head is known), BEGIN
	// and the bound with the insert; the insert of three events is new to
	// every connection, so pgx prepares it in a round trip of its own,
	// ahead of the batch's BEGIN and bound.
	records := []struct {
		name   string
		record func() error
	}{
		{"batch new to the connection", func() error {
			_, err := a.RecordAuditEvents(ctx, writer, RecordAuditEventsInput{Events: []domain.AuditEventDraft{coalesceDraft("device.a"), coalesceDraft("device.b"), coalesceDraft("device.c")}})
			return err
		}},
		{"lone", func() error {
			_, err := a.RecordAuditEvent(ctx, writer, coalesceDraft("device.lone"), "")
			return err
		}},
		{"client ids", func() error {
			_, err := a.RecordAuditEvents(ctx, writer, RecordAuditEventsInput{Events: []domain.AuditEventDraft{withID("device.a"), withID("device.b")}})
			return err
		}},
		{"idempotency key", func() error {
			_, err := a.RecordAuditEvents(ctx, writer, RecordAuditEventsInput{Events: []domain.AuditEventDraft{coalesceDraft("device.keyed")}, IdempotencyKey: "k1"})
			return err
		}},
	}
	for _, r := range records {
		start := time.Now()
		err := r.record()
		t.Log(r.name, "answered in", time.Since(start), err)
		requireAppendUnavailable(t, err, start)
		requireNoLockWaiters(t, pool)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			start := time.Now()
			_, err := a.RecordAuditEvents(ctx, writer, RecordAuditEventsInput{Events: []domain.AuditEventDraft{coalesceDraft("device.x"), coalesceDraft("device.y")}})
			requireAppendUnavailable(t, err, start)
		})
	}
	wg.Wait()
	requireNoLockWaiters(t, pool)
	release()
	requireChain(t, a, pool, 1)

	e, err := a.RecordAuditEvent(ctx, writer, coalesceDraft("device.next"), "")
	require.NoError(t, err)
	require.Equal(t, uint64(2), e.Sequence)
	_, err = a.RecordAuditEvents(ctx, writer, RecordAuditEventsInput{Events: []domain.AuditEventDraft{coalesceDraft("device.keyed")}, IdempotencyKey: "k1"})
	require.NoError(t, err)
	requireChain(t, a, pool, 3)
}

// TestAppendWaitingTwiceFailsWithinItsBound: an append waits for the head
// (held by one session) for longer than appendGrace, then, in its next
// statement, for audit_events (held by another, as a partition's creation
// holds it). The two waits together stay within the append's bound:
// PostgreSQL ends the second one at the bound, not a whole bound after it
// began, so the caller gets UNAVAILABLE with nothing recorded, no backend
// stays queued for the table, and nothing commits once the table is free.
func TestAppendWaitingTwiceFailsWithinItsBound(t *testing.T) {
	const bound = 4 * time.Second
	pool, a, writer := appendsAfterOne(t, bound)
	ctx := context.Background()

	releaseHead := lockHead(t, pool)
	releaseTable := lockTable(t, pool, "audit_events")
	// The keyed append takes the general path: the idempotency claim and
	// the head lock, then the insert, each statement in its own round trip.
	start := time.Now()
	answered := make(chan error, 1)
	go func() {
		_, err := a.RecordAuditEvents(ctx, writer, RecordAuditEventsInput{Events: []domain.AuditEventDraft{coalesceDraft("device.twice")}, IdempotencyKey: "k1"})
		answered <- err
	}()
	awaitLockWaiter(t, pool)
	// The head is released past appendGrace into the bound, so that a
	// second wait of a whole bound would outlast the bound and its grace.
	time.AfterFunc(time.Until(start.Add(bound-time.Second)), releaseHead)
	var got error
	select {
	case got = <-answered:
	case <-time.After(30 * time.Second):
		t.Fatal("the append did not answer")
	}
	elapsed := time.Since(start)
	t.Log("answered in", elapsed, got)
	require.Error(t, got)
	e := ErrorOf(got)
	require.Equal(t, CodeUnavailable, e.Code, "%v", got)
	require.Contains(t, e.Message, "nothing was recorded", "%v", got)
	require.Less(t, elapsed, bound+appendGrace, "ended by PostgreSQL at the bound")
	requireNoLockWaiters(t, pool)
	releaseTable()
	requireChain(t, a, pool, 1)
}
