package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/jobargs"
)

func TestRequestDataExport(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	// nothingCreated checks that no export, audit event or job exists.
	nothingCreated := func(t *testing.T, b *exportBundle) {
		t.Helper()
		require.Zero(t, countRows(t, b.pool, "data_exports"))
		require.Zero(t, countRows(t, b.pool, "audit_events"))
		require.Empty(t, jobsAfter[jobargs.DataExportJobArgs](t, b.pool, 0))
	}

	t.Run("ConfirmationRequired", func(t *testing.T) {
		t.Parallel()
		b := setupExports(t, app.ExportConfig{})
		_, err := b.app.RequestDataExport(ctx, b.user, exportInput(func(in *app.RequestDataExportInput) { in.Confirm = false }))
		requireCode(t, err, app.CodeConfirmationRequired)
		require.Equal(t, "confirm", app.ErrorOf(err).Field)
		nothingCreated(t, b)
	})

	t.Run("CreatesTheExportItsEventAndItsJobTogether", func(t *testing.T) {
		t.Parallel()
		b := setupExports(t, app.ExportConfig{})
		berlin := time.FixedZone("CET", 3600)
		from := time.Date(2026, 11, 1, 9, 0, 0, 123456789, berlin)
		e := b.request(t, func(in *app.RequestDataExportInput) {
			in.From, in.To = from, from.Add(24*time.Hour)
			in.Format, in.Compression = domain.DataExportCSV, domain.DataExportGzip
		})
		require.Equal(t, domain.DataExportQueued, e.State)
		require.Equal(t, time.Date(2026, 11, 1, 8, 0, 0, 123456000, time.UTC), e.From, "UTC, to the microsecond")
		require.Equal(t, e.From.Add(24*time.Hour), e.To)
		require.Equal(t, b.clock.Now(), e.RequestedAt)
		require.Equal(t, "auditor", e.RequestedBy)
		require.Equal(t, e, b.get(t, e))

		events := auditEvents(t, b.app, b.user, "p1", "export.*")
		require.Len(t, events, 1)
		require.Equal(t, "export.requested", events[0].Action)
		require.Equal(t, domain.Resource{Type: "data_export", ID: e.ID.String()}, events[0].Resource)
		require.Equal(t, &domain.Governance{Risk: domain.RiskHigh, Reason: "data export requested with explicit confirmation",
			ConfirmedBy: "auditor"}, events[0].Governance)
		require.JSONEq(t, fmt.Sprintf(`{"exportId":%q,"kind":"AUDIT","format":"CSV","compression":"GZIP",
			"from":"2026-11-01T08:00:00.123456Z","to":"2026-11-02T08:00:00.123456Z","confirmed":true}`, e.ID), string(events[0].Details))

		jobs := jobsAfter[jobargs.DataExportJobArgs](t, b.pool, 0)
		require.Len(t, jobs, 1)
		require.Equal(t, jobargs.DataExportJobArgs{TenantID: "t1", ExportID: e.ID}, jobs[0].Args)
		require.Equal(t, jobargs.QueueExports, jobs[0].Queue)
		require.Equal(t, 10, jobs[0].MaxAttempts)
	})

	t.Run("BadInput", func(t *testing.T) {
		t.Parallel()
		b := setupExports(t, app.ExportConfig{MaxRange: 2 * time.Hour})
		for _, tc := range []struct {
			field  string
			change func(*app.RequestDataExportInput)
		}{
			{"kind", func(in *app.RequestDataExportInput) { in.Kind = "EVERYTHING" }},
			{"format", func(in *app.RequestDataExportInput) { in.Format = "XML" }},
			{"compression", func(in *app.RequestDataExportInput) { in.Compression = "ZSTD" }},
			{"to", func(in *app.RequestDataExportInput) { in.To = in.From }},
			{"to", func(in *app.RequestDataExportInput) { in.To = in.From.Add(2*time.Hour + time.Microsecond) }},
			{"idempotencyKey", func(in *app.RequestDataExportInput) { in.IdempotencyKey = strings.Repeat("k", 256) }},
		} {
			_, err := b.app.RequestDataExport(ctx, b.user, exportInput(tc.change))
			requireCode(t, err, app.CodeBadUserInput)
			require.Equal(t, tc.field, app.ErrorOf(err).Field)
		}
		nothingCreated(t, b)
		_, err := b.app.RequestDataExport(ctx, b.user, exportInput(func(in *app.RequestDataExportInput) { in.To = in.From.Add(2 * time.Hour) }))
		require.NoError(t, err, "a range of exactly the limit")
	})

	t.Run("IdempotencyKey", func(t *testing.T) {
		t.Parallel()
		b := setupExports(t, app.ExportConfig{})
		keyed := exportInput(func(in *app.RequestDataExportInput) { in.IdempotencyKey = "plant-1-november" })
		first := b.request(t, func(in *app.RequestDataExportInput) { *in = keyed })
		require.NoError(t, runExport(ctx, b.app, first, 1, nil))

		// The same instants written in another zone are the same request.
		same := keyed
		same.From, same.To = keyed.From.In(time.FixedZone("X", -5*3600)), keyed.To.In(time.FixedZone("X", -5*3600))
		again, err := b.app.RequestDataExport(ctx, b.user, same)
		require.NoError(t, err)
		require.Equal(t, first.ID, again.ID)
		require.Equal(t, domain.DataExportReady, again.State, "the first export in its current state")

		for name, change := range map[string]func(*app.RequestDataExportInput){
			"project":     func(in *app.RequestDataExportInput) { in.ProjectID = "p2" },
			"kind":        func(in *app.RequestDataExportInput) { in.Kind = domain.DataExportAlarm },
			"range":       func(in *app.RequestDataExportInput) { in.To = in.To.Add(time.Second) },
			"format":      func(in *app.RequestDataExportInput) { in.Format = domain.DataExportCSV },
			"compression": func(in *app.RequestDataExportInput) { in.Compression = domain.DataExportGzip },
		} {
			other := keyed
			change(&other)
			_, err := b.app.RequestDataExport(ctx, b.user, other)
			requireCode(t, err, app.CodeIdempotencyConflict)
			require.Equal(t, "idempotencyKey", app.ErrorOf(err).Field, name)
		}
		require.Equal(t, 1, countRows(t, b.pool, "data_exports"))
		require.Len(t, auditEvents(t, b.app, b.user, "p1", "export.requested"), 1, "a repeat is not audited again")
		require.Len(t, jobsAfter[jobargs.DataExportJobArgs](t, b.pool, 0), 1)

		theirs, err := b.app.RequestDataExport(ctx, inTenant(b.user, "t2"), keyed)
		require.NoError(t, err)
		require.NotEqual(t, first.ID, theirs.ID, "keys are scoped to the tenant")
	})

	t.Run("QuotaOfActiveExportsPerTenant", func(t *testing.T) {
		t.Parallel()
		b := setupExports(t, app.ExportConfig{MaxActive: 2})
		queued := b.request(t, nil)
		b.request(t, func(in *app.RequestDataExportInput) { in.ProjectID = "p2" })
		_, err := b.app.RequestDataExport(ctx, b.user, exportInput(nil))
		requireCode(t, err, app.CodeQuotaExceeded)
		require.Equal(t, 2, countRows(t, b.pool, "data_exports"))
		require.Len(t, jobsAfter[jobargs.DataExportJobArgs](t, b.pool, 0), 2)
		require.Len(t, auditEvents(t, b.app, b.user, "p1", "export.requested"), 1)

		_, err = b.app.RequestDataExport(ctx, inTenant(b.user, "t2"), exportInput(nil))
		require.NoError(t, err, "the quota is per tenant")

		require.NoError(t, runExport(ctx, b.app, queued, 1, nil))
		b.request(t, nil) // READY exports do not count
	})

	t.Run("Authorization", func(t *testing.T) {
		t.Parallel()
		b := setupExports(t, app.ExportConfig{})
		reader := withPermissions(b.user, app.PermissionExportsRead, app.PermissionExportsDownload)
		_, err := b.app.RequestDataExport(ctx, reader, exportInput(nil))
		requireCode(t, err, app.CodeForbidden)
		_, err = b.app.RequestDataExport(ctx, b.user, exportInput(func(in *app.RequestDataExportInput) { in.ProjectID = "p3" }))
		require.Equal(t, app.ErrProjectNotFound, err)
		nothingCreated(t, b)
	})
}

