package app_test

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/jobargs"
)

// historyRows exports p1's history of kind around occurred as NDJSON and
// decodes its rows: what was stored, read back the way users read it.
func historyRows[T any](t *testing.T, b *exportBundle, kind domain.DataExportKind) []T {
	t.Helper()
	e := b.ready(t, func(in *app.RequestDataExportInput) {
		in.Kind = kind
		in.From, in.To = occurred.Add(-24*time.Hour), occurred.Add(24*time.Hour)
	})
	raw, err := b.bucket.ReadAll(context.Background(), e.ObjectRef)
	require.NoError(t, err)
	var rows []T
	for _, line := range strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n") {
		if line == "" {
			continue
		}
		var row T
		require.NoError(t, json.Unmarshal([]byte(line), &row))
		rows = append(rows, row)
	}
	return rows
}

// requireNotAudited checks that nothing was audited or fanned out.
func requireNotAudited(t *testing.T, b *exportBundle) {
	t.Helper()
	require.Zero(t, countRows(t, b.pool, "audit_events"), "history appends are not audit events")
	require.Empty(t, jobsAfter[jobargs.WebhookFanoutArgs](t, b.pool, 0))
}

func TestAppendAlarmHistory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	alarm := func(change func(*domain.AlarmRecord)) domain.AlarmRecord {
		r := domain.AlarmRecord{ID: uuid.New(), OccurredAt: occurred, AlarmID: "alarm-17", DeviceID: "dev-42",
			Severity: domain.AlarmMajor, State: domain.AlarmRaised}
		if change != nil {
			change(&r)
		}
		return r
	}

	t.Run("AppendsEachEntryOnceByID", func(t *testing.T) {
		t.Parallel()
		b := setupExports(t, app.ExportConfig{})
		cet := time.FixedZone("CET", 3600)
		raised := alarm(func(r *domain.AlarmRecord) {
			r.OccurredAt = occurred.In(cet).Add(1500 * time.Nanosecond)
			r.Message = "Temperature above 80 °C"
			r.Details = json.RawMessage(`{"value":83.1}`)
		})
		acked := alarm(func(r *domain.AlarmRecord) {
			r.State = domain.AlarmAcknowledged
			r.OccurredAt = occurred.Add(time.Minute)
		})
		n, err := b.app.AppendAlarmHistory(ctx, b.svc, "p1", []domain.AlarmRecord{raised, acked})
		require.NoError(t, err)
		require.EqualValues(t, 2, n)
		n, err = b.app.AppendAlarmHistory(ctx, b.svc, "p1", []domain.AlarmRecord{raised, acked})
		require.NoError(t, err)
		require.Zero(t, n, "a retried batch is skipped")
		changed := raised
		changed.Message = "something else"
		n, err = b.app.AppendAlarmHistory(ctx, b.svc, "p1", []domain.AlarmRecord{changed})
		require.NoError(t, err)
		require.Zero(t, n, "an id the project has is skipped, whatever its other fields")
		n, err = b.app.AppendAlarmHistory(ctx, b.svc, "p2", []domain.AlarmRecord{raised})
		require.NoError(t, err)
		require.EqualValues(t, 1, n, "the same id in another project is another entry")
		anonymous := alarm(func(r *domain.AlarmRecord) { r.ID = uuid.Nil; r.OccurredAt = occurred.Add(2 * time.Minute) })
		for range 2 {
			n, err = b.app.AppendAlarmHistory(ctx, b.svc, "p1", []domain.AlarmRecord{anonymous})
			require.NoError(t, err)
			require.EqualValues(t, 1, n, "an entry without id gets a new one on every call")
		}
		requireNotAudited(t, b)

		rows := historyRows[domain.AlarmRecord](t, b, domain.DataExportAlarm)
		require.Len(t, rows, 4)
		first := rows[0]
		require.Equal(t, raised.ID, first.ID)
		require.Equal(t, "t1", first.TenantID)
		require.Equal(t, "p1", first.ProjectID)
		require.Equal(t, occurred.Add(time.Microsecond), first.OccurredAt, "UTC, truncated to the microsecond")
		require.Equal(t, "Temperature above 80 °C", first.Message, "the stored entry stays")
		require.JSONEq(t, `{"value":83.1}`, string(first.Details))
		require.Equal(t, acked.ID, rows[1].ID)
		require.JSONEq(t, `{}`, string(rows[1].Details), "details default to {}")
		require.Empty(t, rows[1].Message)
		require.NotEqual(t, rows[2].ID, rows[3].ID)
	})

	t.Run("InvalidInputFailsTheWholeBatch", func(t *testing.T) {
		t.Parallel()
		b := setupExports(t, app.ExportConfig{})
		good := alarm(nil)
		for _, tc := range []struct {
			field string
			bad   domain.AlarmRecord
		}{
			{"entries[1].severity", alarm(func(r *domain.AlarmRecord) { r.Severity = "BAD" })},
			{"entries[1].state", alarm(func(r *domain.AlarmRecord) { r.State = "OPEN" })},
			{"entries[1].alarmId", alarm(func(r *domain.AlarmRecord) { r.AlarmID = "" })},
			{"entries[1].deviceId", alarm(func(r *domain.AlarmRecord) { r.DeviceID = strings.Repeat("d", 257) })},
			{"entries[1].message", alarm(func(r *domain.AlarmRecord) { r.Message = strings.Repeat("m", 1025) })},
			{"entries[1].message", alarm(func(r *domain.AlarmRecord) { r.Message = "bell\a" })},
			{"entries[1].details", alarm(func(r *domain.AlarmRecord) { r.Details = json.RawMessage(`[1]`) })},
			{"entries[1].details", alarm(func(r *domain.AlarmRecord) {
				r.Details = json.RawMessage(`{"x":"` + strings.Repeat("x", 16384) + `"}`)
			})},
			{"entries[1].occurredAt", alarm(func(r *domain.AlarmRecord) { r.OccurredAt = time.Time{} })},
			{"entries[1].occurredAt", alarm(func(r *domain.AlarmRecord) { r.OccurredAt = time.Date(1969, 12, 31, 0, 0, 0, 0, time.UTC) })},
		} {
			_, err := b.app.AppendAlarmHistory(ctx, b.svc, "p1", []domain.AlarmRecord{good, tc.bad})
			requireCode(t, err, app.CodeBadUserInput)
			require.Equal(t, tc.field, app.ErrorOf(err).Field)
		}
		tomorrow := alarm(func(r *domain.AlarmRecord) { r.OccurredAt = b.clock.Now().Add(24*time.Hour + time.Second) })
		_, err := b.app.AppendAlarmHistory(ctx, b.svc, "p1", []domain.AlarmRecord{tomorrow})
		requireCode(t, err, app.CodeBadUserInput)
		for _, n := range []int{0, app.MaxHistoryBatch + 1} {
			_, err := b.app.AppendAlarmHistory(ctx, b.svc, "p1", make([]domain.AlarmRecord, n))
			requireCode(t, err, app.CodeBadUserInput)
			require.Equal(t, "entries", app.ErrorOf(err).Field)
		}

		n, err := b.app.AppendAlarmHistory(ctx, b.svc, "p1", []domain.AlarmRecord{good})
		require.NoError(t, err)
		require.EqualValues(t, 1, n, "nothing of the refused batches was stored")
	})

	t.Run("Authorization", func(t *testing.T) {
		t.Parallel()
		b := setupExports(t, app.ExportConfig{})
		_, err := b.app.AppendAlarmHistory(ctx, b.user, "p1", []domain.AlarmRecord{alarm(nil)})
		requireCode(t, err, app.CodeForbidden)
		_, err = b.app.AppendAlarmHistory(ctx, b.svc, "p3", []domain.AlarmRecord{alarm(nil)})
		require.Equal(t, app.ErrProjectNotFound, err)
	})
}

