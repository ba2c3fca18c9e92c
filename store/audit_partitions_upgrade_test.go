package store_test

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/migrations"
	"github.com/aetheriot/aether-audit/store"
)

// upgradeEvents is how many events the unpartitioned database holds before
// it is upgraded (the benchmark of docs/operations.md upgrades 2 million).
const upgradeEvents = 100_000

// upgradeAppendBound is the longest an append may wait while the
// migration runs: the strong locks of migration 00022 last a moment, the
// scan that validates the bound runs beside appends.
const upgradeAppendBound = 5 * time.Second

// TestPartitionUpgradeIsOnline builds the schema before migration 00022
// with a project of upgradeEvents events, then migrates while appends go
// on as a process of the previous release makes them (head locked, event
// inserted, head moved: the columns before 00022). It requires that the
// table is partitioned with the old rows attached in place (not copied),
// that no append failed or waited longer than upgradeAppendBound, and that
// after the upgrade the app appends to the same projects and every chain
// verifies, from the old rows through the new partitions.
func TestPartitionUpgradeIsOnline(t *testing.T) {
	pool := emptyDatabase(t)
	ctx := context.Background()
	db := stdlib.OpenDBFromPool(pool)
	t.Cleanup(func() { db.Close() })
	provider, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS)
	require.NoError(t, err)
	_, err = provider.UpTo(ctx, 21)
	require.NoError(t, err)

	// The old project: sealed as the app seals, recorded over the last
	// two months, copied in.
	start := time.Now().UTC().AddDate(0, -2, 0)
	drafts := make([]domain.AuditEventDraft, upgradeEvents)
	for i := range drafts {
		drafts[i] = domain.AuditEventDraft{ID: uuid.New(), ProjectID: "p-old", Action: "device.updated", OccurredAt: start,
			Subject: domain.Subject{Type: domain.SubjectService, ID: "svc"}, Resource: domain.Resource{Type: "device", ID: "d1"},
			Outcome: domain.OutcomeSuccess}
		require.NoError(t, drafts[i].Normalize("", start))
	}
	var head domain.ChainHead
	rows := make([][]any, 0, len(drafts))
	for i := range drafts {
		events, next := head.Append("t1", drafts[i:i+1], start.Add(time.Duration(i)*time.Second))
		events[0].InputFingerprint = drafts[i].Fingerprint()
		rows = append(rows, store.AuditEventRow(&events[0]))
		head = next
	}
	_, err = pool.CopyFrom(ctx, pgx.Identifier{"audit_events"}, store.AuditEventColumns(), pgx.CopyFromRows(rows))
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO audit_project_heads (tenant_id, project_id, last_sequence, last_hash) VALUES ('t1', 'p-old', $1, $2)`,
		int64(head.Sequence), head.Hash[:])
	require.NoError(t, err)

	// Appends of the previous release, to the old project and a new one,
	// until the migration is done and a few more after.
	var (
		stop     atomic.Bool
		slowest  atomic.Int64
		appended atomic.Int64
		wg       sync.WaitGroup
		errs     = make([]error, 2)
	)
	for i, project := range []string{"p-old", "p-live"} {
		wg.Go(func() {
			for !stop.Load() {
				began := time.Now()
				if err := appendAsBefore(ctx, pool, project); err != nil {
					errs[i] = err
					return
				}
				if d := time.Since(began); d > time.Duration(slowest.Load()) {
					slowest.Store(int64(d))
				}
				appended.Add(1)
			}
		})
	}
	require.Eventually(t, func() bool { return appended.Load() > 10 }, 10*time.Second, 5*time.Millisecond)
	began := time.Now()
	require.NoError(t, store.Migrate(ctx, pool, slog.New(slog.NewTextHandler(io.Discard, nil))))
	took := time.Since(began)
	during := appended.Load()
	require.Eventually(t, func() bool { return appended.Load() > during+10 }, 10*time.Second, 5*time.Millisecond)
	stop.Store(true)
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	t.Logf("migrated %d events in %s; %d appends, the slowest %s", upgradeEvents, took, appended.Load(), time.Duration(slowest.Load()))
	require.Less(t, time.Duration(slowest.Load()), upgradeAppendBound)

	var kind string
	var legacy int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT relkind::text FROM pg_class WHERE oid = 'audit_events'::regclass`).Scan(&kind))
	require.Equal(t, "p", kind)
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM audit_events_legacy WHERE project_id = 'p-old'`).Scan(&legacy))
	require.GreaterOrEqual(t, legacy, int64(upgradeEvents), "the old rows stay where they were")

	// The new release appends to both projects (into this month's legacy
	// partition and, from next month, the monthly ones), and every chain
	// verifies end to end.
	st := store.New(pool)
	next := time.Now().UTC().AddDate(0, 1, 0)
	for _, at := range []time.Time{time.Now(), time.Date(next.Year(), next.Month(), 2, 0, 0, 0, 0, time.UTC)} {
		a := app.New(st, app.Config{Now: func() time.Time { return at }})
		writer := app.Identity{Subject: "svc", TenantID: "t1", ProjectIDs: []string{app.AllProjects}, Permissions: []app.Permission{app.PermissionAuditWrite}}
		for _, p := range []string{"p-old", "p-live"} {
			d := drafts[0]
			d.ID, d.ProjectID = uuid.Nil, p
			_, err := a.RecordAuditEvent(ctx, writer, d, "")
			require.NoError(t, err)
		}
	}
	reader := app.Identity{Subject: "dash", TenantID: "t1", ProjectIDs: []string{app.AllProjects}, Permissions: []app.Permission{app.PermissionAuditRead}}
	for _, p := range []string{"p-old", "p-live"} {
		// Resumed where a call stops at its time budget (a loaded machine).
		in := app.VerifyAuditChainInput{ProjectID: p}
		for {
			v, err := app.New(st, app.Config{}).VerifyAuditChainResumable(ctx, reader, in)
			require.NoError(t, err)
			if !v.Complete && v.ResumeToken != nil {
				in = app.VerifyAuditChainInput{ProjectID: p, ResumeToken: *v.ResumeToken}
				continue
			}
			require.True(t, v.Valid, "%s: %+v", p, v)
			break
		}
	}
}

// appendAsBefore appends one event to t1/project as the store did before
// migration 00022: the head locked, the event inserted, the head moved.
func appendAsBefore(ctx context.Context, pool *pgxpool.Pool, project string) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO audit_project_heads (tenant_id, project_id) VALUES ('t1', $1) ON CONFLICT DO NOTHING`, project); err != nil {
			return err
		}
		var head domain.ChainHead
		var seq int64
		var hash []byte
		if err := tx.QueryRow(ctx, `SELECT last_sequence, last_hash FROM audit_project_heads
			WHERE tenant_id = 't1' AND project_id = $1 FOR UPDATE`, project).Scan(&seq, &hash); err != nil {
			return err
		}
		head.Sequence = uint64(seq)
		copy(head.Hash[:], hash)
		now := time.Now()
		d := domain.AuditEventDraft{ID: uuid.New(), ProjectID: project, Action: "device.updated", OccurredAt: now,
			Subject: domain.Subject{Type: domain.SubjectService, ID: "svc"}, Resource: domain.Resource{Type: "device", ID: "d1"},
			Outcome: domain.OutcomeSuccess}
		if err := d.Normalize("", now); err != nil {
			return err
		}
		events, next := head.Append("t1", []domain.AuditEventDraft{d}, now)
		events[0].InputFingerprint = d.Fingerprint()
		cols := store.AuditEventColumns()
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"audit_events"}, cols, pgx.CopyFromRows([][]any{store.AuditEventRow(&events[0])})); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE audit_project_heads SET last_sequence = $2, last_hash = $3 WHERE tenant_id = 't1' AND project_id = $1`,
			project, int64(next.Sequence), next.Hash[:])
		return err
	})
}