func TestDataExportQueries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("ListsNewestFirstWithinTheScope", func(t *testing.T) {
		t.Parallel()
		b := setupExports(t, app.ExportConfig{})
		audit := b.ready(t, nil)
		alarm := b.request(t, func(in *app.RequestDataExportInput) { in.Kind = domain.DataExportAlarm })
		b.request(t, func(in *app.RequestDataExportInput) { in.ProjectID = "p2" })

		list := func(in app.DataExportsInput) app.Page[domain.DataExport] {
			t.Helper()
			in.ProjectID = "p1"
			page, err := b.app.DataExports(ctx, b.user, in)
			require.NoError(t, err)
			return page
		}
		require.Equal(t, []domain.DataExport{alarm, audit}, list(app.DataExportsInput{}).Items)
		require.Equal(t, []domain.DataExport{audit}, list(app.DataExportsInput{Filter: domain.DataExportFilter{State: domain.DataExportReady}}).Items)
		require.Equal(t, []domain.DataExport{alarm}, list(app.DataExportsInput{Filter: domain.DataExportFilter{Kind: domain.DataExportAlarm}}).Items)
		one := 1
		page := list(app.DataExportsInput{First: &one})
		require.Equal(t, []domain.DataExport{alarm}, page.Items)
		require.True(t, page.HasNextPage)
		page = list(app.DataExportsInput{First: &one, After: app.IDCursor(alarm.ID)})
		require.Equal(t, []domain.DataExport{audit}, page.Items)
		require.False(t, page.HasNextPage)

		for field, in := range map[string]app.DataExportsInput{
			"filter.state": {Filter: domain.DataExportFilter{State: "DONE"}},
			"filter.kind":  {Filter: domain.DataExportFilter{Kind: "LOGS"}},
			"after":        {After: "?"},
		} {
			in.ProjectID = "p1"
			_, err := b.app.DataExports(ctx, b.user, in)
			requireCode(t, err, app.CodeBadUserInput)
			require.Equal(t, field, app.ErrorOf(err).Field)
		}

		requireHidden(t, b.user, app.ErrDataExportNotFound, audit.ID.String(), func(who app.Identity, id string) error {
			_, err := b.app.DataExport(ctx, who, id)
			return err
		})
		page, err := b.app.DataExports(ctx, inTenant(b.user, "t2"), app.DataExportsInput{ProjectID: "p1"})
		require.NoError(t, err)
		require.Empty(t, page.Items)
	})
}