func TestAppendTelemetryHistory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	point := func(change func(*domain.TelemetryPoint)) domain.TelemetryPoint {
		p := domain.TelemetryPoint{DeviceID: "dev-42", Metric: "temperature", OccurredAt: occurred, Value: 79.5, Unit: "Cel"}
		if change != nil {
			change(&p)
		}
		return p
	}

	t.Run("AppendsOncePerTimeDeviceAndMetric", func(t *testing.T) {
		t.Parallel()
		b := setupExports(t, app.ExportConfig{})
		batch := []domain.TelemetryPoint{ // in the export's order: time, device, metric
			point(func(p *domain.TelemetryPoint) { p.Metric = "humidity"; p.Value = 41; p.Unit = "%" }),
			point(nil),
			point(func(p *domain.TelemetryPoint) { p.OccurredAt = occurred.Add(time.Minute); p.Value = 83.1 }),
		}
		n, err := b.app.AppendTelemetryHistory(ctx, b.svc, "p1", batch)
		require.NoError(t, err)
		require.EqualValues(t, 3, n)
		n, err = b.app.AppendTelemetryHistory(ctx, b.svc, "p1", batch)
		require.NoError(t, err)
		require.Zero(t, n, "a retried batch is stored once")
		n, err = b.app.AppendTelemetryHistory(ctx, b.svc, "p1", []domain.TelemetryPoint{
			point(func(p *domain.TelemetryPoint) { p.Value = 1 }),
			point(func(p *domain.TelemetryPoint) { p.OccurredAt = occurred.Add(999 * time.Nanosecond); p.Value = 2 }),
		})
		require.NoError(t, err)
		require.Zero(t, n, "the same microsecond, device and metric is the same point, and the stored value stays")
		n, err = b.app.AppendTelemetryHistory(ctx, b.svc, "p2", batch[:1])
		require.NoError(t, err)
		require.EqualValues(t, 1, n, "another project's point")
		requireNotAudited(t, b)

		rows := historyRows[domain.TelemetryPoint](t, b, domain.DataExportTelemetry)
		require.Len(t, rows, 3)
		for i, want := range batch {
			want.TenantID, want.ProjectID = "t1", "p1"
			require.Equal(t, want, rows[i])
		}
	})

	t.Run("InvalidInputFailsTheWholeBatch", func(t *testing.T) {
		t.Parallel()
		b := setupExports(t, app.ExportConfig{})
		for _, tc := range []struct {
			field string
			bad   domain.TelemetryPoint
		}{
			{"points[1].value", point(func(p *domain.TelemetryPoint) { p.Value = math.NaN() })},
			{"points[1].value", point(func(p *domain.TelemetryPoint) { p.Value = math.Inf(-1) })},
			{"points[1].unit", point(func(p *domain.TelemetryPoint) { p.Unit = strings.Repeat("u", 33) })},
			{"points[1].deviceId", point(func(p *domain.TelemetryPoint) { p.DeviceID = "" })},
			{"points[1].metric", point(func(p *domain.TelemetryPoint) { p.Metric = "t\x00" })},
			{"points[1].occurredAt", point(func(p *domain.TelemetryPoint) { p.OccurredAt = b.clock.Now().Add(25 * time.Hour) })},
		} {
			_, err := b.app.AppendTelemetryHistory(ctx, b.svc, "p1", []domain.TelemetryPoint{point(nil), tc.bad})
			requireCode(t, err, app.CodeBadUserInput)
			require.Equal(t, tc.field, app.ErrorOf(err).Field)
		}
		_, err := b.app.AppendTelemetryHistory(ctx, b.user, "p1", []domain.TelemetryPoint{point(nil)})
		requireCode(t, err, app.CodeForbidden)

		n, err := b.app.AppendTelemetryHistory(ctx, b.svc, "p1", []domain.TelemetryPoint{point(nil)})
		require.NoError(t, err)
		require.EqualValues(t, 1, n, "nothing of the refused batches was stored")
	})
}
