package export

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/aetheriot/aether-audit/domain"
)

// The CSV header row of each kind; the package documentation describes each
// column.
var (
	auditCSVHeader = []string{
		"id", "tenant_id", "project_id", "sequence", "action", "occurred_at", "recorded_at",
		"subject_type", "subject_id", "subject_display_name", "resource_type", "resource_id",
		"outcome", "governance_risk", "governance_reason", "governance_ticket", "governance_confirmed_by",
		"trace_id", "request_id", "causation_id", "evidence_digests", "details", "chain_hash",
		"chain_version", "recorded_by_issuer", "recorded_by_subject", "recorded_by_token_id", "recorded_by_client_id",
	}
	alarmCSVHeader = []string{
		"id", "tenant_id", "project_id", "occurred_at", "alarm_id", "device_id",
		"severity", "state", "message", "details",
	}
	telemetryCSVHeader = []string{
		"tenant_id", "project_id", "device_id", "metric", "occurred_at", "value", "unit",
	}
)

// csvHeader returns the header row of kind.
func csvHeader(kind domain.DataExportKind) []string {
	switch kind {
	case domain.DataExportAlarm:
		return alarmCSVHeader
	case domain.DataExportTelemetry:
		return telemetryCSVHeader
	default:
		return auditCSVHeader
	}
}

// csvEncoder flattens rows into CSV records: RFC 4180 quoting, "\n" line
// ends, values verbatim but for cells a spreadsheet would run as formulas.
type csvEncoder struct {
	w       *csv.Writer
	scratch bytes.Buffer
}

// newCSVEncoder returns an encoder writing to w whose first record is the
// header row of kind.
func newCSVEncoder(w *bufio.Writer, kind domain.DataExportKind) (*csvEncoder, error) {
	e := &csvEncoder{w: csv.NewWriter(w)}
	if err := e.w.Write(csvHeader(kind)); err != nil {
		return nil, fmt.Errorf("export: write CSV header: %w", err)
	}
	return e, nil
}

func (e *csvEncoder) encodeAudit(v *domain.AuditEvent) error {
	details, err := e.compactJSON(v.Details)
	if err != nil {
		return fmt.Errorf("export: audit event %s details: %w", v.ID, err)
	}
	evidence := ""
	if len(v.EvidenceDigests) > 0 {
		b, err := json.Marshal(v.EvidenceDigests)
		if err != nil {
			return fmt.Errorf("export: audit event %s evidence digests: %w", v.ID, err)
		}
		evidence = string(b)
	}
	var gov domain.Governance
	if v.Governance != nil {
		gov = *v.Governance
	}
	var corr domain.Correlation
	if v.Correlation != nil {
		corr = *v.Correlation
	}
	var rec domain.Recorder
	if v.RecordedBy != nil {
		rec = *v.RecordedBy
	}
	return e.write(
		v.ID.String(), v.TenantID, v.ProjectID, strconv.FormatUint(v.Sequence, 10), v.Action,
		csvTime(v.OccurredAt), csvTime(v.RecordedAt),
		string(v.Subject.Type), v.Subject.ID, v.Subject.DisplayName, v.Resource.Type, v.Resource.ID,
		string(v.Outcome), string(gov.Risk), gov.Reason, gov.Ticket, gov.ConfirmedBy,
		corr.TraceID, corr.RequestID, corr.CausationID, evidence, details, v.ChainHash.String(),
		strconv.Itoa(v.ChainVersion), rec.Issuer, rec.Subject, rec.TokenID, rec.ClientID,
	)
}

func (e *csvEncoder) encodeAlarm(v *domain.AlarmRecord) error {
	details, err := e.compactJSON(v.Details)
	if err != nil {
		return fmt.Errorf("export: alarm record %s details: %w", v.ID, err)
	}
	return e.write(
		v.ID.String(), v.TenantID, v.ProjectID, csvTime(v.OccurredAt), v.AlarmID, v.DeviceID,
		string(v.Severity), string(v.State), v.Message, details,
	)
}

func (e *csvEncoder) encodeTelemetry(v *domain.TelemetryPoint) error {
	return e.write(
		v.TenantID, v.ProjectID, v.DeviceID, v.Metric, csvTime(v.OccurredAt),
		strconv.FormatFloat(v.Value, 'g', -1, 64), v.Unit,
	)
}

func (e *csvEncoder) flush() error {
	e.w.Flush()
	return e.w.Error()
}

// write emits one record, every cell defused (neutralizeFormula).
func (e *csvEncoder) write(fields ...string) error {
	for i, f := range fields {
		fields[i] = neutralizeFormula(f)
	}
	return e.w.Write(fields)
}

// neutralizeFormula defuses a cell that a spreadsheet would take for a
// formula, as OWASP recommends against CSV injection: a cell that begins
// with '=', '+', '-', '@', a tab or a carriage return gets a leading single
// quote, which spreadsheets show as text and drop. A cell that is a number
// as it stands (a negative value such as "-2.5") is left alone: it cannot
// run anything and stays a number.
func neutralizeFormula(s string) string {
	if s == "" {
		return s
	}
	switch s[0] {
	case '=', '+', '-', '@', '\t', '\r':
		if _, err := strconv.ParseFloat(s, 64); err == nil {
			return s
		}
		return "'" + s
	}
	return s
}

// compactJSON returns raw as compact JSON text, or "" when raw is absent
// (empty or the JSON null). Invalid JSON is an error.
func (e *csvEncoder) compactJSON(raw json.RawMessage) (string, error) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return "", nil
	}
	e.scratch.Reset()
	if err := json.Compact(&e.scratch, trimmed); err != nil {
		return "", err
	}
	return e.scratch.String(), nil
}

// csvTime formats t in UTC as RFC 3339 with nanoseconds (trailing zeros of
// the fraction dropped).
func csvTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
