package store_test

import (
	"context"
	"sync"
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

// roundTripApp is an App over a one-connection pool of the database at url
// whose round trips are counted.
func roundTripApp(t *testing.T, url string) (*app.App, *roundTrips) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	trips := &roundTrips{}
	cfg.ConnConfig.Tracer = trips
	cfg.MaxConns = 1 // one connection, whose statements are prepared once
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return app.New(store.New(pool), app.Config{}), trips
}

// TestAppendTakesOneRoundTrip holds an append of one event, through the
// app's coalesced path, to one round trip once the process knows the
// project's head: BEGIN, the lock of the expected head, the INSERT, head
// UPDATE and notification, and the COMMIT in one batch. The first append
// of a process reads the head under its lock first (two round trips). When
// another process moved the head, the expected head fails the transaction
// before anything is written, and the append runs again with the head
// read: the chain stays dense and verifies.
func TestAppendTakesOneRoundTrip(t *testing.T) {
	url := storetest.NewDatabase(t)
	a, trips := roundTripApp(t, url)
	id := app.Identity{Subject: "svc", TenantID: "t1", ProjectIDs: []string{"p1"},
		Permissions: []app.Permission{app.PermissionAuditWrite, app.PermissionAuditRead}}
	draft := domain.AuditEventDraft{ProjectID: "p1", Action: "device.rebooted", OccurredAt: time.Now(),
		Subject:  domain.Subject{Type: domain.SubjectService, ID: "svc"},
		Resource: domain.Resource{Type: "device", ID: "d1"}, Outcome: domain.OutcomeSuccess}
	ctx := context.Background()
	record := func(a *app.App, trips *roundTrips, wantSeq uint64, wantTrips int64) {
		t.Helper()
		trips.n.Store(0)
		e, err := a.RecordAuditEvent(ctx, id, draft, "")
		require.NoError(t, err)
		require.Equal(t, wantSeq, e.Sequence)
		require.Equal(t, wantTrips, trips.n.Load(), "round trips of the append of sequence %d", wantSeq)
	}
	for range 2 { // the project's head is created, statements get prepared
		_, err := a.RecordAuditEvent(ctx, id, draft, "")
		require.NoError(t, err)
	}
	record(a, trips, 3, 1)
	record(a, trips, 4, 1)

	other, otherTrips := roundTripApp(t, url) // another process
	record(other, otherTrips, 5, 2)
	record(other, otherTrips, 6, 1)
	// a expects the head it left at 4: refused (the batch, then its
	// ROLLBACK), then read and locked.
	record(a, trips, 7, 2+2)
	record(a, trips, 8, 1)

	v, err := a.VerifyAuditChain(ctx, id, "p1", nil, nil)
	require.NoError(t, err)
	require.True(t, v.Valid)
	require.EqualValues(t, 8, v.CheckedCount)
	require.EqualValues(t, 8, v.HeadSequence)
}

