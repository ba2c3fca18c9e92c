package export

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"runtime"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/domain"
)

// TestObjectWriterConstantMemory writes about 48 MiB of NDJSON, plain and
// gzipped, to a file bucket and checks that the heap in use grows by far
// less: the writer streams instead of buffering the rows or the object. It
// does not run in parallel, so that other tests do not disturb the heap
// figures.
func TestObjectWriterConstantMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("writes tens of MiB")
	}
	const (
		target    = 48 << 20 // encoded bytes, before compression
		maxGrowth = 16 << 20
	)
	noise := make([]byte, 2<<10)
	_, _ = rand.Read(noise)
	details, err := json.Marshal(map[string]string{"blob": hex.EncodeToString(noise)})
	require.NoError(t, err)

	for _, compression := range []domain.DataExportCompression{domain.DataExportUncompressed, domain.DataExportGzip} {
		t.Run(string(compression), func(t *testing.T) {
			ctx := context.Background()
			b := drivers[1].open(t) // fileblob: memblob would hold the object itself
			key := Key("t", "p", uuid.New(), 1, domain.DataExportNDJSON, compression)
			e := sampleAudit(1)
			e.Details = details
			e.Sequence = 1_000_000 // rows below keep this width
			line, err := json.Marshal(e)
			require.NoError(t, err)
			rows := uint64(target/(len(line)+1)) + 1

			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			before := ms.HeapInuse
			peak := before

			w, err := CreateObject(ctx, b, key, domain.DataExportAudit, domain.DataExportNDJSON, compression, 0)
			require.NoError(t, err)
			defer w.Abort()
			for seq := uint64(1); seq <= rows; seq++ {
				e.Sequence = 1_000_000 + seq
				require.NoError(t, w.WriteAudit(e))
				if seq%500 == 0 {
					runtime.ReadMemStats(&ms)
					peak = max(peak, ms.HeapInuse)
				}
			}
			res, err := w.Commit()
			require.NoError(t, err)
			require.Equal(t, rows, res.Rows)
			if compression == domain.DataExportUncompressed {
				require.Equal(t, rows*uint64(len(line)+1), res.Bytes)
			}
			growth := int64(peak) - int64(before)
			t.Logf("%d rows, %d stored bytes, heap in use grew by %d KiB at most", res.Rows, res.Bytes, growth>>10)
			require.Less(t, growth, int64(maxGrowth))

			attrs, err := b.Attributes(ctx, key)
			require.NoError(t, err)
			require.Equal(t, int64(res.Bytes), attrs.Size)
		})
	}
}
