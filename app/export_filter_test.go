package app_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
)

// exportedLine is what a filter test reads of an NDJSON export's line.
type exportedLine struct {
	Sequence    uint64 `json:"sequence,string"`
	Correlation *struct {
		RequestID string `json:"requestId"`
	} `json:"correlation"`
	RecordedBy *struct {
		Subject string `json:"subject"`
	} `json:"recordedBy"`
}

// exportedLines reads the rows of e's NDJSON object.
func (b *exportBundle) exportedLines(t *testing.T, e domain.DataExport) []exportedLine {
	t.Helper()
	raw, err := b.bucket.ReadAll(context.Background(), e.ObjectRef)
	require.NoError(t, err)
	var out []exportedLine
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		var l exportedLine
		require.NoError(t, json.Unmarshal(sc.Bytes(), &l))
		out = append(out, l)
	}
	require.NoError(t, sc.Err())
	return out
}

func sequencesOf(lines []exportedLine) []uint64 {
	out := make([]uint64, len(lines))
	for i, l := range lines {
		out[i] = l.Sequence
	}
	return out
}

// TestFilteredAuditExport: an AUDIT export with a filter holds exactly the
// events of its range that pass it (the filter narrows the range, never
// widens it), keeps the filter and records no checkpoint.
func TestFilteredAuditExport(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupExports(t, app.ExportConfig{})
	b.app = b.otherApp(func(c *app.Config) { c.Checkpoints = newRing(t) })
	other := b.svc
	other.Subject = "svc2"
	// Sequences 1..6 of p1, two recorders, two request ids; 6 lies outside
	// the export's time range (occurred ± 1h).
	record := func(id app.Identity, requestID string, at time.Time) domain.AuditEvent {
		d := draft("p1", "device.updated")
		d.OccurredAt = at
		if requestID != "" {
			d.Correlation = &domain.Correlation{RequestID: requestID}
		}
		e, err := b.app.RecordAuditEvent(ctx, id, d, "")
		require.NoError(t, err)
		return e
	}
	record(b.svc, "r-1", occurred)                                                        // 1
	record(other, "r-1", occurred)                                                        // 2
	record(other, "r-2", occurred)                                                        // 3
	record(b.svc, "", occurred)                                                           // 4
	record(other, "r-1", occurred.Add(time.Minute))                                       // 5
	record(other, "r-1", occurred.Add(-3*time.Hour))                                      // 6: before from
	require.Equal(t, uint64(7), record(b.svc, "r-3", occurred.Add(2*time.Hour)).Sequence) // 7: after to

	t.Run("ByRecordedBySubject", func(t *testing.T) {
		e := b.ready(t, func(in *app.RequestDataExportInput) {
			in.Filter = &app.AuditEventFilterInput{RecordedBySubject: "svc2"}
		})
		require.Equal(t, domain.DataExportReady, e.State)
		lines := b.exportedLines(t, e)
		require.Equal(t, []uint64{2, 3, 5}, sequencesOf(lines), "svc2's events of the range, not 6 (before it)")
		for _, l := range lines {
			require.Equal(t, "svc2", l.RecordedBy.Subject)
		}
		require.Equal(t, uint64(3), e.RowCount)
		require.NotNil(t, e.Filter)
		require.Equal(t, "svc2", e.Filter.RecordedBySubject)
		require.Nil(t, e.Checkpoint, "a filtered export is not a contiguous chain: no checkpoint")
	})

	t.Run("ByCorrelationRequestID", func(t *testing.T) {
		wide := occurred.Add(-24 * time.Hour)
		e := b.ready(t, func(in *app.RequestDataExportInput) {
			// The filter's own wider time bound does not widen the export.
			in.Filter = &app.AuditEventFilterInput{RequestID: "r-1", OccurredFrom: &wide}
		})
		lines := b.exportedLines(t, e)
		require.Equal(t, []uint64{1, 2, 5}, sequencesOf(lines))
		for _, l := range lines {
			require.Equal(t, "r-1", l.Correlation.RequestID)
		}
		require.Nil(t, e.Checkpoint)
		require.Equal(t, "r-1", e.Filter.RequestID)
		require.Equal(t, wide, *e.Filter.OccurredFrom)
	})

	t.Run("BySequenceRange", func(t *testing.T) {
		lo, hi := uint64(2), uint64(6)
		e := b.ready(t, func(in *app.RequestDataExportInput) {
			in.From, in.To, in.FromSequence, in.ToSequence = time.Time{}, time.Time{}, &lo, &hi
			in.Filter = &app.AuditEventFilterInput{RequestID: "r-1"}
		})
		require.Equal(t, domain.DataExportReady, e.State, e.FailureReason)
		require.Equal(t, []uint64{2, 5, 6}, sequencesOf(b.exportedLines(t, e)), "not dense, and not a failure")
		require.Nil(t, e.Checkpoint)
	})

	t.Run("UnfilteredStillHasItsCheckpoint", func(t *testing.T) {
		e := b.ready(t, nil)
		require.Nil(t, e.Filter)
		require.NotNil(t, e.Checkpoint, "the ring works: only the filter stops the checkpoint")
		require.Equal(t, []uint64{1, 2, 3, 4, 5}, sequencesOf(b.exportedLines(t, e))[:5])
		// An empty filter is no filter.
		e = b.ready(t, func(in *app.RequestDataExportInput) { in.Filter = &app.AuditEventFilterInput{} })
		require.Nil(t, e.Filter)
		require.NotNil(t, e.Checkpoint)
	})

	t.Run("TheRequestEventCarriesTheFilter", func(t *testing.T) {
		e := b.request(t, func(in *app.RequestDataExportInput) {
			in.Filter = &app.AuditEventFilterInput{Action: "device.*", Outcomes: []domain.Outcome{domain.OutcomeSuccess}}
		})
		reader := app.Identity{Subject: "auditor", TenantID: "t1", ProjectIDs: []string{"p1"}, Permissions: []app.Permission{app.PermissionAuditRead}}
		page, err := b.app.SearchAuditEvents(ctx, reader, app.SearchAuditEventsInput{ProjectID: "p1",
			Filter: app.AuditEventFilterInput{Action: "export.requested", ResourceID: e.ID.String()}})
		require.NoError(t, err)
		require.Len(t, page.Edges, 1)
		var details struct {
			Filter json.RawMessage `json:"filter"`
		}
		require.NoError(t, json.Unmarshal(page.Edges[0].Event.Details, &details))
		require.JSONEq(t, `{"action":"device.*","outcome":["SUCCESS"]}`, string(details.Filter))
	})
}

func TestFilteredAuditExportRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupExports(t, app.ExportConfig{})
	later, earlier := occurred.Add(time.Hour), occurred
	for name, tc := range map[string]struct {
		change func(*app.RequestDataExportInput)
		field  string
	}{
		"not AUDIT": {func(in *app.RequestDataExportInput) {
			in.Kind = domain.DataExportAlarm
			in.Filter = &app.AuditEventFilterInput{SubjectID: "u1"}
		}, "filter"},
		"empty, not AUDIT": {func(in *app.RequestDataExportInput) {
			in.Kind = domain.DataExportTelemetry
			in.Filter = &app.AuditEventFilterInput{}
		}, "filter"},
		"bad action": {func(in *app.RequestDataExportInput) {
			in.Filter = &app.AuditEventFilterInput{Action: "Not An Action"}
		}, "filter.action"},
		"bad outcome": {func(in *app.RequestDataExportInput) {
			in.Filter = &app.AuditEventFilterInput{Outcomes: []domain.Outcome{"MAYBE"}}
		}, "filter.outcome"},
		"reversed times": {func(in *app.RequestDataExportInput) {
			in.Filter = &app.AuditEventFilterInput{OccurredFrom: &later, OccurredTo: &earlier}
		}, "filter.occurredTo"},
		"NUL in a request id": {func(in *app.RequestDataExportInput) {
			in.Filter = &app.AuditEventFilterInput{RequestID: "r\x00"}
		}, "filter.correlation.requestId"},
	} {
		_, err := b.app.RequestDataExport(ctx, b.user, exportInput(tc.change))
		requireCode(t, err, app.CodeBadUserInput)
		require.Equal(t, tc.field, app.ErrorOf(err).Field, name)
	}
	require.Zero(t, countRows(t, b.pool, "data_exports"))
}

func TestFilteredAuditExportIdempotency(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupExports(t, app.ExportConfig{})
	keyed := func(f *app.AuditEventFilterInput) app.RequestDataExportInput {
		return exportInput(func(in *app.RequestDataExportInput) { in.IdempotencyKey, in.Filter = "k-1", f })
	}
	first, err := b.app.RequestDataExport(ctx, b.user, keyed(&app.AuditEventFilterInput{RecordedBySubject: "svc"}))
	require.NoError(t, err)
	again, err := b.app.RequestDataExport(ctx, b.user, keyed(&app.AuditEventFilterInput{RecordedBySubject: "svc"}))
	require.NoError(t, err)
	require.Equal(t, first.ID, again.ID, "the same request again")
	require.Equal(t, first.Filter, again.Filter)

	_, err = b.app.RequestDataExport(ctx, b.user, keyed(&app.AuditEventFilterInput{RecordedBySubject: "svc2"}))
	requireCode(t, err, app.CodeIdempotencyConflict)
	_, err = b.app.RequestDataExport(ctx, b.user, keyed(nil))
	requireCode(t, err, app.CodeIdempotencyConflict)
	require.Equal(t, 1, countRows(t, b.pool, "data_exports"))
}
