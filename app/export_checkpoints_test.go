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
	"github.com/aetheriot/aether-audit/checkpoint"
	"github.com/aetheriot/aether-audit/domain"
)

func TestExportBySequenceRange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	seqs := func(lo, hi uint64) func(*app.RequestDataExportInput) {
		return func(in *app.RequestDataExportInput) {
			in.From, in.To, in.FromSequence, in.ToSequence = time.Time{}, time.Time{}, &lo, &hi
		}
	}

	t.Run("ExactlyTheRangeWithItsCheckpoint", func(t *testing.T) {
		t.Parallel()
		b := setupExports(t, app.ExportConfig{})
		ring := newRing(t)
		b.app = b.otherApp(func(c *app.Config) { c.Checkpoints = ring })
		drafts := make([]domain.AuditEventDraft, 6)
		for i := range drafts {
			drafts[i] = draft("p1", "device.updated")
			drafts[i].OccurredAt = occurred.Add(-time.Duration(i) * 24 * time.Hour) // any time: the range is by sequence
		}
		events, err := b.app.RecordAuditEvents(ctx, b.svc, app.RecordAuditEventsInput{Events: drafts})
		require.NoError(t, err)
		// A checkpoint exists above the range: the export's is signed at 4.
		writer := app.Identity{Subject: "svc", TenantID: "t1", ProjectIDs: []string{"p1"}, Permissions: []app.Permission{app.PermissionAuditWrite}}
		later, err := b.app.CreateAuditCheckpoint(ctx, writer, "p1")
		require.NoError(t, err)

		e := b.ready(t, seqs(2, 4))
		require.Equal(t, domain.DataExportReady, e.State)
		require.Equal(t, uint64(2), *e.FromSequence)
		require.Equal(t, uint64(4), *e.ToSequence)
		require.True(t, e.From.IsZero())
		require.Equal(t, uint64(3), e.RowCount)
		raw, err := b.bucket.ReadAll(ctx, e.ObjectRef)
		require.NoError(t, err)
		var got []uint64
		var lastHash string
		sc := bufio.NewScanner(bytes.NewReader(raw))
		for sc.Scan() {
			var line struct {
				Sequence  uint64 `json:"sequence,string"`
				ChainHash string `json:"chainHash"`
			}
			require.NoError(t, json.Unmarshal(sc.Bytes(), &line))
			got, lastHash = append(got, line.Sequence), line.ChainHash
		}
		require.Equal(t, []uint64{2, 3, 4}, got, "exactly the range, in sequence order")

		require.NotNil(t, e.Checkpoint)
		require.Equal(t, uint64(4), e.Checkpoint.Sequence)
		f := verified(t, ring, e.Checkpoint.JWS)
		require.Equal(t, uint64(4), f.Sequence)
		require.Equal(t, events[3].ChainHash.String(), lastHash)
		require.Equal(t, events[3].ChainHash, domain.Hash(f.ChainHash), "the checkpoint signs the file's last hash")
		require.NotNil(t, f.Previous, "linked to the checkpoint issued before it, though at a higher sequence")
		require.Equal(t, domain.Hash(f.Previous[:]), domain.Hash(checkpointDigest(later.JWS)))

		// Again over the same range: the same checkpoint.
		again := b.ready(t, seqs(2, 4))
		require.Equal(t, e.Checkpoint, again.Checkpoint)
	})

	t.Run("EmptyAndOtherKindsHaveNone", func(t *testing.T) {
		t.Parallel()
		b := setupExports(t, app.ExportConfig{})
		b.app = b.otherApp(func(c *app.Config) { c.Checkpoints = newRing(t) })
		e := b.ready(t, func(in *app.RequestDataExportInput) {
			in.From, in.To = occurred.Add(-72*time.Hour), occurred.Add(-48*time.Hour)
		})
		require.Zero(t, e.RowCount)
		require.Nil(t, e.Checkpoint, "an empty export has no checkpoint")
		e = b.ready(t, func(in *app.RequestDataExportInput) { in.Kind = domain.DataExportAlarm })
		require.Nil(t, e.Checkpoint)
		// A time-range AUDIT export with rows records one at its last row.
		rec, err := b.app.RecordAuditEvents(ctx, b.svc, app.RecordAuditEventsInput{Events: []domain.AuditEventDraft{draft("p1", "device.updated")}})
		require.NoError(t, err)
		e = b.ready(t, nil)
		require.NotNil(t, e.Checkpoint)
		require.Equal(t, rec[0].Sequence, e.Checkpoint.Sequence, "the last exported row's sequence")
	})

	t.Run("PurgedBeforeItRanFails", func(t *testing.T) {
		t.Parallel()
		b := setupExports(t, app.ExportConfig{})
		_, err := b.app.RecordAuditEvents(ctx, b.svc, app.RecordAuditEventsInput{Events: []domain.AuditEventDraft{
			draft("p1", "a.b"), draft("p1", "a.b"), draft("p1", "a.b")}})
		require.NoError(t, err)
		e := b.request(t, seqs(1, 3))
		later := b.otherApp(func(c *app.Config) {
			c.Now = func() time.Time { return b.clock.Now().Add(401 * 24 * time.Hour) }
		})
		purges, err := later.PurgeExpiredAuditEvents(ctx, 10)
		require.NoError(t, err)
		require.NotEmpty(t, purges)
		require.NoError(t, runExport(ctx, b.app, e, 1, nil))
		got := b.get(t, e)
		require.Equal(t, domain.DataExportFailed, got.State, "not a partial file")
		require.Contains(t, got.FailureReason, "purged by retention")
		require.Empty(t, b.objects(t))
	})

	t.Run("Refusals", func(t *testing.T) {
		t.Parallel()
		b := setupExports(t, app.ExportConfig{MaxSequenceRange: 10})
		_, err := b.app.RecordAuditEvents(ctx, b.svc, app.RecordAuditEventsInput{Events: []domain.AuditEventDraft{
			draft("p1", "a.b"), draft("p1", "a.b"), draft("p1", "a.b")}})
		require.NoError(t, err)
		one, three, nine := uint64(1), uint64(3), uint64(9)
		for name, tc := range map[string]struct {
			change func(*app.RequestDataExportInput)
			field  string
		}{
			"both kinds":      {func(in *app.RequestDataExportInput) { in.FromSequence, in.ToSequence = &one, &three }, "fromSequence"},
			"not AUDIT":       {func(in *app.RequestDataExportInput) { seqs(1, 3)(in); in.Kind = domain.DataExportAlarm }, "fromSequence"},
			"only one bound":  {func(in *app.RequestDataExportInput) { seqs(1, 3)(in); in.ToSequence = nil }, "toSequence"},
			"zero":            {seqs(0, 3), "fromSequence"},
			"reversed":        {seqs(3, 1), "toSequence"},
			"past the head":   {seqs(1, 4), "toSequence"},
			"too long":        {func(in *app.RequestDataExportInput) { seqs(1, 11)(in) }, "toSequence"},
			"no range at all": {func(in *app.RequestDataExportInput) { in.From, in.To = time.Time{}, time.Time{} }, "from"},
			"to without from": {func(in *app.RequestDataExportInput) { seqs(1, 3)(in); in.FromSequence = nil }, "fromSequence"},
			"from nine to one": {func(in *app.RequestDataExportInput) {
				in.From, in.To = time.Time{}, time.Time{}
				in.FromSequence, in.ToSequence = &nine, &one
			}, "toSequence"},
		} {
			_, err := b.app.RequestDataExport(ctx, b.user, exportInput(tc.change))
			requireCode(t, err, app.CodeBadUserInput)
			require.Equal(t, tc.field, app.ErrorOf(err).Field, name)
		}
		require.Zero(t, countRows(t, b.pool, "data_exports"))
	})
}

func checkpointDigest(jws string) [32]byte { return checkpoint.Digest(jws) }
