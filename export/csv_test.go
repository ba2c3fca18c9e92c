package export

import (
	"bytes"
	"context"
	"encoding/csv"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/domain"
)

// The headers as the package documentation states them.
var (
	documentedAuditHeader = strings.Split("id,tenant_id,project_id,sequence,action,occurred_at,recorded_at,"+
		"subject_type,subject_id,subject_display_name,resource_type,resource_id,outcome,governance_risk,"+
		"governance_reason,governance_ticket,governance_confirmed_by,trace_id,request_id,causation_id,"+
		"evidence_digests,details,chain_hash,chain_version,recorded_by_issuer,recorded_by_subject,"+
		"recorded_by_token_id,recorded_by_client_id", ",")
	documentedAlarmHeader     = strings.Split("id,tenant_id,project_id,occurred_at,alarm_id,device_id,severity,state,message,details", ",")
	documentedTelemetryHeader = strings.Split("tenant_id,project_id,device_id,metric,occurred_at,value,unit", ",")
)

// readBack is what encoding/csv returns for a value written verbatim: it
// turns a quoted "\r\n" into "\n".
func readBack(s string) string { return strings.ReplaceAll(s, "\r\n", "\n") }

// auditColumns is the expected CSV record of a sample audit event, spelled
// out column by column.
func auditColumns(e *domain.AuditEvent) []string {
	cols := map[string]string{
		"id": e.ID.String(), "tenant_id": e.TenantID, "project_id": e.ProjectID,
		"sequence": strconv.FormatUint(e.Sequence, 10), "action": e.Action,
		"occurred_at": e.OccurredAt.UTC().Format(time.RFC3339Nano), "recorded_at": e.RecordedAt.UTC().Format(time.RFC3339Nano),
		"subject_type": string(e.Subject.Type), "subject_id": e.Subject.ID, "subject_display_name": e.Subject.DisplayName,
		"resource_type": e.Resource.Type, "resource_id": e.Resource.ID, "outcome": string(e.Outcome),
		"chain_hash": e.ChainHash.String(), "chain_version": strconv.Itoa(e.ChainVersion),
	}
	if r := e.RecordedBy; r != nil {
		cols["recorded_by_issuer"], cols["recorded_by_subject"] = r.Issuer, r.Subject
		cols["recorded_by_token_id"], cols["recorded_by_client_id"] = r.TokenID, r.ClientID
	}
	if e.Governance != nil {
		cols["governance_risk"] = string(e.Governance.Risk)
		cols["governance_reason"] = e.Governance.Reason
		cols["governance_ticket"] = e.Governance.Ticket
		cols["governance_confirmed_by"] = e.Governance.ConfirmedBy
		cols["trace_id"] = e.Correlation.TraceID
		cols["request_id"] = e.Correlation.RequestID
		cols["causation_id"] = e.Correlation.CausationID
		cols["evidence_digests"] = `[{"algorithm":"sha256","value":"ab","label":"photo"}]`
		cols["details"] = `{"after":{"mode":"eco"},"note":"line1\nline2"}`
	}
	return inOrder(documentedAuditHeader, cols)
}

// alarmColumns is the expected CSV record of a sample alarm record.
func alarmColumns(a *domain.AlarmRecord) []string {
	cols := map[string]string{
		"id": a.ID.String(), "tenant_id": a.TenantID, "project_id": a.ProjectID,
		"occurred_at": a.OccurredAt.UTC().Format(time.RFC3339Nano), "alarm_id": a.AlarmID, "device_id": a.DeviceID,
		"severity": string(a.Severity), "state": string(a.State), "message": readBack(a.Message),
		"details": string(a.Details),
	}
	return inOrder(documentedAlarmHeader, cols)
}

// telemetryColumns is the expected CSV record of a sample telemetry point.
func telemetryColumns(p *domain.TelemetryPoint) []string {
	cols := map[string]string{
		"tenant_id": p.TenantID, "project_id": p.ProjectID, "device_id": p.DeviceID, "metric": p.Metric,
		"occurred_at": p.OccurredAt.UTC().Format(time.RFC3339Nano),
		"value":       strconv.FormatFloat(p.Value, 'g', -1, 64), "unit": p.Unit,
	}
	return inOrder(documentedTelemetryHeader, cols)
}

// inOrder lists the values of cols in the order of header, as the file
// holds them (a cell a spreadsheet would run as a formula gets a leading
// quote); a missing column is "".
func inOrder(header []string, cols map[string]string) []string {
	out := make([]string, len(header))
	for i, h := range header {
		v := cols[h]
		if _, err := strconv.ParseFloat(v, 64); v != "" && strings.ContainsRune("=+-@\t\r", rune(v[0])) && err != nil {
			v = "'" + v
		}
		out[i] = v
	}
	return out
}