// TestExpectAuditHeadRefusesAnotherHead: a transaction that expects a head
// other than the stored one, or other webhooks than the project has, fails
// retryably and writes nothing, however its appends were sealed; the
// expected head is locked and appended after.
func TestExpectAuditHeadRefusesAnotherHead(t *testing.T) {
	st := store.New(storetest.NewPool(t))
	ctx := context.Background()
	var first domain.ChainHead
	require.NoError(t, st.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
		head, _, err := tx.LockAuditHead(ctx, "t1", "p1")
		if err != nil {
			return err
		}
		var events []domain.AuditEvent
		events, first = sealedEvents(t, head, 1)
		return tx.AppendAuditEvents(ctx, "t1", "p1", events, head, first)
	}))
	for name, tc := range map[string]struct {
		head     domain.ChainHead
		webhooks bool
	}{
		"an older head":        {domain.ChainHead{}, false},
		"another hash":         {domain.ChainHead{Sequence: first.Sequence}, false},
		"webhooks it lacks":    {first, true},
		"a head of the future": {domain.ChainHead{Sequence: first.Sequence + 1, Hash: first.Hash}, false},
	} {
		t.Run(name, func(t *testing.T) {
			err := st.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
				if err := tx.ExpectAuditHead(ctx, "t1", "p1", tc.head, tc.webhooks); err != nil {
					return err
				}
				events, next := sealedEvents(t, tc.head, 1)
				events[0].Sequence = first.Sequence + 1 // even where the sequence would be free
				return tx.AppendAuditEvents(ctx, "t1", "p1", events, tc.head, next)
			})
			require.Error(t, err)
			require.True(t, st.IsRetryable(err), "%v", err)
			head, err := st.AuditHead(ctx, "t1", "p1")
			require.NoError(t, err)
			require.Equal(t, first, head)
		})
	}
	require.NoError(t, st.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
		if err := tx.ExpectAuditHead(ctx, "t1", "p1", first, false); err != nil {
			return err
		}
		events, next := sealedEvents(t, first, 2)
		return tx.AppendAuditEvents(ctx, "t1", "p1", events, first, next)
	}))
	head, err := st.AuditHead(ctx, "t1", "p1")
	require.NoError(t, err)
	require.EqualValues(t, 3, head.Sequence)
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
		return tx.AppendAuditEvents(ctx, "t1", "p1", events, head, newHead)
	}))

	var stale []domain.AuditEvent
	err := st.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
		if _, _, err := tx.LockAuditHead(ctx, "t1", "p1"); err != nil {
			return err
		}
		// Sealed after the zero head: sequence 1 again.
		var newHead domain.ChainHead
		stale, newHead = sealedEvents(t, domain.ChainHead{}, 2)
		return tx.AppendAuditEvents(ctx, "t1", "p1", stale, domain.ChainHead{}, newHead)
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
		if err := tx.AppendAuditEvents(ctx, "t1", "p1", events, head, newHead); err != nil {
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
		if err := tx.AppendAuditEvents(ctx, "t1", "p1", events, head, newHead); err != nil {
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

// batchStatements counts round trips as roundTrips does and keeps the
// statements sent in batches.
type batchStatements struct {
	roundTrips
	mu  sync.Mutex
	sql []string
}

func (b *batchStatements) TraceBatchQuery(_ context.Context, _ *pgx.Conn, data pgx.TraceBatchQueryData) {
	b.mu.Lock()
	b.sql = append(b.sql, data.SQL)
	b.mu.Unlock()
}

// TestCommitWithoutFlushTakesNoRoundTrip holds the relaxed durability of
// an outcome's transaction to no round trip of its own: the setting goes
// to the server with the transaction's next statement, in its batch.
func TestCommitWithoutFlushTakesNoRoundTrip(t *testing.T) {
	trace := &batchStatements{}
	_, st := tracedStore(t, trace, 1)
	ctx := context.Background()
	require.NoError(t, st.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
		trace.n.Store(0)
		if err := tx.CommitWithoutFlush(ctx); err != nil {
			return err
		}
		require.Zero(t, trace.n.Load(), "CommitWithoutFlush alone")
		if _, err := tx.AuditHead(ctx, "t1", "p1"); err != nil {
			return err
		}
		require.EqualValues(t, 1, trace.n.Load(), "BEGIN, the setting and the read")
		return nil
	}))
	trace.mu.Lock()
	defer trace.mu.Unlock()
	require.Contains(t, trace.sql, "SET LOCAL synchronous_commit = off")
}

// TestQueryGoesWithItsPrelude: a Query (a delivery job's outcomes, which
// SaveWebhookDeliveriesIf reads back) takes BEGIN and the queued
// statements with it in one round trip, and its rows, read to their end,
// leave the transaction ready for its next statement; a queued statement
// that fails fails the Query.
func TestQueryGoesWithItsPrelude(t *testing.T) {
	trace := &batchStatements{}
	_, st := tracedStore(t, trace, 1)
	ctx := context.Background()
	require.NoError(t, st.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
		trace.n.Store(0)
		if err := tx.CommitWithoutFlush(ctx); err != nil {
			return err
		}
		if _, err := tx.ListWebhookDestinations(ctx, "t1", "p1", uuid.Nil, 10); err != nil {
			return err
		}
		require.EqualValues(t, 1, trace.n.Load(), "BEGIN, the setting and the query")
		if _, err := tx.AuditHead(ctx, "t1", "p1"); err != nil {
			return err
		}
		require.EqualValues(t, 2, trace.n.Load(), "then the next statement")
		return nil
	}))
	trace.mu.Lock()
	require.Contains(t, trace.sql, "SET LOCAL synchronous_commit = off")
	trace.mu.Unlock()

	// A Query that fails in its batch reports its error through its rows,
	// and the connection, rolled back, serves the next transaction.
	err := st.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
		if err := tx.CommitWithoutFlush(ctx); err != nil {
			return err
		}
		// PostgreSQL text cannot hold a NUL.
		_, err := tx.ListWebhookDestinations(ctx, "t\x00", "p1", uuid.Nil, 10)
		return err
	})
	require.ErrorContains(t, err, "invalid byte sequence")
	require.NoError(t, st.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
		_, err := tx.ListWebhookDestinations(ctx, "t1", "p1", uuid.Nil, 10)
		return err
	}))
}
