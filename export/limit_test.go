package export

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/domain"
)

// writeAndCommit writes rows of kind and commits, returning the first error.
func writeAndCommit(w *ObjectWriter, kind domain.DataExportKind, rows int) (ObjectResult, error) {
	if err := writeRows(w, kind, rows); err != nil {
		return ObjectResult{}, err
	}
	return w.Commit()
}

func TestMaxBytes(t *testing.T) {
	t.Parallel()
	const rows = 400
	for _, d := range drivers {
		for _, compression := range []domain.DataExportCompression{domain.DataExportUncompressed, domain.DataExportGzip} {
			t.Run(d.name+"/"+string(compression), func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				b := d.open(t)
				create := func(limit uint64) (*ObjectWriter, string) {
					key := Key("t", "p", uuid.New(), 1, domain.DataExportCSV, compression)
					w, err := CreateObject(ctx, b, key, domain.DataExportAudit, domain.DataExportCSV, compression, limit)
					require.NoError(t, err)
					return w, key
				}

				// The size of the export without a limit...
				w, _ := create(0)
				full, err := writeAndCommit(w, domain.DataExportAudit, rows)
				require.NoError(t, err)

				// ...fits a limit of exactly that size...
				w, key := create(full.Bytes)
				exact, err := writeAndCommit(w, domain.DataExportAudit, rows)
				require.NoError(t, err)
				require.Equal(t, full.Bytes, exact.Bytes)
				require.Equal(t, uint64(len(readObject(t, b, key))), exact.Bytes)

				// ...and not one byte less, whether the write or the final
				// flush at Commit crosses it.
				for _, limit := range []uint64{full.Bytes - 1, full.Bytes / 2, 1} {
					w, key := create(limit)
					_, err := writeAndCommit(w, domain.DataExportAudit, rows)
					require.ErrorIs(t, err, ErrTooLarge, "limit %d", limit)
					_, stored := w.Progress()
					require.LessOrEqual(t, stored, limit)
					// The failure sticks.
					_, err = w.Commit()
					require.ErrorIs(t, err, ErrTooLarge)
					w.Abort()
					requireAbsent(t, b, key)
				}
			})
		}
	}
}

// TestMaxBytesFailsTheWritePastIt checks that with a limit far below the
// export's size, a Write (not only Commit) reports ErrTooLarge.
func TestMaxBytesFailsTheWritePastIt(t *testing.T) {
	t.Parallel()
	for _, d := range drivers {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			b := d.open(t)
			key := Key("t", "p", uuid.New(), 1, domain.DataExportNDJSON, domain.DataExportUncompressed)
			w, err := CreateObject(context.Background(), b, key, domain.DataExportAudit, domain.DataExportNDJSON, domain.DataExportUncompressed, 100<<10)
			require.NoError(t, err)
			require.ErrorIs(t, writeRows(w, domain.DataExportAudit, 10000), ErrTooLarge)
			rows, stored := w.Progress()
			require.Less(t, rows, uint64(10000))
			require.LessOrEqual(t, stored, uint64(100<<10))
			w.Abort()
			requireAbsent(t, b, key)
		})
	}
}