func TestCSVHeadersMatchDocumentation(t *testing.T) {
	t.Parallel()
	require.Equal(t, documentedAuditHeader, csvHeader(domain.DataExportAudit))
	require.Equal(t, documentedAlarmHeader, csvHeader(domain.DataExportAlarm))
	require.Equal(t, documentedTelemetryHeader, csvHeader(domain.DataExportTelemetry))
}

// encodeCSV writes rows through a CSV object in a memory bucket and returns
// the stored text.
func encodeCSV(t *testing.T, kind domain.DataExportKind, write func(w *ObjectWriter) error) string {
	t.Helper()
	b := drivers[0].open(t)
	key := Key("t", "p", uuid.New(), 1, domain.DataExportCSV, domain.DataExportUncompressed)
	w, err := CreateObject(context.Background(), b, key, kind, domain.DataExportCSV, domain.DataExportUncompressed, 0)
	require.NoError(t, err)
	require.NoError(t, write(w))
	_, err = w.Commit()
	require.NoError(t, err)
	return string(readObject(t, b, key))
}

func TestCSVLiteralFormatting(t *testing.T) {
	t.Parallel()
	text := encodeCSV(t, domain.DataExportTelemetry, func(w *ObjectWriter) error {
		for _, v := range []float64{21.5, 1e21, 0.1, -0, math.NaN(), math.Inf(1), math.Inf(-1)} {
			p := samplePoint(0)
			p.Value = v
			p.OccurredAt = time.Date(2025, 1, 2, 4, 5, 6, 700, time.FixedZone("X", 3600))
			if err := w.WriteTelemetry(p); err != nil {
				return err
			}
		}
		return nil
	})
	lines := strings.Split(text, "\n")
	require.Equal(t, "tenant_id,project_id,device_id,metric,occurred_at,value,unit", lines[0])
	require.Equal(t, "tenant-1,p1,dev-0,temperature,2025-01-02T03:05:06.0000007Z,21.5,°C", lines[1])
	var values []string
	for _, l := range lines[1:8] {
		values = append(values, strings.Split(l, ",")[5])
	}
	require.Equal(t, []string{"21.5", "1e+21", "0.1", "0", "NaN", "+Inf", "-Inf"}, values)
	require.Equal(t, "", lines[8], "records end with a lone LF")
	require.NotContains(t, text, "\r")
}

// TestCSVValuesVerbatim checks that formula-like and awkward values are
// quoted per RFC 4180 but never altered.
// TestCSVFormulasNeutralized opens the file the way a spreadsheet import
// parses it (RFC 4180 records, then each cell's first character decides
// whether it is a formula): no cell that could run as a formula is left,
// numbers stay numbers, and every stored value comes back by dropping the
// one quote that was added.
func TestCSVFormulasNeutralized(t *testing.T) {
	t.Parallel()
	awkward := []string{"=1+1", "+SUM(A1)", "-2+3+cmd|' /C calc'!A0", "@cmd", "\tTAB", "\r=1", "=HYPERLINK(\"http://x\")",
		`say "hi", then`, " lead", "multi\nline", "'quoted", "plain", "-2.5", "+3", "-", "="}
	text := encodeCSV(t, domain.DataExportAlarm, func(w *ObjectWriter) error {
		for _, m := range awkward {
			a := sampleAlarm(0)
			a.Message = m
			a.DeviceID = m
			if err := w.WriteAlarm(a); err != nil {
				return err
			}
		}
		return nil
	})
	records, err := csv.NewReader(strings.NewReader(text)).ReadAll()
	require.NoError(t, err)
	require.Len(t, records, len(awkward)+1)
	isNumber := func(s string) bool { _, err := strconv.ParseFloat(s, 64); return err == nil }
	for _, rec := range records[1:] {
		for _, cell := range rec {
			if cell != "" && strings.ContainsRune("=+-@\t\r", rune(cell[0])) {
				require.True(t, isNumber(cell), "cell %q would run as a formula", cell)
			}
		}
	}
	for i, m := range awkward {
		got := records[i+1][8]
		want := m
		if strings.ContainsRune("=+-@\t\r", rune(m[0])) && !isNumber(m) {
			want = "'" + m
		}
		require.Equal(t, want, readBack(got), "message %q", m)
		require.Equal(t, want, records[i+1][5], "device id %q", m)
	}

	text = encodeCSV(t, domain.DataExportTelemetry, func(w *ObjectWriter) error {
		p := samplePoint(0)
		p.Value = -12.5
		p.Unit = "=cmd"
		return w.WriteTelemetry(p)
	})
	records, err = csv.NewReader(strings.NewReader(text)).ReadAll()
	require.NoError(t, err)
	require.Equal(t, "-12.5", records[1][5], "a negative number stays a number")
	require.Equal(t, "'=cmd", records[1][6])
}

