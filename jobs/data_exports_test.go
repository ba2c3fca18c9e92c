package jobs_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/export"
	"github.com/aetheriot/aether-audit/jobargs"
	"github.com/aetheriot/aether-audit/jobs"
	"github.com/aetheriot/aether-audit/store"
	"github.com/aetheriot/aether-audit/store/storetest"
)

// exportBundle is an export test's world: the app over a file bucket in a
// temporary directory, optionally with River running every worker.
type exportBundle struct {
	app  *app.App
	pool *pgxpool.Pool
	dir  string
	cfg  app.ExportConfig
	user app.Identity
	svc  app.Identity
}

func setupExports(t *testing.T, cfg app.ExportConfig, workers bool) *exportBundle {
	t.Helper()
	pool := storetest.NewPool(t)
	dir := t.TempDir()
	bucket, err := export.OpenBucket(context.Background(), "file://"+dir)
	require.NoError(t, err)
	t.Cleanup(func() { _ = bucket.Close() })
	cfg.Bucket = bucket
	cfg.DownloadKey = bytes.Repeat([]byte{7}, 32)
	b := &exportBundle{
		app: app.New(store.New(pool), app.Config{Exports: cfg}), pool: pool, dir: dir, cfg: cfg,
		user: app.Identity{Subject: "auditor", TenantID: "t1", ProjectIDs: []string{"p1"}, Permissions: []app.Permission{
			app.PermissionExportsRead, app.PermissionExportsWrite, app.PermissionExportsDownload, app.PermissionAuditRead}},
		svc: app.Identity{Subject: "svc", TenantID: "t1", ProjectIDs: []string{"p1"}, Permissions: []app.Permission{
			app.PermissionAuditWrite, app.PermissionHistoryWrite}},
	}
	if workers {
		client, err := jobs.NewClient(pool, store.New(pool), jobs.ClientConfig{App: b.app, FetchCooldown: 10 * time.Millisecond,
			ExpiryInterval: 200 * time.Millisecond})
		require.NoError(t, err)
		require.NoError(t, client.Start(context.Background()))
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = client.Stop(ctx)
		})
	}
	return b
}

var exportDay = time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)

// seedHistory records n audit events, alarm records and telemetry points
// of p1 on exportDay.
func (b *exportBundle) seedHistory(t *testing.T, n int) {
	t.Helper()
	ctx := context.Background()
	for start := 0; start < n; start += 1000 {
		var drafts []domain.AuditEventDraft
		var alarms []domain.AlarmRecord
		var points []domain.TelemetryPoint
		for i := start; i < min(n, start+1000); i++ {
			at := exportDay.Add(time.Duration(i) * time.Second)
			drafts = append(drafts, domain.AuditEventDraft{ProjectID: "p1", Action: "device.reading.taken", OccurredAt: at,
				Subject: domain.Subject{Type: domain.SubjectService, ID: "meter"}, Resource: domain.Resource{Type: "device", ID: fmt.Sprintf("d%d", i%7)},
				Outcome: domain.OutcomeSuccess, Details: json.RawMessage(fmt.Sprintf(`{"i":%d,"note":"comma, \"quote\"\nline"}`, i))})
			alarms = append(alarms, domain.AlarmRecord{OccurredAt: at, AlarmID: fmt.Sprintf("a%d", i), DeviceID: "d1",
				Severity: domain.AlarmMajor, State: domain.AlarmRaised, Message: "temperature high"})
			points = append(points, domain.TelemetryPoint{DeviceID: "d1", Metric: "temp", OccurredAt: at, Value: 20.5 + float64(i), Unit: "C"})
		}
		_, err := b.app.RecordAuditEvents(ctx, b.svc, app.RecordAuditEventsInput{Events: drafts})
		require.NoError(t, err)
		_, err = b.app.AppendAlarmHistory(ctx, b.svc, "p1", alarms)
		require.NoError(t, err)
		_, err = b.app.AppendTelemetryHistory(ctx, b.svc, "p1", points)
		require.NoError(t, err)
	}
}

func (b *exportBundle) request(t *testing.T, kind domain.DataExportKind, format domain.DataExportFormat, c domain.DataExportCompression) domain.DataExport {
	t.Helper()
	e, err := b.app.RequestDataExport(context.Background(), b.user, app.RequestDataExportInput{ProjectID: "p1", Kind: kind,
		From: exportDay, To: exportDay.Add(24 * time.Hour), Format: format, Compression: c, Confirm: true})
	require.NoError(t, err)
	require.Equal(t, domain.DataExportQueued, e.State)
	return e
}

