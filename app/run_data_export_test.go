package app_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/export"
)

func TestRunDataExport(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	// testBundle holds, in p1, three rows of each kind inside the range of
	// exportInput and one of each outside it; p2 has rows of its own.
	type testBundle struct {
		*exportBundle
		events []domain.AuditEvent
	}
	setup := func(t *testing.T, cfg app.ExportConfig) *testBundle {
		t.Helper()
		b := &testBundle{exportBundle: setupExports(t, cfg)}
		for _, project := range []string{"p1", "p2"} {
			var drafts []domain.AuditEventDraft
			var alarms []domain.AlarmRecord
			var points []domain.TelemetryPoint
			for i, at := range []time.Duration{30 * time.Minute, -30 * time.Minute, 0, 2 * time.Hour} {
				d := draft(project, "device.reading.taken")
				d.OccurredAt = occurred.Add(at)
				d.Details = json.RawMessage(fmt.Sprintf(`{"i":%d,"note":"comma, \"quote\"\nline"}`, i))
				drafts = append(drafts, d)
				alarms = append(alarms, domain.AlarmRecord{OccurredAt: occurred.Add(at), AlarmID: fmt.Sprintf("a%d", i), DeviceID: "d1",
					Severity: domain.AlarmMajor, State: domain.AlarmRaised, Message: "temperature high"})
				points = append(points, domain.TelemetryPoint{DeviceID: "d1", Metric: "temp", OccurredAt: occurred.Add(at), Value: 20.5 + float64(i), Unit: "C"})
			}
			events, err := b.app.RecordAuditEvents(ctx, b.svc, app.RecordAuditEventsInput{Events: drafts})
			require.NoError(t, err)
			if project == "p1" {
				b.events = events
			}
			_, err = b.app.AppendAlarmHistory(ctx, b.svc, project, alarms)
			require.NoError(t, err)
			_, err = b.app.AppendTelemetryHistory(ctx, b.svc, project, points)
			require.NoError(t, err)
		}
		return b
	}
	// content reads a READY export's object, checks its digest and length,
	// and returns its bytes, unpacked when gzipped.
	content := func(t *testing.T, b *testBundle, e domain.DataExport) []byte {
		t.Helper()
		raw, err := b.bucket.ReadAll(ctx, e.ObjectRef)
		require.NoError(t, err)
		sum := sha256.Sum256(raw)
		require.Equal(t, "sha256:"+hex.EncodeToString(sum[:]), e.ContentDigest, "the digest of the stored bytes")
		require.Equal(t, uint64(len(raw)), e.ByteLength)
		if e.Compression == domain.DataExportGzip {
			zr, err := gzip.NewReader(bytes.NewReader(raw))
			require.NoError(t, err)
			raw, err = io.ReadAll(zr)
			require.NoError(t, err)
		}
		return raw
	}

	t.Run("WritesTheObjectAndMovesToReady", func(t *testing.T) {
		t.Parallel()
		b := setup(t, app.ExportConfig{TTL: 48 * time.Hour})
		for _, tc := range []struct {
			kind        domain.DataExportKind
			format      domain.DataExportFormat
			compression domain.DataExportCompression
		}{
			{domain.DataExportAudit, domain.DataExportNDJSON, domain.DataExportUncompressed},
			{domain.DataExportAudit, domain.DataExportCSV, domain.DataExportGzip},
			{domain.DataExportAlarm, domain.DataExportCSV, domain.DataExportUncompressed},
			{domain.DataExportTelemetry, domain.DataExportNDJSON, domain.DataExportGzip},
		} {
			name := fmt.Sprint(tc)
			e := b.request(t, func(in *app.RequestDataExportInput) {
				in.Kind, in.Format, in.Compression = tc.kind, tc.format, tc.compression
			})
			b.clock.Add(time.Second)
			completed := 0
			require.NoError(t, runExport(ctx, b.app, e, 1, counting(&completed)), name)
			require.Equal(t, 1, completed, "READY commits with the job's completion: %s", name)

			e = b.get(t, e)
			require.Equal(t, domain.DataExportReady, e.State, name)
			require.Equal(t, export.Key("t1", "p1", e.ID, 1, tc.format, tc.compression), e.ObjectRef, name)
			require.Equal(t, b.clock.Now(), *e.StartedAt, name)
			require.Equal(t, b.clock.Now(), *e.ReadyAt, name)
			require.Equal(t, b.clock.Now().Add(48*time.Hour), *e.ExpiresAt, name)
			require.Equal(t, uint64(3), e.RowCount, "the rows of p1 in [from, to): %s", name)
			require.Equal(t, e.RowCount, e.ProgressRows, name)
			require.Equal(t, e.ByteLength, e.ProgressBytes, name)

			raw := content(t, b, e)
			if tc.format == domain.DataExportCSV {
				records, err := csv.NewReader(bytes.NewReader(raw)).ReadAll()
				require.NoError(t, err, name)
				require.Len(t, records, 1+3, "a header and the rows: %s", name)
				continue
			}
			lines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
			require.Len(t, lines, 3, name)
			if tc.kind == domain.DataExportAudit {
				for i, want := range []domain.AuditEvent{b.events[1], b.events[2], b.events[0]} {
					var row struct {
						ID        uuid.UUID
						ChainHash string
					}
					require.NoError(t, json.Unmarshal([]byte(lines[i]), &row))
					require.Equal(t, want.ID, row.ID, "ordered by occurredAt")
					require.Equal(t, hex.EncodeToString(want.ChainHash[:]), row.ChainHash)
				}
			}
		}
		require.Len(t, b.objects(t), 4, "one object per export")
	})

	t.Run("AnEmptyCSVHasItsHeader", func(t *testing.T) {
		t.Parallel()
		b := setup(t, app.ExportConfig{})
		e := b.ready(t, func(in *app.RequestDataExportInput) {
			in.Kind, in.Format = domain.DataExportTelemetry, domain.DataExportCSV
			in.From, in.To = occurred.Add(-48*time.Hour), occurred.Add(-24*time.Hour)
		})
		require.Equal(t, domain.DataExportReady, e.State)
		require.Zero(t, e.RowCount)
		require.Equal(t, "tenant_id,project_id,device_id,metric,occurred_at,value,unit\n", string(content(t, b, e)))
	})

	t.Run("NotReadyWithoutTheJobsCompletion", func(t *testing.T) {
		t.Parallel()
		b := setup(t, app.ExportConfig{})
		e := b.request(t, nil)
		lost := errors.New("the job's completion failed")
		err := runExport(ctx, b.app, e, 1, func(context.Context, app.Tx) error { return lost })
		require.ErrorIs(t, err, lost)
		cur := b.get(t, e)
		require.Equal(t, domain.DataExportRunning, cur.State, "not READY: the job runs again")
		require.Empty(t, cur.ObjectRef)
		require.Empty(t, b.objects(t), "and its object is not left behind")
	})

	t.Run("TheSizeBoundFailsAtOnceWithoutAnObject", func(t *testing.T) {
		t.Parallel()
		b := setup(t, app.ExportConfig{MaxBytes: 100})
		e := b.request(t, nil)
		b.clock.Add(time.Second)
		completed := 0
		require.NoError(t, runExport(ctx, b.app, e, 1, counting(&completed)), "nothing for River to retry")
		require.Equal(t, 1, completed)
		cur := b.get(t, e)
		require.Equal(t, domain.DataExportFailed, cur.State)
		require.Equal(t, "the export would exceed 100 bytes; request a shorter time range", cur.FailureReason)
		require.Equal(t, b.clock.Now(), *cur.FailedAt)
		require.Empty(t, cur.ObjectRef)
		require.Empty(t, b.objects(t))
	})

	t.Run("OtherErrorsAreRetriedThenFailTheExport", func(t *testing.T) {
		t.Parallel()
		b := setup(t, app.ExportConfig{})
		e := b.request(t, nil)
		broken := b.brokenStorage(t)
		completed := 0
		for attempt := 1; attempt <= 2; attempt++ {
			require.Error(t, runExport(ctx, broken, e, attempt, counting(&completed)), "River retries attempt %d", attempt)
			require.Equal(t, domain.DataExportRunning, b.get(t, e).State)
		}
		require.NoError(t, runExport(ctx, broken, e, 3, counting(&completed)))
		require.Equal(t, 1, completed)
		cur := b.get(t, e)
		require.Equal(t, domain.DataExportFailed, cur.State)
		require.Equal(t, "the export failed after 3 attempts because of an internal error; request it again", cur.FailureReason)
	})

	t.Run("ARunStartsOverAndRemovesWhatEarlierAttemptsLeft", func(t *testing.T) {
		t.Parallel()
		b := setup(t, app.ExportConfig{})
		e := b.request(t, nil)
		require.Error(t, runExport(ctx, b.brokenStorage(t), e, 1, nil))
		leftover := export.Key("t1", "p1", e.ID, 1, e.Format, e.Compression)
		require.NoError(t, b.bucket.WriteAll(ctx, leftover, []byte("half a file"), nil))
		other := export.Key("t1", "p1", uuid.New(), 1, e.Format, e.Compression)
		require.NoError(t, b.bucket.WriteAll(ctx, other, []byte("another export"), nil))

		require.NoError(t, runExport(ctx, b.app, e, 2, nil))
		cur := b.get(t, e)
		require.Equal(t, domain.DataExportReady, cur.State)
		require.Equal(t, export.Key("t1", "p1", e.ID, 2, e.Format, e.Compression), cur.ObjectRef, "each attempt writes its own key")
		require.ElementsMatch(t, []string{cur.ObjectRef, other}, b.objects(t))
		content(t, b, cur)
	})

	t.Run("ARunOfAnExportNoLongerQueuedOrRunningDoesNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t, app.ExportConfig{})
		e := b.ready(t, nil)
		completed := 0
		require.NoError(t, runExport(ctx, b.app, e, 2, counting(&completed)), "a late rerun")
		require.Zero(t, completed)
		require.Equal(t, e, b.get(t, e))
		require.Equal(t, []string{e.ObjectRef}, b.objects(t), "written once, never overwritten")

		gone := domain.DataExport{TenantID: "t1", ID: uuid.New()}
		require.NoError(t, runExport(ctx, b.app, gone, 1, counting(&completed)), "an export that does not exist")
		require.Zero(t, completed)
	})
}