func TestExpireDataExport(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("AQueuedExportExpiresAndNeverRuns", func(t *testing.T) {
		t.Parallel()
		b := setupExports(t, app.ExportConfig{})
		e := b.request(t, nil)
		_, err := b.app.ExpireDataExport(ctx, b.user, e.ID.String(), false)
		requireCode(t, err, app.CodeConfirmationRequired)
		require.Equal(t, domain.DataExportQueued, b.get(t, e).State)

		b.clock.Add(time.Minute)
		expired, err := b.app.ExpireDataExport(ctx, b.user, e.ID.String(), true)
		require.NoError(t, err)
		require.Equal(t, domain.DataExportExpired, expired.State)
		require.Equal(t, b.clock.Now(), *expired.ExpiredAt)
		require.Equal(t, expired, b.get(t, e))
		events := auditEvents(t, b.app, b.user, "p1", "export.expired")
		require.Len(t, events, 1)
		require.Equal(t, domain.Subject{Type: domain.SubjectUser, ID: "auditor"}, events[0].Subject)
		require.JSONEq(t, fmt.Sprintf(`{"exportId":%q,"objectRef":"","reason":"expired early on request"}`, e.ID), string(events[0].Details))
		require.Empty(t, jobsAfter[jobargs.DeleteExportObjectArgs](t, b.pool, 0), "no object to delete")

		completed := 0
		require.NoError(t, runExport(ctx, b.app, e, 1, counting(&completed)), "its job finds it expired")
		require.Equal(t, domain.DataExportExpired, b.get(t, e).State)
		require.Empty(t, b.objects(t))

		_, err = b.app.ExpireDataExport(ctx, b.user, e.ID.String(), true)
		requireCode(t, err, app.CodeInvalidState)
		require.Contains(t, app.ErrorOf(err).Message, "EXPIRED")
	})

	t.Run("AReadyExportExpiresThenItsObjectIsDeleted", func(t *testing.T) {
		t.Parallel()
		b := setupExports(t, app.ExportConfig{})
		e := b.ready(t, nil)
		link, err := b.app.CreateDataExportDownload(ctx, b.user, e.ID.String(), nil)
		require.NoError(t, err)
		expired, err := b.app.ExpireDataExport(ctx, b.user, e.ID.String(), true)
		require.NoError(t, err)
		require.Equal(t, e.ObjectRef, expired.ObjectRef, "the record keeps its fields")
		require.Equal(t, e.ContentDigest, expired.ContentDigest)

		jobs := jobsAfter[jobargs.DeleteExportObjectArgs](t, b.pool, 0)
		require.Len(t, jobs, 1)
		require.Equal(t, e.ObjectRef, jobs[0].Args.ObjectRef)
		require.Equal(t, []string{e.ObjectRef}, b.objects(t), "deleted after the state changed, never before")
		_, err = b.app.OpenDataExportDownload(ctx, link.Token)
		require.Equal(t, app.ErrDownloadGone, err, "an earlier link answers gone")
		_, err = b.app.CreateDataExportDownload(ctx, b.user, e.ID.String(), nil)
		requireCode(t, err, app.CodeInvalidState)

		require.NoError(t, b.app.DeleteExportObject(ctx, jobs[0].Args.ObjectRef))
		require.Empty(t, b.objects(t))
		require.NoError(t, b.app.DeleteExportObject(ctx, jobs[0].Args.ObjectRef), "an object already gone is fine")
	})

	t.Run("ARunningExportCannotExpire", func(t *testing.T) {
		t.Parallel()
		b := setupExports(t, app.ExportConfig{})
		e := b.request(t, nil)
		require.Error(t, runExport(ctx, b.brokenStorage(t), e, 1, nil), "a run that failed and will be retried")
		require.Equal(t, domain.DataExportRunning, b.get(t, e).State)
		_, err := b.app.ExpireDataExport(ctx, b.user, e.ID.String(), true)
		requireCode(t, err, app.CodeInvalidState)
		require.Contains(t, app.ErrorOf(err).Message, "RUNNING")
		require.Empty(t, auditEvents(t, b.app, b.user, "p1", "export.expired"))
	})

	t.Run("HiddenExportsLookMissing", func(t *testing.T) {
		t.Parallel()
		b := setupExports(t, app.ExportConfig{})
		e := b.request(t, nil)
		requireHidden(t, b.user, app.ErrDataExportNotFound, e.ID.String(), func(who app.Identity, id string) error {
			_, err := b.app.ExpireDataExport(ctx, who, id, true)
			return err
		})
		_, err := b.app.ExpireDataExport(ctx, withPermissions(b.user, app.PermissionExportsRead), e.ID.String(), true)
		requireCode(t, err, app.CodeForbidden)
		require.Equal(t, domain.DataExportQueued, b.get(t, e).State)
	})
}