func (b *exportBundle) await(t *testing.T, id uuid.UUID, state domain.DataExportState) domain.DataExport {
	t.Helper()
	var e domain.DataExport
	require.Eventually(t, func() bool {
		var err error
		e, err = b.app.DataExport(context.Background(), b.user, id.String())
		require.NoError(t, err)
		return e.State == state
	}, 60*time.Second, 20*time.Millisecond, "export never reached %s", state)
	return e
}

// object reads a READY export's object straight from the bucket's
// directory and checks its digest and length independently.
func (b *exportBundle) object(t *testing.T, e domain.DataExport) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(b.dir, filepath.FromSlash(e.ObjectRef)))
	require.NoError(t, err)
	sum := sha256.Sum256(raw)
	require.Equal(t, "sha256:"+hex.EncodeToString(sum[:]), e.ContentDigest)
	require.Equal(t, uint64(len(raw)), e.ByteLength)
	if e.Compression == domain.DataExportGzip {
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		require.NoError(t, err)
		raw, err = io.ReadAll(zr)
		require.NoError(t, err)
	}
	return raw
}

func TestDataExportLifecyclePerKindAndFormat(t *testing.T) {
	b := setupExports(t, app.ExportConfig{MaxActive: 10}, true)
	const n = 1500
	b.seedHistory(t, n)
	for _, tc := range []struct {
		kind   domain.DataExportKind
		format domain.DataExportFormat
		comp   domain.DataExportCompression
	}{
		{domain.DataExportAudit, domain.DataExportNDJSON, domain.DataExportUncompressed},
		{domain.DataExportAudit, domain.DataExportCSV, domain.DataExportGzip},
		{domain.DataExportAlarm, domain.DataExportNDJSON, domain.DataExportGzip},
		{domain.DataExportAlarm, domain.DataExportCSV, domain.DataExportUncompressed},
		{domain.DataExportTelemetry, domain.DataExportNDJSON, domain.DataExportUncompressed},
		{domain.DataExportTelemetry, domain.DataExportCSV, domain.DataExportGzip},
	} {
		t.Run(fmt.Sprintf("%s-%s-%s", tc.kind, tc.format, tc.comp), func(t *testing.T) {
			e := b.request(t, tc.kind, tc.format, tc.comp)
			e = b.await(t, e.ID, domain.DataExportReady)
			require.EqualValues(t, n, e.RowCount)
			require.NotNil(t, e.ExpiresAt)
			require.WithinDuration(t, e.ReadyAt.Add(app.DefaultExportTTL), *e.ExpiresAt, time.Second)
			require.True(t, strings.HasPrefix(e.ObjectRef, "exports/t1/p1/"+e.ID.String()), e.ObjectRef)
			body := b.object(t, e)
			switch tc.format {
			case domain.DataExportNDJSON:
				sc := bufio.NewScanner(bytes.NewReader(body))
				sc.Buffer(nil, 1<<20)
				lines := 0
				var prev time.Time
				for sc.Scan() {
					var row struct {
						OccurredAt time.Time `json:"occurredAt"`
					}
					require.NoError(t, json.Unmarshal(sc.Bytes(), &row))
					require.False(t, row.OccurredAt.Before(prev), "rows in time order")
					prev = row.OccurredAt
					lines++
				}
				require.Equal(t, n, lines)
			case domain.DataExportCSV:
				records, err := csv.NewReader(bytes.NewReader(body)).ReadAll()
				require.NoError(t, err)
				require.Len(t, records, n+1, "a header and one record per row")
			}
		})
	}

	events, err := b.app.SearchAuditEvents(context.Background(), b.user, app.SearchAuditEventsInput{ProjectID: "p1",
		Filter: app.AuditEventFilterInput{Action: "export.requested"}})
	require.NoError(t, err)
	require.Len(t, events.Edges, 6)
	gov := events.Edges[0].Event.Governance
	require.NotNil(t, gov)
	require.Equal(t, domain.RiskHigh, gov.Risk)
	require.Equal(t, "auditor", gov.ConfirmedBy, "the confirmation is recorded")
}