func TestCSVAbsentOptionalsAreEmpty(t *testing.T) {
	t.Parallel()
	text := encodeCSV(t, domain.DataExportAudit, func(w *ObjectWriter) error {
		e := sampleAudit(0)
		e.Details = rawJSON("null")
		return w.WriteAudit(e)
	})
	records, err := csv.NewReader(strings.NewReader(text)).ReadAll()
	require.NoError(t, err)
	require.Len(t, records, 2)
	for i, name := range documentedAuditHeader {
		switch name {
		case "governance_risk", "governance_reason", "governance_ticket", "governance_confirmed_by",
			"trace_id", "request_id", "causation_id", "evidence_digests", "details",
			"recorded_by_issuer", "recorded_by_subject", "recorded_by_token_id", "recorded_by_client_id": // a version 1 event
			require.Empty(t, records[1][i], name)
		default:
			require.NotEmpty(t, records[1][i], name)
		}
	}
}

func TestCSVDetailsCompacted(t *testing.T) {
	t.Parallel()
	text := encodeCSV(t, domain.DataExportAlarm, func(w *ObjectWriter) error {
		a := sampleAlarm(0)
		a.Details = rawJSON("{ \"a\" : [1, 2] }")
		return w.WriteAlarm(a)
	})
	records, err := csv.NewReader(strings.NewReader(text)).ReadAll()
	require.NoError(t, err)
	require.Equal(t, `{"a":[1,2]}`, records[1][9])
}

func TestInvalidDetailsFailTheWrite(t *testing.T) {
	t.Parallel()
	for _, format := range []domain.DataExportFormat{domain.DataExportCSV, domain.DataExportNDJSON} {
		b := drivers[0].open(t)
		key := Key("t", "p", uuid.New(), 1, format, domain.DataExportUncompressed)
		w, err := CreateObject(context.Background(), b, key, domain.DataExportAlarm, format, domain.DataExportUncompressed, 0)
		require.NoError(t, err)
		a := sampleAlarm(0)
		a.Details = rawJSON("{broken")
		require.Error(t, w.WriteAlarm(a), format)
		rows, _ := w.Progress()
		require.Zero(t, rows)
		w.Abort()
		requireAbsent(t, b, key)
	}
}

func TestNDJSONRefusesNaN(t *testing.T) {
	t.Parallel()
	b := drivers[0].open(t)
	key := Key("t", "p", uuid.New(), 1, domain.DataExportNDJSON, domain.DataExportUncompressed)
	w, err := CreateObject(context.Background(), b, key, domain.DataExportTelemetry, domain.DataExportNDJSON, domain.DataExportUncompressed, 0)
	require.NoError(t, err)
	p := samplePoint(0)
	p.Value = math.NaN()
	require.ErrorContains(t, w.WriteTelemetry(p), "unsupported value")
	w.Abort()
	requireAbsent(t, b, key)
}

func TestEmptyExport(t *testing.T) {
	t.Parallel()
	for _, format := range []domain.DataExportFormat{domain.DataExportCSV, domain.DataExportNDJSON} {
		for _, compression := range []domain.DataExportCompression{domain.DataExportUncompressed, domain.DataExportGzip} {
			b := drivers[0].open(t)
			key := Key("t", "p", uuid.New(), 1, format, compression)
			w, err := CreateObject(context.Background(), b, key, domain.DataExportAlarm, format, compression, 0)
			require.NoError(t, err)
			res, err := w.Commit()
			require.NoError(t, err)
			require.Zero(t, res.Rows)
			stored := readObject(t, b, key)
			require.Equal(t, digestOf(stored), res.Digest)
			require.Equal(t, uint64(len(stored)), res.Bytes)
			plain := stored
			if compression == domain.DataExportGzip {
				plain = gunzip(t, stored)
			}
			want := ""
			if format == domain.DataExportCSV {
				want = strings.Join(documentedAlarmHeader, ",") + "\n"
			}
			require.Equal(t, want, string(plain))
		}
	}
}

// rawJSON returns s as raw JSON.
func rawJSON(s string) []byte { return bytes.Clone([]byte(s)) }