func TestExpireDueDataExports(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("ReadyAndFailedExportsExpireAfterTheirTTL", func(t *testing.T) {
		t.Parallel()
		b := setupExports(t, app.ExportConfig{TTL: time.Hour})
		for range 3 {
			_, err := b.app.RecordAuditEvent(ctx, b.svc, draft("p1", "device.reading.taken"), "")
			require.NoError(t, err)
		}
		ready := b.ready(t, nil)
		require.Equal(t, b.clock.Now().Add(time.Hour), *ready.ExpiresAt)
		failed := b.request(t, nil)
		tooSmall := b.otherApp(func(c *app.Config) { c.Exports.MaxBytes = 10 })
		require.NoError(t, runExport(ctx, tooSmall, failed, 1, nil))
		require.Equal(t, domain.DataExportFailed, b.get(t, failed).State)
		queued := b.request(t, nil)

		b.clock.Add(time.Hour - time.Microsecond)
		n, err := b.app.ExpireDueDataExports(ctx, 10)
		require.NoError(t, err)
		require.Zero(t, n, "not yet")

		b.clock.Add(time.Microsecond)
		n, err = b.app.ExpireDueDataExports(ctx, 10)
		require.NoError(t, err)
		require.Equal(t, 2, n)
		require.Equal(t, domain.DataExportExpired, b.get(t, ready).State)
		require.Equal(t, b.clock.Now(), *b.get(t, ready).ExpiredAt)
		require.Equal(t, domain.DataExportExpired, b.get(t, failed).State)
		require.NotEmpty(t, b.get(t, failed).FailureReason, "the reason stays readable")
		require.Equal(t, domain.DataExportQueued, b.get(t, queued).State, "queued exports do not expire by themselves")

		events := auditEvents(t, b.app, b.user, "p1", "export.expired")
		require.Len(t, events, 2)
		for _, e := range events {
			require.Equal(t, domain.Subject{Type: domain.SubjectSystem, ID: "system:export-expiry"}, e.Subject)
			var details map[string]any
			require.NoError(t, json.Unmarshal(e.Details, &details))
			require.Equal(t, "past its expiry", details["reason"])
		}
		deletions := jobsAfter[jobargs.DeleteExportObjectArgs](t, b.pool, 0)
		require.Len(t, deletions, 1, "only the READY export had an object")
		require.Equal(t, ready.ObjectRef, deletions[0].Args.ObjectRef)

		n, err = b.app.ExpireDueDataExports(ctx, 10)
		require.NoError(t, err)
		require.Zero(t, n)
	})
}

