package app_test

import (
	"context"
	"encoding/json"
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

func TestMain(m *testing.M) { storetest.Main(m) }

// testBundle is what each test gets: the app over a fresh database, the
// pool for inspecting rows, and identities of tenant t1.
type testBundle struct {
	app    *app.App
	pool   *pgxpool.Pool
	writer app.Identity
	reader app.Identity
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	pool := storetest.NewPool(t)
	return &testBundle{
		app:  app.New(store.New(pool), app.Config{}),
		pool: pool,
		writer: app.Identity{Subject: "svc", TenantID: "t1", ProjectIDs: []string{"p1", "p2"},
			Permissions: []app.Permission{app.PermissionAuditWrite}},
		reader: app.Identity{Subject: "dash", TenantID: "t1", ProjectIDs: []string{app.AllProjects},
			Permissions: []app.Permission{app.PermissionAuditRead}},
	}
}

var occurred = time.Date(2026, 11, 1, 8, 0, 0, 0, time.UTC)

func draft(project, action string) domain.AuditEventDraft {
	return domain.AuditEventDraft{
		ProjectID:  project,
		Action:     action,
		OccurredAt: occurred,
		Subject:    domain.Subject{Type: domain.SubjectUser, ID: "u1"},
		Resource:   domain.Resource{Type: "device", ID: "d1"},
		Outcome:    domain.OutcomeSuccess,
		Details:    json.RawMessage(`{"k":"v"}`),
	}
}

func withID(d domain.AuditEventDraft) domain.AuditEventDraft {
	d.ID = uuid.New()
	return d
}

func requireCode(t *testing.T, err error, code app.Code) {
	t.Helper()
	require.Error(t, err)
	require.Equal(t, code, app.ErrorOf(err).Code, "error: %v", err)
}

func countEvents(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT count(*) FROM audit_events").Scan(&n))
	return n
}

func TestRecordAuditEventAssignsSequenceAndChain(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	e1, err := b.app.RecordAuditEvent(ctx, b.writer, draft("p1", "device.registered"), "")
	require.NoError(t, err)
	e2, err := b.app.RecordAuditEvent(ctx, b.writer, draft("p1", "device.updated"), "0af7651916cd43dd8448eb211c80319c")
	require.NoError(t, err)
	other, err := b.app.RecordAuditEvent(ctx, b.writer, draft("p2", "device.updated"), "")
	require.NoError(t, err)

	require.Equal(t, uint64(1), e1.Sequence)
	require.Equal(t, uint64(2), e2.Sequence)
	require.Equal(t, uint64(1), other.Sequence, "each project has its own sequence")
	require.Equal(t, e1.ComputeChainHash(domain.Hash{}), e1.ChainHash)
	require.Equal(t, e2.ComputeChainHash(e1.ChainHash), e2.ChainHash)
	require.Equal(t, "0af7651916cd43dd8448eb211c80319c", e2.Correlation.TraceID, "trace id from the request")
	require.Equal(t, "t1", e1.TenantID)

	got, err := b.app.GetAuditEvent(ctx, b.reader, "p1", e2.ID.String())
	require.NoError(t, err)
	require.Equal(t, e2.ChainHash, got.ChainHash)
	require.Equal(t, e2.Details, got.Details)
	require.True(t, e2.RecordedAt.Equal(got.RecordedAt))
}

func TestRecordAuditEventIsIdempotentByID(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	d := withID(draft("p1", "device.registered"))
	first, err := b.app.RecordAuditEvent(ctx, b.writer, d, "")
	require.NoError(t, err)
	_, err = b.app.RecordAuditEvent(ctx, b.writer, draft("p1", "device.other"), "")
	require.NoError(t, err)

	// Same id, same content (details spelled differently, other trace id):
	// the stored event, unchanged.
	again := d
	again.Details = json.RawMessage(`{ "k" : "v" }`)
	second, err := b.app.RecordAuditEvent(ctx, b.writer, again, "11111111111111111111111111111111")
	require.NoError(t, err)
	require.Equal(t, first.Sequence, second.Sequence)
	require.Equal(t, first.ChainHash, second.ChainHash)

	// Same id, other content: fails closed, nothing written.
	changed := d
	changed.Outcome = domain.OutcomeFailure
	_, err = b.app.RecordAuditEvent(ctx, b.writer, changed, "")
	requireCode(t, err, app.CodeIdempotencyConflict)
	// Same id in another project is other content too.
	moved := d
	moved.ProjectID = "p2"
	_, err = b.app.RecordAuditEvent(ctx, b.writer, moved, "")
	requireCode(t, err, app.CodeIdempotencyConflict)
	require.Equal(t, 2, countEvents(t, b.pool))
}

func TestRecordAuditEventsIsAllOrNothing(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	bad := draft("p1", "device.registered")
	bad.Outcome = "MAYBE"
	_, err := b.app.RecordAuditEvents(ctx, b.writer, app.RecordAuditEventsInput{Events: []domain.AuditEventDraft{
		draft("p1", "device.registered"), draft("p2", "device.registered"), bad,
	}})
	requireCode(t, err, app.CodeBadUserInput)
	require.Equal(t, "events[2].outcome", app.ErrorOf(err).Field)

	// A conflict found inside the transaction rolls back the events before it.
	d := withID(draft("p1", "device.registered"))
	_, err = b.app.RecordAuditEvent(ctx, b.writer, d, "")
	require.NoError(t, err)
	conflicting := d
	conflicting.Action = "device.changed"
	_, err = b.app.RecordAuditEvents(ctx, b.writer, app.RecordAuditEventsInput{Events: []domain.AuditEventDraft{
		draft("p2", "device.registered"), draft("p1", "device.a"), conflicting,
	}})
	requireCode(t, err, app.CodeIdempotencyConflict)
	require.Equal(t, 1, countEvents(t, b.pool))

	// A good batch spanning projects keeps input order and per-project
	// sequences, and a repeated id within the batch is one event.
	dup := withID(draft("p2", "device.dup"))
	events, err := b.app.RecordAuditEvents(ctx, b.writer, app.RecordAuditEventsInput{Events: []domain.AuditEventDraft{
		draft("p2", "device.a"), draft("p1", "device.b"), dup, draft("p1", "device.c"), dup,
	}})
	require.NoError(t, err)
	seqs := []uint64{}
	for _, e := range events {
		seqs = append(seqs, e.Sequence)
	}
	require.Equal(t, []uint64{1, 2, 2, 3, 2}, seqs)
	require.Equal(t, events[2].ID, events[4].ID)
	require.Equal(t, 5, countEvents(t, b.pool))

	// Limits of the batch itself.
	_, err = b.app.RecordAuditEvents(ctx, b.writer, app.RecordAuditEventsInput{})
	requireCode(t, err, app.CodeBadUserInput)
	_, err = b.app.RecordAuditEvents(ctx, b.writer, app.RecordAuditEventsInput{Events: make([]domain.AuditEventDraft, app.MaxRecordBatch+1)})
	requireCode(t, err, app.CodeBadUserInput)
	// The same id twice in one batch with different content.
	other := dup
	other.Action = "device.changed"
	_, err = b.app.RecordAuditEvents(ctx, b.writer, app.RecordAuditEventsInput{Events: []domain.AuditEventDraft{dup, other}})
	requireCode(t, err, app.CodeIdempotencyConflict)
}

func TestRecordAuditEventsIdempotencyKey(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	in := app.RecordAuditEventsInput{IdempotencyKey: "batch-1", Events: []domain.AuditEventDraft{
		draft("p1", "device.a"), draft("p1", "device.b"),
	}}
	first, err := b.app.RecordAuditEvents(ctx, b.writer, in)
	require.NoError(t, err)
	// Events without ids would be appended again; the key replays instead.
	second, err := b.app.RecordAuditEvents(ctx, b.writer, in)
	require.NoError(t, err)
	require.Equal(t, first[0].ID, second[0].ID)
	require.Equal(t, first[1].Sequence, second[1].Sequence)
	require.Equal(t, 2, countEvents(t, b.pool))

	in.Events = []domain.AuditEventDraft{draft("p1", "device.other")}
	_, err = b.app.RecordAuditEvents(ctx, b.writer, in)
	requireCode(t, err, app.CodeIdempotencyConflict)
	require.Equal(t, 2, countEvents(t, b.pool))

	// Keys are per tenant.
	otherTenant := b.writer
	otherTenant.TenantID = "t2"
	_, err = b.app.RecordAuditEvents(ctx, otherTenant, in)
	require.NoError(t, err)
}

func TestRecordAuditEventsAuthorization(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	_, err := b.app.RecordAuditEvent(ctx, b.reader, draft("p1", "device.a"), "")
	requireCode(t, err, app.CodeForbidden)
	_, err = b.app.RecordAuditEvent(ctx, b.writer, draft("p3", "device.a"), "")
	requireCode(t, err, app.CodeNotFound)
	_, err = b.app.RecordAuditEvent(ctx, app.Identity{}, draft("p1", "device.a"), "")
	requireCode(t, err, app.CodeUnauthenticated)
	require.Equal(t, 0, countEvents(t, b.pool))
}

func TestAuditEventsAreAppendOnly(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	_, err := b.app.RecordAuditEvent(ctx, b.writer, draft("p1", "device.a"), "")
	require.NoError(t, err)
	for _, sql := range []string{
		"UPDATE audit_events SET action = 'device.x'",
		"DELETE FROM audit_events",
		"TRUNCATE audit_events",
	} {
		_, err := b.pool.Exec(ctx, sql)
		require.ErrorContains(t, err, "append-only", sql)
	}
	require.Equal(t, 1, countEvents(t, b.pool))
}

func TestGetAuditEventScoping(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	e, err := b.app.RecordAuditEvent(ctx, b.writer, draft("p1", "device.a"), "")
	require.NoError(t, err)

	otherTenant := b.reader
	otherTenant.TenantID = "t2"
	_, err = b.app.GetAuditEvent(ctx, otherTenant, "p1", e.ID.String())
	require.ErrorIs(t, err, app.ErrEventNotFound)
	_, missing := b.app.GetAuditEvent(ctx, b.reader, "p1", uuid.NewString())
	require.Equal(t, missing, err, "another tenant's event looks exactly like a missing one")

	_, err = b.app.GetAuditEvent(ctx, b.reader, "p2", e.ID.String())
	require.ErrorIs(t, err, app.ErrEventNotFound, "the event is not in p2")
	onlyP2 := b.reader
	onlyP2.ProjectIDs = []string{"p2"}
	_, err = b.app.GetAuditEvent(ctx, onlyP2, "p1", e.ID.String())
	requireCode(t, err, app.CodeNotFound)
	_, err = b.app.GetAuditEvent(ctx, b.writer, "p1", e.ID.String())
	requireCode(t, err, app.CodeForbidden)
	_, err = b.app.GetAuditEvent(ctx, b.reader, "p1", "not-a-uuid")
	requireCode(t, err, app.CodeNotFound)
}
