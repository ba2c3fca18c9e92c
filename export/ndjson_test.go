package export

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNDJSONAuditMatchesMarshal writes audit rows of many sizes, small ones
// and ones larger than the free space or the whole buffer, and checks each
// line is json.Marshal's encoding.
func TestNDJSONAuditMatchesMarshal(t *testing.T) {
	t.Parallel()
	var out, want bytes.Buffer
	enc := ndjsonEncoder{w: bufio.NewWriterSize(&out, bufferSize)}
	for i := range 600 {
		e := sampleAudit(i)
		switch {
		case i%97 == 0:
			e.Action = strings.Repeat("<&>\u2028", 20000) // beyond the whole buffer
		case i%13 == 0:
			e.Action = strings.Repeat("x", 5000) // beyond auditRowRoom
		case i%7 == 0:
			e.Details = json.RawMessage(` { "a" : "<b>" } `) // encoding/json path
		}
		require.NoError(t, enc.encodeAudit(e))
		line, err := json.Marshal(e)
		require.NoError(t, err)
		want.Write(line)
		want.WriteByte('\n')
	}
	require.NoError(t, enc.flush())
	require.Equal(t, want.String(), out.String())
}

func TestNDJSONInvalidAuditDetailsWriteNothing(t *testing.T) {
	t.Parallel()
	for _, room := range []int{bufferSize, auditRowRoom - 1} {
		var out bytes.Buffer
		enc := ndjsonEncoder{w: bufio.NewWriterSize(&out, bufferSize)}
		// Fill the buffer up to room bytes free, to take both paths.
		_, err := enc.w.Write(bytes.Repeat([]byte{'.'}, bufferSize-room))
		require.NoError(t, err)
		e := sampleAudit(1)
		e.Details = json.RawMessage(`{broken`)
		require.ErrorContains(t, enc.encodeAudit(e), "export: encode row as JSON")
		require.NoError(t, enc.flush())
		require.Equal(t, bufferSize-room, out.Len())
	}
}

func TestNDJSONAuditDoesNotAllocate(t *testing.T) {
	enc := ndjsonEncoder{w: bufio.NewWriterSize(io.Discard, bufferSize)}
	e := sampleAudit(1)
	allocs := testing.AllocsPerRun(1000, func() {
		if err := enc.encodeAudit(e); err != nil {
			t.Fatal(err)
		}
	})
	require.Zero(t, allocs)
}

func BenchmarkNDJSONAudit(b *testing.B) {
	enc := ndjsonEncoder{w: bufio.NewWriterSize(io.Discard, bufferSize)}
	e := sampleAudit(1)
	b.ReportAllocs()
	for b.Loop() {
		if err := enc.encodeAudit(e); err != nil {
			b.Fatal(err)
		}
	}
}