func TestCreateDataExportDownload(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("ALinkIsAuditedAndOpensTheObject", func(t *testing.T) {
		t.Parallel()
		b := setupExports(t, app.ExportConfig{})
		_, err := b.app.RecordAuditEvent(ctx, b.svc, draft("p1", "device.reading.taken"), "")
		require.NoError(t, err)
		e := b.ready(t, nil)
		b.clock.Add(1234 * time.Microsecond)
		link, err := b.app.CreateDataExportDownload(ctx, b.user, e.ID.String(), nil)
		require.NoError(t, err)
		want := b.clock.Now().Add(app.DefaultDownloadTTL).Truncate(time.Second).Add(time.Second)
		require.Equal(t, want, link.ExpiresAt, "the default lifetime, rounded up to a second")

		events := auditEvents(t, b.app, b.user, "p1", "export.download_created")
		require.Len(t, events, 1)
		require.Equal(t, domain.RiskMedium, events[0].Governance.Risk)
		require.JSONEq(t, fmt.Sprintf(`{"exportId":%q,"expiresAt":%q}`, e.ID, want.Format(time.RFC3339)), string(events[0].Details))

		opened, err := b.app.OpenDataExportDownload(ctx, link.Token)
		require.NoError(t, err)
		got, err := io.ReadAll(opened.Object)
		require.NoError(t, err)
		require.NoError(t, opened.Object.Close())
		stored, err := b.bucket.ReadAll(ctx, e.ObjectRef)
		require.NoError(t, err)
		require.Equal(t, stored, got)
		require.Equal(t, e, opened.Export)
		require.Len(t, auditEvents(t, b.app, b.user, "p1", "export.download_created"), 1, "fetching the link is not audited")

		altered := map[bool]string{true: "B", false: "A"}[link.Token[0] == 'A'] + link.Token[1:]
		_, err = b.app.OpenDataExportDownload(ctx, altered)
		require.Equal(t, app.ErrDownloadForbidden, err, "an altered link")
		b.clock.Set(link.ExpiresAt)
		_, err = b.app.OpenDataExportDownload(ctx, link.Token)
		require.Equal(t, app.ErrDownloadForbidden, err, "a link past its expiry")
	})

	t.Run("LifetimeBounds", func(t *testing.T) {
		t.Parallel()
		b := setupExports(t, app.ExportConfig{TTL: 30 * time.Minute})
		b.clock.Add(250 * time.Millisecond) // the export then expires inside a second
		e := b.ready(t, nil)
		for _, ttl := range []time.Duration{0, -time.Second, app.MaxDownloadTTL + time.Second} {
			_, err := b.app.CreateDataExportDownload(ctx, b.user, e.ID.String(), &ttl)
			requireCode(t, err, app.CodeBadUserInput)
			require.Equal(t, "ttlSeconds", app.ErrorOf(err).Field)
		}
		ttl := app.MaxDownloadTTL
		link, err := b.app.CreateDataExportDownload(ctx, b.user, e.ID.String(), &ttl)
		require.NoError(t, err)
		require.Equal(t, e.ExpiresAt.Truncate(time.Second), link.ExpiresAt, "never later than the export's own expiry")

		// In the export's last fraction of a second, a link (whole seconds)
		// would be dead on arrival: refused, and nothing is audited.
		require.NotEqual(t, e.ExpiresAt.Truncate(time.Second), *e.ExpiresAt, "the export expires inside a second")
		before := len(auditEvents(t, b.app, b.user, "p1", "export.download_created"))
		b.clock.Set(e.ExpiresAt.Add(-time.Microsecond))
		_, err = b.app.CreateDataExportDownload(ctx, b.user, e.ID.String(), nil)
		requireCode(t, err, app.CodeInvalidState)
		require.Len(t, auditEvents(t, b.app, b.user, "p1", "export.download_created"), before)

		b.clock.Set(*e.ExpiresAt)
		_, err = b.app.CreateDataExportDownload(ctx, b.user, e.ID.String(), nil)
		requireCode(t, err, app.CodeInvalidState)
	})

	t.Run("OnlyAVisibleReadyExport", func(t *testing.T) {
		t.Parallel()
		b := setupExports(t, app.ExportConfig{})
		queued := b.request(t, nil)
		_, err := b.app.CreateDataExportDownload(ctx, b.user, queued.ID.String(), nil)
		requireCode(t, err, app.CodeInvalidState)
		require.Contains(t, app.ErrorOf(err).Message, "QUEUED")

		require.NoError(t, runExport(ctx, b.app, queued, 1, nil))
		noDownload := withPermissions(b.user, app.PermissionExportsRead, app.PermissionExportsWrite)
		_, err = b.app.CreateDataExportDownload(ctx, noDownload, queued.ID.String(), nil)
		requireCode(t, err, app.CodeForbidden)
		requireHidden(t, b.user, app.ErrDataExportNotFound, queued.ID.String(), func(who app.Identity, id string) error {
			_, err := b.app.CreateDataExportDownload(ctx, who, id, nil)
			return err
		})
		require.Empty(t, auditEvents(t, b.app, b.user, "p1", "export.download_created"))
	})
}

