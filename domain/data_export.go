package domain

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// DataExportKind says which history an export holds.
type DataExportKind string

// The export kinds.
const (
	DataExportAudit     DataExportKind = "AUDIT"
	DataExportAlarm     DataExportKind = "ALARM"
	DataExportTelemetry DataExportKind = "TELEMETRY"
)

// Valid reports whether k is a defined kind.
func (k DataExportKind) Valid() bool {
	return k == DataExportAudit || k == DataExportAlarm || k == DataExportTelemetry
}

// DataExportFormat is an export's encoding.
type DataExportFormat string

// The export formats.
const (
	// DataExportNDJSON is one JSON object per line, in the API's shape.
	DataExportNDJSON DataExportFormat = "NDJSON"
	// DataExportCSV is RFC 4180 CSV with a documented header.
	DataExportCSV DataExportFormat = "CSV"
)

// Valid reports whether f is a defined format.
func (f DataExportFormat) Valid() bool { return f == DataExportNDJSON || f == DataExportCSV }

// DataExportCompression is an export's compression.
type DataExportCompression string

// The compressions.
const (
	DataExportUncompressed DataExportCompression = "NONE"
	DataExportGzip         DataExportCompression = "GZIP"
)

// Valid reports whether c is a defined compression.
func (c DataExportCompression) Valid() bool {
	return c == DataExportUncompressed || c == DataExportGzip
}

// DataExportState is the lifecycle state of an export:
//
//	QUEUED -> RUNNING -> READY
//	                  \-> FAILED
//	QUEUED | READY | FAILED -> EXPIRED
type DataExportState string

// The export states.
const (
	DataExportQueued  DataExportState = "QUEUED"
	DataExportRunning DataExportState = "RUNNING"
	DataExportReady   DataExportState = "READY"
	DataExportFailed  DataExportState = "FAILED"
	DataExportExpired DataExportState = "EXPIRED"
)

// Valid reports whether s is a defined state.
func (s DataExportState) Valid() bool {
	switch s {
	case DataExportQueued, DataExportRunning, DataExportReady, DataExportFailed, DataExportExpired:
		return true
	}
	return false
}

// DataExport is a bounded piece of a project's history written to object
// storage. Its bytes never travel through the API: a READY export has an
// immutable object reference, digest and length, and is fetched through a
// separate download capability.
type DataExport struct {
	ID          uuid.UUID
	TenantID    string
	ProjectID   string
	Kind        DataExportKind
	Format      DataExportFormat
	Compression DataExportCompression
	// From is inclusive, To exclusive (occurredAt of the rows); both zero
	// for an export by sequence range.
	From time.Time
	To   time.Time
	// FromSequence and ToSequence (both inclusive) are the range of an
	// AUDIT export by sequence; nil for an export by time.
	FromSequence *uint64
	ToSequence   *uint64
	// Filter, for an AUDIT export, keeps only the events that pass it
	// within the range (it narrows the range, never widens it); nil for an
	// unfiltered export. A filtered export has no Checkpoint: its rows are
	// not a contiguous piece of the chain.
	Filter      *AuditEventFilter
	State       DataExportState
	RequestedBy string
	RequestedAt time.Time
	StartedAt   *time.Time
	// ProgressRows and ProgressBytes count what a RUNNING export has written
	// so far.
	ProgressRows  uint64
	ProgressBytes uint64
	// ObjectRef, ContentDigest ("sha256:<hex>"), ByteLength and RowCount
	// describe the object of a READY export.
	ObjectRef     string
	ContentDigest string
	ByteLength    uint64
	RowCount      uint64
	ReadyAt       *time.Time
	ExpiresAt     *time.Time
	FailedAt      *time.Time
	// FailureReason says, for a FAILED export, what went wrong and what to
	// do about it.
	FailureReason string
	ExpiredAt     *time.Time
	UpdatedAt     time.Time
	// Checkpoint is the signed checkpoint at the last exported sequence of
	// a READY AUDIT export with rows; nil otherwise.
	Checkpoint *ExportCheckpoint
}

// Start moves a QUEUED export to RUNNING.
func (e *DataExport) Start(now time.Time) error {
	if e.State != DataExportQueued {
		return fmt.Errorf("data export %s: cannot start in state %s", e.ID, e.State)
	}
	e.State = DataExportRunning
	e.StartedAt = &now
	e.ProgressRows, e.ProgressBytes = 0, 0
	e.UpdatedAt = now
	return nil
}

