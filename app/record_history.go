package app

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/aetheriot/aether-audit/domain"
)

// MaxHistoryBatch bounds the entries of one history append.
const MaxHistoryBatch = 5000

// Field limits of alarm and telemetry history entries, in bytes.
const (
	maxHistoryID      = 256
	maxAlarmMessage   = 1024
	maxTelemetryUnit  = 32
	maxHistoryDetails = 16384
)

// AppendAlarmHistory appends a batch of a project's alarm history, all or
// nothing, for the platform's alarm service (history:write). An entry with
// an id the tenant already has is skipped, so a retried batch does not
// duplicate; entries without an id get one. It returns how many were new.
func (a *App) AppendAlarmHistory(ctx context.Context, id Identity, projectID string, records []domain.AlarmRecord) (_ int64, err error) {
	ctx, span := a.startCommand(ctx, "AppendAlarmHistory")
	defer func() { a.endCommand(span, err) }()
	if err := a.authorizeCommand(id, PermissionHistoryWrite, projectID); err != nil {
		return 0, err
	}
	if err := checkBatch("entries", len(records)); err != nil {
		return 0, err
	}
	now := a.now()
	out := make([]domain.AlarmRecord, len(records))
	for i, r := range records {
		f := "entries[" + strconv.Itoa(i) + "]"
		if err := firstError(
			domain.ValidateText(f+".alarmId", r.AlarmID, maxHistoryID, true, true),
			domain.ValidateText(f+".deviceId", r.DeviceID, maxHistoryID, true, true),
			domain.ValidateText(f+".message", r.Message, maxAlarmMessage, false, false),
		); err != nil {
			return 0, err
		}
		switch {
		case !validSeverity(r.Severity):
			return 0, badInput(f+".severity", "must be CRITICAL, MAJOR, MINOR, WARNING or INFO")
		case r.State != domain.AlarmRaised && r.State != domain.AlarmAcknowledged && r.State != domain.AlarmCleared:
			return 0, badInput(f+".state", "must be RAISED, ACKNOWLEDGED or CLEARED")
		}
		if err := checkOccurredAt(f+".occurredAt", r.OccurredAt, now); err != nil {
			return 0, err
		}
		if len(r.Details) == 0 {
			r.Details = json.RawMessage(`{}`)
		}
		var obj map[string]any
		// PostgreSQL's jsonb refuses the NUL character.
		if len(r.Details) > maxHistoryDetails || json.Unmarshal(r.Details, &obj) != nil || obj == nil ||
			bytes.Contains(r.Details, []byte(`\u0000`)) {
			return 0, badInput(f+".details", fmt.Sprintf("must be a JSON object of at most %d bytes", maxHistoryDetails))
		}
		if r.ID == uuid.Nil {
			r.ID = uuid.Must(uuid.NewV7())
		}
		r.TenantID, r.ProjectID = id.TenantID, projectID
		r.OccurredAt = r.OccurredAt.UTC().Truncate(time.Microsecond)
		out[i] = r
	}
	return a.store.AppendAlarmHistory(ctx, out)
}

// AppendTelemetryHistory appends a batch of a project's telemetry history,
// all or nothing, for the platform's telemetry service (history:write). A
// point the project already has (same time, device and metric) is skipped.
// It returns how many were new.
func (a *App) AppendTelemetryHistory(ctx context.Context, id Identity, projectID string, points []domain.TelemetryPoint) (_ int64, err error) {
	ctx, span := a.startCommand(ctx, "AppendTelemetryHistory")
	defer func() { a.endCommand(span, err) }()
	if err := a.authorizeCommand(id, PermissionHistoryWrite, projectID); err != nil {
		return 0, err
	}
	if err := checkBatch("points", len(points)); err != nil {
		return 0, err
	}
	now := a.now()
	out := make([]domain.TelemetryPoint, len(points))
	for i, p := range points {
		f := "points[" + strconv.Itoa(i) + "]"
		if err := firstError(
			domain.ValidateText(f+".deviceId", p.DeviceID, maxHistoryID, true, true),
			domain.ValidateText(f+".metric", p.Metric, maxHistoryID, true, true),
			domain.ValidateText(f+".unit", p.Unit, maxTelemetryUnit, false, true),
		); err != nil {
			return 0, err
		}
		if math.IsNaN(p.Value) || math.IsInf(p.Value, 0) {
			return 0, badInput(f+".value", "must be a finite number")
		}
		if err := checkOccurredAt(f+".occurredAt", p.OccurredAt, now); err != nil {
			return 0, err
		}
		p.TenantID, p.ProjectID = id.TenantID, projectID
		p.OccurredAt = p.OccurredAt.UTC().Truncate(time.Microsecond)
		out[i] = p
	}
	return a.store.AppendTelemetryHistory(ctx, out)
}

func checkBatch(field string, n int) error {
	if n == 0 {
		return badInput(field, "must contain at least one entry")
	}
	if n > MaxHistoryBatch {
		return badInput(field, fmt.Sprintf("must contain at most %d entries", MaxHistoryBatch))
	}
	return nil
}

func checkOccurredAt(field string, t, now time.Time) error {
	if t.IsZero() || t.Before(time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)) || t.After(now.Add(domain.MaxOccurredAtSkew)) {
		return badInput(field, "must be a time between 1970 and a day from now")
	}
	return nil
}

func validSeverity(s domain.AlarmSeverity) bool {
	switch s {
	case domain.AlarmCritical, domain.AlarmMajor, domain.AlarmMinor, domain.AlarmWarning, domain.AlarmInfo:
		return true
	}
	return false
}

// firstError returns the first non-nil error.
func firstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
