package streamsink

import (
	"bytes"
	"compress/gzip"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestGzipBatchHoldsTheNDJSONBatchAndIsTheSameWhenBuiltAgain(t *testing.T) {
	// Enough events for several gzip chunks.
	plain, events := testBatch(t, FormatNDJSON, 2000)
	require.Greater(t, len(plain.Body()), 2*gzipChunk)
	require.Equal(t, 2000, bytes.Count(plain.Body(), []byte{'\n'}))
	require.Equal(t, uint64(1), plain.First)
	require.Equal(t, uint64(2000), plain.Last)

	build := func(f Format) *Batch {
		b := NewBatch(f, "t,1", "p1")
		for i := range events {
			require.NoError(t, b.Append(&events[i]))
		}
		require.NoError(t, b.Finish())
		return b
	}
	zipped := build(FormatGzipNDJSON)
	zr, err := gzip.NewReader(bytes.NewReader(zipped.Body()))
	require.NoError(t, err)
	lines, err := io.ReadAll(zr)
	require.NoError(t, err)
	require.True(t, bytes.Equal(plain.Body(), lines), "the gzip batch holds the NDJSON lines")
	first := bytes.Clone(zipped.Body())
	zipped.Release()

	// A batch built again (a redelivery), from a pooled batch and its
	// reused gzip writer, has the same bytes: the stored digest matches.
	again := build(FormatGzipNDJSON)
	require.True(t, bytes.Equal(first, again.Body()), "the same bytes when built again")
	require.Equal(t, events[len(events)-1].ChainHash, again.LastChainHash)

	// A reused batch starts empty.
	again.Release()
	empty := NewBatch(FormatDatadogLogs, "t", "p")
	require.NoError(t, empty.Finish())
	require.Equal(t, "[]", string(empty.Body()))
	require.Zero(t, empty.Events)
}
