package export

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/csv"
	"encoding/json"
	"io"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/domain"
)

// TestObjectRoundTrip writes every kind in every format and compression to
// every driver, then checks the stored bytes against the result and decodes
// them back.
func TestObjectRoundTrip(t *testing.T) {
	t.Parallel()
	const rows = 5
	kinds := []domain.DataExportKind{domain.DataExportAudit, domain.DataExportAlarm, domain.DataExportTelemetry}
	formats := []domain.DataExportFormat{domain.DataExportNDJSON, domain.DataExportCSV}
	compressions := []domain.DataExportCompression{domain.DataExportUncompressed, domain.DataExportGzip}
	for _, d := range drivers {
		for _, kind := range kinds {
			for _, format := range formats {
				for _, compression := range compressions {
					name := d.name + "/" + string(kind) + "/" + string(format) + "/" + string(compression)
					t.Run(name, func(t *testing.T) {
						t.Parallel()
						ctx := context.Background()
						b := d.open(t)
						key := Key("tenant-1", "p1", uuid.New(), 1, format, compression)

						w, err := CreateObject(ctx, b, key, kind, format, compression, 0)
						require.NoError(t, err)
						require.NoError(t, writeRows(w, kind, rows))
						res, err := w.Commit()
						require.NoError(t, err)

						stored := readObject(t, b, key)
						require.Equal(t, digestOf(stored), res.Digest)
						require.Equal(t, uint64(len(stored)), res.Bytes)
						require.Equal(t, uint64(rows), res.Rows)
						gotRows, gotBytes := w.Progress()
						require.Equal(t, res.Rows, gotRows)
						require.Equal(t, res.Bytes, gotBytes)

						attrs, err := b.Attributes(ctx, key)
						require.NoError(t, err)
						require.Equal(t, contentType(format, compression), attrs.ContentType)
						require.Empty(t, attrs.ContentEncoding)

						plain := stored
						if compression == domain.DataExportGzip {
							plain = gunzip(t, stored)
						}
						if format == domain.DataExportNDJSON {
							checkNDJSON(t, kind, plain, rows)
						} else {
							checkCSV(t, kind, plain, rows)
						}
					})
				}
			}
		}
	}
}

// gunzip returns the decompressed content of a gzip file.
func gunzip(t *testing.T, data []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(data))
	require.NoError(t, err)
	plain, err := io.ReadAll(zr)
	require.NoError(t, err)
	require.NoError(t, zr.Close())
	return plain
}

// checkNDJSON checks that plain is n lines, each the JSON encoding of the
// matching sample row and decoding back to it.
func checkNDJSON(t *testing.T, kind domain.DataExportKind, plain []byte, n int) {
	t.Helper()
	sc := bufio.NewScanner(bytes.NewReader(plain))
	i := 0
	for sc.Scan() {
		line := sc.Bytes()
		switch kind {
		case domain.DataExportAudit:
			want, err := json.Marshal(sampleAudit(i))
			require.NoError(t, err)
			require.JSONEq(t, string(want), string(line))
			var got map[string]any
			require.NoError(t, json.Unmarshal(line, &got))
			require.Equal(t, sampleAudit(i).ID.String(), got["id"])
			require.Equal(t, sampleAudit(i).ChainHash.String(), got["chainHash"])
		case domain.DataExportAlarm:
			var got domain.AlarmRecord
			require.NoError(t, json.Unmarshal(line, &got))
			want := sampleAlarm(i)
			if want.Details == nil {
				want.Details = json.RawMessage("null")
			}
			require.Equal(t, *want, got)
		case domain.DataExportTelemetry:
			var got domain.TelemetryPoint
			require.NoError(t, json.Unmarshal(line, &got))
			require.Equal(t, *samplePoint(i), got)
		}
		i++
	}
	require.NoError(t, sc.Err())
	require.Equal(t, n, i)
	require.True(t, n == 0 || bytes.HasSuffix(plain, []byte("\n")))
}

// checkCSV checks that plain parses as the documented header and n records
// holding the flattened sample rows.
func checkCSV(t *testing.T, kind domain.DataExportKind, plain []byte, n int) {
	t.Helper()
	records, err := csv.NewReader(bytes.NewReader(plain)).ReadAll()
	require.NoError(t, err)
	require.Len(t, records, n+1)
	require.Equal(t, csvHeader(kind), records[0])
	for i, rec := range records[1:] {
		switch kind {
		case domain.DataExportAudit:
			require.Equal(t, auditColumns(sampleAudit(i)), rec)
		case domain.DataExportAlarm:
			require.Equal(t, alarmColumns(sampleAlarm(i)), rec)
		case domain.DataExportTelemetry:
			require.Equal(t, telemetryColumns(samplePoint(i)), rec)
		}
	}
}
