package store_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/store"
	"github.com/aetheriot/aether-audit/store/storetest"
)

// roundTrips counts what a connection sends and waits for: single
// statements, batches and copies.
type roundTrips struct{ n atomic.Int64 }

func (r *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	r.n.Add(1)
	return ctx
}
func (r *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (r *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	r.n.Add(1)
	return ctx
}
func (r *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (r *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}
func (r *roundTrips) TraceCopyFromStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceCopyFromStartData) context.Context {
	r.n.Add(1)
	return ctx
}
func (r *roundTrips) TraceCopyFromEnd(context.Context, *pgx.Conn, pgx.TraceCopyFromEndData) {}

// sealedEvents seals n new events of t1/p1 after head, as the app does.
func sealedEvents(t *testing.T, head domain.ChainHead, n int) ([]domain.AuditEvent, domain.ChainHead) {
	t.Helper()
	now := time.Now()
	drafts := make([]domain.AuditEventDraft, n)
	for i := range drafts {
		drafts[i] = domain.AuditEventDraft{ID: uuid.Must(uuid.NewV7()), ProjectID: "p1", Action: "device.rebooted", OccurredAt: now,
			Subject:  domain.Subject{Type: domain.SubjectService, ID: "svc"},
			Resource: domain.Resource{Type: "device", ID: "d1"}, Outcome: domain.OutcomeSuccess}
		require.NoError(t, drafts[i].Normalize("", now))
	}
	events, newHead := head.Append("t1", drafts, now)
	for i := range events {
		events[i].InputFingerprint = drafts[i].Fingerprint()
	}
	return events, newHead
}

// TestAppendTakesTwoRoundTrips holds an append of one event, through the
// app's coalesced path, to two round trips: BEGIN with the head lock, then
// the INSERT, head UPDATE and notification with the COMMIT.
func TestAppendTakesTwoRoundTrips(t *testing.T) {
	cfg, err := pgxpool.ParseConfig(storetest.NewDatabase(t))
	require.NoError(t, err)
	trips := &roundTrips{}
	cfg.ConnConfig.Tracer = trips
	cfg.MaxConns = 1 // one connection, whose statements are prepared once
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	a := app.New(store.New(pool), app.Config{})
	id := app.Identity{Subject: "svc", TenantID: "t1", ProjectIDs: []string{"p1"}, Permissions: []app.Permission{app.PermissionAuditWrite}}
	draft := domain.AuditEventDraft{ProjectID: "p1", Action: "device.rebooted", OccurredAt: time.Now(),
		Subject:  domain.Subject{Type: domain.SubjectService, ID: "svc"},
		Resource: domain.Resource{Type: "device", ID: "d1"}, Outcome: domain.OutcomeSuccess}
	ctx := context.Background()
	for range 2 { // the project's head is created, statements get prepared
		_, err := a.RecordAuditEvent(ctx, id, draft, "")
		require.NoError(t, err)
	}
	trips.n.Store(0)
	e, err := a.RecordAuditEvent(ctx, id, draft, "")
	require.NoError(t, err)
	require.EqualValues(t, 3, e.Sequence)
	require.EqualValues(t, 2, trips.n.Load())
}

// TestQueuedAppendFailureCommitsNothing makes the INSERT that travels with
// the COMMIT fail (an event at a sequence already taken): the commit
// reports the INSERT's error, retryable as a lost race, and nothing of the
// transaction is stored, the head's move included.
func TestQueuedAppendFailureCommitsNothing(t *testing.T) {
	pool := storetest.NewPool(t)
	st := store.New(pool)
	ctx := context.Background()
	var first domain.ChainHead
	require.NoError(t, st.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
		head, _, err := tx.LockAuditHead(ctx, "t1", "p1")
		if err != nil {
			return err
		}
		events, newHead := sealedEvents(t, head, 1)
		first = newHead
		return tx.AppendAuditEvents(ctx, "t1", "p1", events, newHead)
	}))

	var stale []domain.AuditEvent
	err := st.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
		if _, _, err := tx.LockAuditHead(ctx, "t1", "p1"); err != nil {
			return err
		}
		// Sealed after the zero head: sequence 1 again.
		var newHead domain.ChainHead
		stale, newHead = sealedEvents(t, domain.ChainHead{}, 2)
		return tx.AppendAuditEvents(ctx, "t1", "p1", stale, newHead)
	})
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "23505", pgErr.Code)
	require.ErrorContains(t, err, "inserting audit events")
	require.True(t, st.IsRetryable(err))

	head, err := st.AuditHead(ctx, "t1", "p1")
	require.NoError(t, err)
	require.Equal(t, first, head)
	found, err := st.FindAuditEventsByID(ctx, "t1", []uuid.UUID{stale[0].ID, stale[1].ID})
	require.NoError(t, err)
	require.Empty(t, found)
	var inTx int64
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE state LIKE 'idle in transaction%' AND datname = current_database()").Scan(&inTx))
	require.Zero(t, inTx, "a connection was left inside the transaction")
}

// TestQueuedAppendBeforeFailedStatementCommitsNothing queues an append and
// then runs a statement that fails, whose error fn ignores: the commit
// still fails, and nothing is stored.
func TestQueuedAppendBeforeFailedStatementCommitsNothing(t *testing.T) {
	pool := storetest.NewPool(t)
	st := store.New(pool)
	ctx := context.Background()
	var events []domain.AuditEvent
	err := st.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
		head, _, err := tx.LockAuditHead(ctx, "t1", "p1")
		if err != nil {
			return err
		}
		var newHead domain.ChainHead
		events, newHead = sealedEvents(t, head, 1)
		if err := tx.AppendAuditEvents(ctx, "t1", "p1", events, newHead); err != nil {
			return err
		}
		// The queued append goes with this read, which fails (PostgreSQL
		// text cannot hold a NUL): the transaction is aborted.
		_, err = tx.AuditHead(ctx, "t\x00", "p1")
		require.Error(t, err)
		return nil
	})
	require.ErrorIs(t, err, pgx.ErrTxCommitRollback)
	found, err := st.FindAuditEventsByID(ctx, "t1", []uuid.UUID{events[0].ID})
	require.NoError(t, err)
	require.Empty(t, found)
	head, err := st.AuditHead(ctx, "t1", "p1")
	require.NoError(t, err)
	require.Zero(t, head.Sequence)
}

// TestQueuedAppendIsSeenInItsTransaction reads, in the transaction, the
// events an append queued: the read carries them to the server first.
func TestQueuedAppendIsSeenInItsTransaction(t *testing.T) {
	st := store.New(storetest.NewPool(t))
	ctx := context.Background()
	require.NoError(t, st.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
		head, _, err := tx.LockAuditHead(ctx, "t1", "p1")
		if err != nil {
			return err
		}
		events, newHead := sealedEvents(t, head, 3)
		if err := tx.AppendAuditEvents(ctx, "t1", "p1", events, newHead); err != nil {
			return err
		}
		got, err := tx.GetAuditEventBySequence(ctx, "t1", "p1", 3)
		require.NoError(t, err)
		require.Equal(t, events[2].ID, got.ID)
		h, err := tx.AuditHead(ctx, "t1", "p1")
		require.NoError(t, err)
		require.Equal(t, newHead, h)
		return nil
	}))
	head, err := st.AuditHead(ctx, "t1", "p1")
	require.NoError(t, err)
	require.EqualValues(t, 3, head.Sequence)
}