// Complete moves a RUNNING export to READY with its object and, for an
// AUDIT export with rows, the checkpoint at its last sequence (else nil).
func (e *DataExport) Complete(now time.Time, objectRef, digest string, byteLength, rows uint64, expiresAt time.Time, checkpoint *ExportCheckpoint) error {
	if e.State != DataExportRunning {
		return fmt.Errorf("data export %s: cannot complete in state %s", e.ID, e.State)
	}
	e.State = DataExportReady
	e.ObjectRef, e.ContentDigest, e.ByteLength, e.RowCount = objectRef, digest, byteLength, rows
	e.ProgressRows, e.ProgressBytes = rows, byteLength
	e.ReadyAt = &now
	e.ExpiresAt = &expiresAt
	e.Checkpoint = checkpoint
	e.UpdatedAt = now
	return nil
}

// Fail moves a QUEUED or RUNNING export to FAILED with a reason a user can
// act on.
func (e *DataExport) Fail(now time.Time, reason string) error {
	if e.State != DataExportQueued && e.State != DataExportRunning {
		return fmt.Errorf("data export %s: cannot fail in state %s", e.ID, e.State)
	}
	e.State = DataExportFailed
	e.FailureReason = reason
	e.FailedAt = &now
	e.UpdatedAt = now
	return nil
}

// ErrDataExportNotExpirable is returned by Expire for a RUNNING or already
// EXPIRED export.
var ErrDataExportNotExpirable = fmt.Errorf("only a queued, ready or failed export can expire")

// Expire moves a QUEUED, READY or FAILED export to EXPIRED. The caller
// deletes its object.
func (e *DataExport) Expire(now time.Time) error {
	switch e.State {
	case DataExportQueued, DataExportReady, DataExportFailed:
	default:
		return ErrDataExportNotExpirable
	}
	e.State = DataExportExpired
	e.ExpiredAt = &now
	e.UpdatedAt = now
	return nil
}

// Active reports whether the export counts against the tenant's quota of
// queued or running exports.
func (e *DataExport) Active() bool {
	return e.State == DataExportQueued || e.State == DataExportRunning
}

// AlarmSeverity grades an alarm.
type AlarmSeverity string

// The alarm severities.
const (
	AlarmCritical AlarmSeverity = "CRITICAL"
	AlarmMajor    AlarmSeverity = "MAJOR"
	AlarmMinor    AlarmSeverity = "MINOR"
	AlarmWarning  AlarmSeverity = "WARNING"
	AlarmInfo     AlarmSeverity = "INFO"
)

// AlarmState is where an alarm stands at one history entry.
type AlarmState string

// The alarm states.
const (
	AlarmRaised       AlarmState = "RAISED"
	AlarmAcknowledged AlarmState = "ACKNOWLEDGED"
	AlarmCleared      AlarmState = "CLEARED"
)

// AlarmRecord is one entry of a project's alarm history, appended by the
// platform's alarm service.
type AlarmRecord struct {
	TenantID   string          `json:"tenantId"`
	ProjectID  string          `json:"projectId"`
	ID         uuid.UUID       `json:"id"`
	OccurredAt time.Time       `json:"occurredAt"`
	AlarmID    string          `json:"alarmId"`
	DeviceID   string          `json:"deviceId"`
	Severity   AlarmSeverity   `json:"severity"`
	State      AlarmState      `json:"state"`
	Message    string          `json:"message"`
	Details    json.RawMessage `json:"details"`
}

// TelemetryPoint is one measurement of a project's telemetry history,
// appended by the platform's telemetry service.
type TelemetryPoint struct {
	TenantID   string    `json:"tenantId"`
	ProjectID  string    `json:"projectId"`
	DeviceID   string    `json:"deviceId"`
	Metric     string    `json:"metric"`
	OccurredAt time.Time `json:"occurredAt"`
	Value      float64   `json:"value"`
	Unit       string    `json:"unit"`
}

// DataExportFilter selects exports of a project; zero fields match all.
type DataExportFilter struct {
	State DataExportState
	Kind  DataExportKind
}