func TestDataExportRequestRules(t *testing.T) {
	b := setupExports(t, app.ExportConfig{MaxActive: 1}, false)
	ctx := context.Background()
	in := app.RequestDataExportInput{ProjectID: "p1", Kind: domain.DataExportAudit, From: exportDay, To: exportDay.Add(time.Hour),
		Format: domain.DataExportNDJSON, Compression: domain.DataExportUncompressed}
	_, err := b.app.RequestDataExport(ctx, b.user, in)
	require.Equal(t, app.CodeConfirmationRequired, app.ErrorOf(err).Code)
	var n int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM data_exports`).Scan(&n))
	require.Zero(t, n, "nothing is created without confirmation")

	in.Confirm = true
	bad := in
	bad.To = bad.From
	_, err = b.app.RequestDataExport(ctx, b.user, bad)
	require.Equal(t, app.CodeBadUserInput, app.ErrorOf(err).Code)
	bad.To = bad.From.Add(32 * 24 * time.Hour)
	_, err = b.app.RequestDataExport(ctx, b.user, bad)
	require.Equal(t, app.CodeBadUserInput, app.ErrorOf(err).Code, "at most 31 days")

	in.IdempotencyKey = "k1"
	first, err := b.app.RequestDataExport(ctx, b.user, in)
	require.NoError(t, err)
	again, err := b.app.RequestDataExport(ctx, b.user, in)
	require.NoError(t, err)
	require.Equal(t, first.ID, again.ID, "an idempotent repeat is not counted against the quota")
	in.IdempotencyKey = ""
	_, err = b.app.RequestDataExport(ctx, b.user, in)
	require.Equal(t, app.CodeQuotaExceeded, app.ErrorOf(err).Code, "one active export per tenant here")

	_, err = b.app.ExpireDataExport(ctx, b.user, first.ID.String(), false)
	require.Equal(t, app.CodeConfirmationRequired, app.ErrorOf(err).Code)
	expired, err := b.app.ExpireDataExport(ctx, b.user, first.ID.String(), true)
	require.NoError(t, err)
	require.Equal(t, domain.DataExportExpired, expired.State, "a queued export can expire")
	_, err = b.app.RequestDataExport(ctx, b.user, in)
	require.NoError(t, err, "the quota frees up")
	_, err = b.app.ExpireDataExport(ctx, b.user, first.ID.String(), true)
	require.Equal(t, app.CodeInvalidState, app.ErrorOf(err).Code)
}

func TestDataExportSizeBoundFailsWithReasonAndNoObject(t *testing.T) {
	b := setupExports(t, app.ExportConfig{MaxBytes: 10_000}, true)
	b.seedHistory(t, 200)
	e := b.request(t, domain.DataExportAudit, domain.DataExportNDJSON, domain.DataExportUncompressed)
	e = b.await(t, e.ID, domain.DataExportFailed)
	require.Contains(t, e.FailureReason, "10000 bytes")
	require.Empty(t, e.ObjectRef)
	requireNoObjects(t, b.dir)
}

func requireNoObjects(t *testing.T, dir string) {
	t.Helper()
	var files []string
	require.NoError(t, filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, p)
		}
		return err
	}))
	require.Empty(t, files, "no object is left behind")
}

// TestDataExportCrashMidExportLeavesNoReadyExport cancels a run while it
// streams (as a killed worker would stop): the export stays RUNNING without
// any object, and the retry writes a complete object and turns it READY.
func TestDataExportCrashMidExportLeavesNoReadyExport(t *testing.T) {
	b := setupExports(t, app.ExportConfig{}, false)
	b.seedHistory(t, 20000)
	e := b.request(t, domain.DataExportAudit, domain.DataExportNDJSON, domain.DataExportGzip)
	args := jobargs.DataExportJobArgs{TenantID: "t1", ExportID: e.ID}

	ctx, crash := context.WithCancel(context.Background())
	go func() {
		// Crash once the run has started writing.
		for ctx.Err() == nil {
			cur, err := b.app.DataExport(context.Background(), b.user, e.ID.String())
			if err == nil && cur.State == domain.DataExportRunning {
				crash()
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	err := b.app.RunDataExport(ctx, app.DataExportRun{Args: args, Attempt: 1, MaxAttempts: 3})
	require.Error(t, err)
	cur, err := b.app.DataExport(context.Background(), b.user, e.ID.String())
	require.NoError(t, err)
	require.Equal(t, domain.DataExportRunning, cur.State, "not READY, not FAILED: the retry will run it")
	require.Empty(t, cur.ObjectRef)
	requireNoObjects(t, b.dir)

	require.NoError(t, b.app.RunDataExport(context.Background(), app.DataExportRun{Args: args, Attempt: 2, MaxAttempts: 3}))
	cur, err = b.app.DataExport(context.Background(), b.user, e.ID.String())
	require.NoError(t, err)
	require.Equal(t, domain.DataExportReady, cur.State)
	require.EqualValues(t, 20000, cur.RowCount)
	b.object(t, cur)

	// A late rerun of the job of a READY export changes nothing.
	require.NoError(t, b.app.RunDataExport(context.Background(), app.DataExportRun{Args: args, Attempt: 3, MaxAttempts: 3}))
	again, err := b.app.DataExport(context.Background(), b.user, e.ID.String())
	require.NoError(t, err)
	require.Equal(t, cur.ObjectRef, again.ObjectRef)
	require.Equal(t, cur.ContentDigest, again.ContentDigest)
}

func TestDataExportExpiresAndItsObjectIsDeleted(t *testing.T) {
	b := setupExports(t, app.ExportConfig{TTL: time.Second}, true)
	b.seedHistory(t, 10)
	e := b.request(t, domain.DataExportTelemetry, domain.DataExportCSV, domain.DataExportUncompressed)
	e = b.await(t, e.ID, domain.DataExportReady)
	b.object(t, e)
	e = b.await(t, e.ID, domain.DataExportExpired)
	require.NotNil(t, e.ExpiredAt)
	require.Eventually(t, func() bool {
		_, err := os.Stat(filepath.Join(b.dir, filepath.FromSlash(e.ObjectRef)))
		return os.IsNotExist(err)
	}, 30*time.Second, 20*time.Millisecond, "the object is deleted")
	events, err := b.app.SearchAuditEvents(context.Background(), b.user, app.SearchAuditEventsInput{ProjectID: "p1",
		Filter: app.AuditEventFilterInput{Action: "export.expired"}})
	require.NoError(t, err)
	require.Len(t, events.Edges, 1)
	require.Equal(t, domain.SubjectSystem, events.Edges[0].Event.Subject.Type)
}

func TestDataExportFailedExportsExpireToo(t *testing.T) {
	b := setupExports(t, app.ExportConfig{MaxBytes: 1000, TTL: time.Second}, true)
	b.seedHistory(t, 50)
	e := b.request(t, domain.DataExportAudit, domain.DataExportCSV, domain.DataExportUncompressed)
	b.await(t, e.ID, domain.DataExportFailed)
	e = b.await(t, e.ID, domain.DataExportExpired)
	require.NotEmpty(t, e.FailureReason, "the reason stays readable")
}

// TestHistoryRefusesTextPostgreSQLCannotStore: a NUL in a text field or in
// details is the client's mistake (BAD_USER_INPUT), not a database error.
func TestHistoryRefusesTextPostgreSQLCannotStore(t *testing.T) {
	b := setupExports(t, app.ExportConfig{}, false)
	ctx := context.Background()
	ok := domain.AlarmRecord{OccurredAt: exportDay, AlarmID: "a1", DeviceID: "d1", Severity: domain.AlarmMinor, State: domain.AlarmRaised}
	for name, r := range map[string]domain.AlarmRecord{
		"nul in id":      func() domain.AlarmRecord { r := ok; r.AlarmID = "a\x00b"; return r }(),
		"nul in message": func() domain.AlarmRecord { r := ok; r.Message = "x\x00"; return r }(),
		"nul in details": func() domain.AlarmRecord { r := ok; r.Details = json.RawMessage(`{"x":"\u0000"}`); return r }(),
	} {
		_, err := b.app.AppendAlarmHistory(ctx, b.svc, "p1", []domain.AlarmRecord{r})
		require.Equal(t, app.CodeBadUserInput, app.ErrorOf(err).Code, name)
	}
	_, err := b.app.AppendTelemetryHistory(ctx, b.svc, "p1", []domain.TelemetryPoint{{DeviceID: "d1", Metric: "t\x00", OccurredAt: exportDay, Value: 1}})
	require.Equal(t, app.CodeBadUserInput, app.ErrorOf(err).Code)
	_, err = b.app.RequestDataExport(ctx, b.user, app.RequestDataExportInput{ProjectID: "p1", Kind: domain.DataExportAudit,
		From: exportDay, To: exportDay.Add(time.Hour), Format: domain.DataExportNDJSON, Compression: domain.DataExportUncompressed,
		Confirm: true, IdempotencyKey: "k\x00"})
	require.Equal(t, app.CodeBadUserInput, app.ErrorOf(err).Code)
}

// TestAlarmIdsAreUniquePerProject: an alarm id used in another project of
// the tenant neither hides this project's entry nor reveals the other.
func TestAlarmIdsAreUniquePerProject(t *testing.T) {
	b := setupExports(t, app.ExportConfig{}, false)
	ctx := context.Background()
	svc := b.svc
	svc.ProjectIDs = []string{"p1", "p2"}
	r := domain.AlarmRecord{ID: uuid.New(), OccurredAt: exportDay, AlarmID: "a1", DeviceID: "d1", Severity: domain.AlarmMinor, State: domain.AlarmRaised}
	n, err := b.app.AppendAlarmHistory(ctx, svc, "p1", []domain.AlarmRecord{r})
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	n, err = b.app.AppendAlarmHistory(ctx, svc, "p2", []domain.AlarmRecord{r})
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "the same id in another project is another entry")
	n, err = b.app.AppendAlarmHistory(ctx, svc, "p1", []domain.AlarmRecord{r})
	require.NoError(t, err)
	require.Zero(t, n, "a retry in the same project is skipped")
}