// TestDeleteExpiredDataExportRows: the row of an export expired longer
// than the row retention ago is deleted; one expired more recently, and
// exports that are not EXPIRED, stay.
func TestDeleteExpiredDataExportRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupExports(t, app.ExportConfig{RowRetention: 24 * time.Hour, MaxActive: 10})
	old := b.request(t, nil)
	_, err := b.app.ExpireDataExport(ctx, b.user, old.ID.String(), true)
	require.NoError(t, err)
	b.clock.Add(20 * time.Hour)
	recent := b.request(t, func(in *app.RequestDataExportInput) { in.IdempotencyKey = "recent" })
	_, err = b.app.ExpireDataExport(ctx, b.user, recent.ID.String(), true)
	require.NoError(t, err)
	queued := b.request(t, func(in *app.RequestDataExportInput) { in.IdempotencyKey = "queued" })

	b.clock.Add(5 * time.Hour)
	n, err := b.app.DeleteExpiredDataExportRows(ctx, 10)
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	_, err = b.app.DataExport(ctx, b.user, old.ID.String())
	requireCode(t, err, app.CodeNotFound)
	require.Equal(t, domain.DataExportExpired, b.get(t, recent).State)
	require.Equal(t, domain.DataExportQueued, b.get(t, queued).State)
	require.Len(t, auditEvents(t, b.app, b.user, "p1", "export.expired"), 2, "the evidence of the expiry stays")
}
