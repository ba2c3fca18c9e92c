package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/store/dbsqlc"
)

// DataExportsChannel is the PostgreSQL notification channel on which every
// change of a data export is announced (payload: DataExportNotification),
// for live subscribers.
const DataExportsChannel = "aether_data_exports"

// DataExportNotification is the payload on DataExportsChannel: which export
// changed, never its content.
type DataExportNotification struct {
	TenantID string    `json:"t"`
	ExportID uuid.UUID `json:"e"`
}

// dataExportColumns are the columns of dbsqlc.DataExport, for the filtered
// list, whose conditions depend on the filter (store.filtered).
const dataExportColumns = `tenant_id, project_id, id, kind, format, compression, range_from, range_to, state,
	requested_by, requested_at, started_at, progress_rows, progress_bytes, object_ref, content_digest, byte_length,
	row_count, ready_at, expires_at, failed_at, failure_reason, expired_at, updated_at,
	from_sequence, to_sequence, checkpoint_sequence, checkpoint_jws, filter`

// dataExportFromRow is the domain export of a stored row.
func dataExportFromRow(r *dbsqlc.DataExport) (domain.DataExport, error) {
	e := domain.DataExport{TenantID: r.TenantID, ProjectID: r.ProjectID, ID: r.ID,
		Kind: domain.DataExportKind(r.Kind), Format: domain.DataExportFormat(r.Format),
		Compression: domain.DataExportCompression(r.Compression), FromSequence: uint64Ptr(r.FromSequence), ToSequence: uint64Ptr(r.ToSequence),
		State: domain.DataExportState(r.State), RequestedBy: r.RequestedBy, RequestedAt: r.RequestedAt.UTC(),
		StartedAt: utcPtr(r.StartedAt), ProgressRows: uint64(r.ProgressRows), ProgressBytes: uint64(r.ProgressBytes),
		ObjectRef: r.ObjectRef, ContentDigest: r.ContentDigest, ByteLength: uint64(r.ByteLength),
		RowCount: uint64(r.RowCount), ReadyAt: utcPtr(r.ReadyAt), ExpiresAt: utcPtr(r.ExpiresAt),
		FailedAt: utcPtr(r.FailedAt), FailureReason: r.FailureReason, ExpiredAt: utcPtr(r.ExpiredAt),
		UpdatedAt: r.UpdatedAt.UTC()}
	if r.RangeFrom != nil && r.RangeTo != nil {
		e.From, e.To = r.RangeFrom.UTC(), r.RangeTo.UTC()
	}
	if r.CheckpointSequence != nil && r.CheckpointJws != nil {
		e.Checkpoint = &domain.ExportCheckpoint{Sequence: uint64(*r.CheckpointSequence), JWS: *r.CheckpointJws}
	}
	if r.Filter != nil {
		e.Filter = &domain.AuditEventFilter{}
		if err := json.Unmarshal(r.Filter, e.Filter); err != nil {
			return e, fmt.Errorf("decoding the filter of data export %s: %w", r.ID, err)
		}
	}
	return e, nil
}

// filterColumn is the filter column's value of an export: NULL when
// unfiltered.
func filterColumn(f *domain.AuditEventFilter) ([]byte, error) {
	if f == nil {
		return nil, nil
	}
	return json.Marshal(f)
}

// uint64Ptr converts a nullable bigint.
func uint64Ptr(v *int64) *uint64 {
	if v == nil {
		return nil
	}
	u := uint64(*v)
	return &u
}

// int64Ptr converts a nullable sequence for a bigint column.
func int64Ptr(v *uint64) *int64 {
	if v == nil {
		return nil
	}
	i := clampInt64(*v)
	return &i
}

// timeOrNull is a time column's value: NULL for the zero time.
func timeOrNull(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// checkpointColumns are an export's checkpoint columns' values.
func checkpointColumns(c *domain.ExportCheckpoint) (*int64, *string) {
	if c == nil {
		return nil, nil
	}
	seq := clampInt64(c.Sequence)
	return &seq, &c.JWS
}

// dataExportsFromRows converts rows with dataExportFromRow.
func dataExportsFromRows(rows []dbsqlc.DataExport) ([]domain.DataExport, error) {
	out := make([]domain.DataExport, len(rows))
	for i := range rows {
		var err error
		if out[i], err = dataExportFromRow(&rows[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// scanDataExport decodes a whole export from the filtered list, which sqlc
// does not run.
func scanDataExport(row pgx.CollectableRow) (domain.DataExport, error) {
	var r dbsqlc.DataExport
	err := row.Scan(&r.TenantID, &r.ProjectID, &r.ID, &r.Kind, &r.Format, &r.Compression, &r.RangeFrom, &r.RangeTo,
		&r.State, &r.RequestedBy, &r.RequestedAt, &r.StartedAt, &r.ProgressRows, &r.ProgressBytes, &r.ObjectRef,
		&r.ContentDigest, &r.ByteLength, &r.RowCount, &r.ReadyAt, &r.ExpiresAt, &r.FailedAt, &r.FailureReason,
		&r.ExpiredAt, &r.UpdatedAt, &r.FromSequence, &r.ToSequence, &r.CheckpointSequence, &r.CheckpointJws, &r.Filter)
	if err != nil {
		return domain.DataExport{}, err
	}
	return dataExportFromRow(&r)
}

func dataExportValues(e *domain.DataExport) ([]any, error) {
	cpSeq, cpJWS := checkpointColumns(e.Checkpoint)
	filter, err := filterColumn(e.Filter)
	if err != nil {
		return nil, fmt.Errorf("encoding the export's filter: %w", err)
	}
	return []any{e.TenantID, e.ProjectID, e.ID, string(e.Kind), string(e.Format), string(e.Compression), timeOrNull(e.From), timeOrNull(e.To),
		string(e.State), e.RequestedBy, e.RequestedAt, e.StartedAt, clampInt64(e.ProgressRows), clampInt64(e.ProgressBytes),
		e.ObjectRef, e.ContentDigest, clampInt64(e.ByteLength), clampInt64(e.RowCount), e.ReadyAt, e.ExpiresAt,
		e.FailedAt, e.FailureReason, e.ExpiredAt, e.UpdatedAt, int64Ptr(e.FromSequence), int64Ptr(e.ToSequence), cpSeq, cpJWS, filter}, nil
}

// notifyDataExport queues the change notification of an export in batch b.
func notifyDataExport(b *pgx.Batch, tenantID string, id uuid.UUID) {
	note, _ := json.Marshal(DataExportNotification{TenantID: tenantID, ExportID: id})
	b.Queue(dbsqlc.NotifyDataExport, DataExportsChannel, string(note))
}

// InsertDataExport stores a new export and announces it.
func (t *Tx) InsertDataExport(ctx context.Context, e domain.DataExport) error {
	values, err := dataExportValues(&e)
	if err != nil {
		return err
	}
	b := &pgx.Batch{}
	b.Queue(dbsqlc.InsertDataExport, values...)
	notifyDataExport(b, e.TenantID, e.ID)
	if err := t.tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("inserting data export: %w", err)
	}
	return nil
}

// UpdateDataExport persists an export changed by the domain and announces
// the change.
func (t *Tx) UpdateDataExport(ctx context.Context, e domain.DataExport) error {
	b := &pgx.Batch{}
	// Only the lifecycle columns change; the request's are immutable.
	cpSeq, cpJWS := checkpointColumns(e.Checkpoint)
	b.Queue(dbsqlc.UpdateDataExport, e.TenantID, e.ID, string(e.State), e.StartedAt, clampInt64(e.ProgressRows),
		clampInt64(e.ProgressBytes), e.ObjectRef, e.ContentDigest, clampInt64(e.ByteLength), clampInt64(e.RowCount),
		e.ReadyAt, e.ExpiresAt, e.FailedAt, e.FailureReason, e.ExpiredAt, e.UpdatedAt, cpSeq, cpJWS)
	notifyDataExport(b, e.TenantID, e.ID)
	if err := t.tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("updating data export: %w", err)
	}
	return nil
}

// UpdateDataExportProgress records the progress of a RUNNING export and
// announces it.
func (q *queries) UpdateDataExportProgress(ctx context.Context, tenantID string, id uuid.UUID, rows, bytes uint64, now time.Time) error {
	b := &pgx.Batch{}
	b.Queue(dbsqlc.UpdateDataExportProgress, tenantID, id, clampInt64(rows), clampInt64(bytes), now)
	notifyDataExport(b, tenantID, id)
	if err := q.db.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("updating data export progress: %w", err)
	}
	return nil
}

// GetDataExport returns an export of the tenant; ErrNotFound when the tenant
// has none with this id. With lock, the row stays locked for the rest of the
// transaction.
func (q *queries) GetDataExport(ctx context.Context, tenantID string, id uuid.UUID, lock bool) (domain.DataExport, error) {
	var (
		r   dbsqlc.DataExport
		err error
	)
	if lock {
		r, err = q.sqlc.LockDataExport(ctx, dbsqlc.LockDataExportParams{TenantID: tenantID, ID: id})
	} else {
		r, err = q.sqlc.GetDataExport(ctx, dbsqlc.GetDataExportParams{TenantID: tenantID, ID: id})
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return domain.DataExport{}, ErrNotFound
	}
	if err != nil {
		return domain.DataExport{}, fmt.Errorf("reading data export: %w", err)
	}
	return dataExportFromRow(&r)
}

// LockTenantDataExports serializes, until the end of the transaction, the
// requests of a tenant's exports, so that its quota of active exports is
// counted exactly.
func (t *Tx) LockTenantDataExports(ctx context.Context, tenantID string) error {
	if err := t.sqlc.LockTenantDataExports(ctx, tenantID); err != nil {
		return fmt.Errorf("locking tenant exports: %w", err)
	}
	return nil
}

// CountActiveDataExports counts the tenant's QUEUED and RUNNING exports.
func (q *queries) CountActiveDataExports(ctx context.Context, tenantID string) (int, error) {
	n, err := q.sqlc.CountActiveDataExports(ctx, tenantID)
	if err != nil {
		return 0, fmt.Errorf("counting active exports: %w", err)
	}
	return int(n), nil
}

// ListDataExports returns up to limit exports of tenant/project matching f,
// newest first, with ids before before (uuid.Nil: from the newest).
func (q *queries) ListDataExports(ctx context.Context, tenantID, projectID string, f domain.DataExportFilter, before uuid.UUID, limit int) ([]domain.DataExport, error) {
	fq := newFiltered(`SELECT `+dataExportColumns+` FROM data_exports WHERE tenant_id = $1 AND project_id = $2`, tenantID, projectID)
	if before != uuid.Nil {
		fq.and("id < $?", before)
	}
	if f.State != "" {
		fq.and("state = $?", string(f.State))
	}
	if f.Kind != "" {
		fq.and("kind = $?", string(f.Kind))
	}
	query, args := fq.page("id DESC", limit)
	rows, _ := q.db.Query(ctx, query, args...)
	out, err := pgx.CollectRows(rows, scanDataExport)
	if err != nil {
		return nil, fmt.Errorf("listing data exports: %w", err)
	}
	return out, nil
}

// DueDataExportExpiries returns up to limit exports (of any tenant) due to
// expire at now: READY ones whose expiresAt has passed, and FAILED ones that
// failed before failedBefore.
func (q *queries) DueDataExportExpiries(ctx context.Context, now, failedBefore time.Time, limit int) ([]domain.DataExport, error) {
	rows, err := q.sqlc.DueDataExportExpiries(ctx, dbsqlc.DueDataExportExpiriesParams{
		Now: now, FailedBefore: failedBefore, RowLimit: int64(limit)})
	if err != nil {
		return nil, fmt.Errorf("reading due export expiries: %w", err)
	}
	return dataExportsFromRows(rows)
}

// DeleteExpiredDataExports deletes up to limit EXPIRED exports (of any
// tenant) that expired before expiredBefore and returns how many.
func (q *queries) DeleteExpiredDataExports(ctx context.Context, expiredBefore time.Time, limit int) (int64, error) {
	n, err := q.sqlc.DeleteExpiredDataExports(ctx, dbsqlc.DeleteExpiredDataExportsParams{
		ExpiredBefore: expiredBefore, RowLimit: int64(limit)})
	if err != nil {
		return 0, fmt.Errorf("deleting expired exports: %w", err)
	}
	return n, nil
}

// StreamAuditEventsBySequence calls fn for each audit event of
// tenant/project with sequence in [from, to] that passes f (nil: every
// event), in sequence order, streaming as StreamAuditEventsByTime does (fn
// borrows the row's buffer).
func (q *queries) StreamAuditEventsBySequence(ctx context.Context, tenantID, projectID string, from, to uint64, f *domain.AuditEventFilter, fn func(*domain.AuditEvent) error) error {
	return q.streamSegments(ctx, tenantID, projectID, from, to, f, -1, fn)
}

// StreamAuditEventsAfter calls fn for the first limit events of
// tenant/project with sequence in (after, through] that pass f (nil: every
// event), in sequence order, streaming as StreamAuditEventsByTime does (fn
// borrows the row's buffer): a batch of an audit stream.
func (q *queries) StreamAuditEventsAfter(ctx context.Context, tenantID, projectID string, after, through uint64, f *domain.AuditEventFilter, limit int, fn func(*domain.AuditEvent) error) error {
	if f == nil {
		// Sequences are dense: the first limit events are those up to
		// after+limit.
		through = min(through, after+uint64(limit))
	}
	return q.streamSegments(ctx, tenantID, projectID, after+1, through, f, limit, fn)
}

// streamSegments streams the events of tenant/project with sequence in
// [from, to] that pass f (nil: every event), at most limit of them (-1: no
// limit), in sequence order, one run of the project's sequences at a time
// (auditSegment), each statement within the run's recorded_at bounds.
func (q *queries) streamSegments(ctx context.Context, tenantID, projectID string, from, to uint64, f *domain.AuditEventFilter, limit int, fn func(*domain.AuditEvent) error) error {
	segs, err := q.auditSegments(ctx, tenantID, projectID)
	if err != nil {
		return fmt.Errorf("streaming audit events: %w", err)
	}
	n := 0
	counted := func(e *domain.AuditEvent) error { n++; return fn(e) }
	return segmentsIn(segs, from, to, false, func(s auditSegment) (bool, error) {
		if f == nil {
			err := q.streamAuditEvents(ctx, counted, dbsqlc.ScanAuditEvents, tenantID, projectID,
				clampInt64(s.first), clampInt64(s.last), s.from, s.to)
			return err == nil, err
		}
		fq := filteredStream(tenantID, projectID, *f)
		fq.and("sequence >= $?", clampInt64(s.first))
		fq.and("sequence <= $?", clampInt64(s.last))
		andSegment(fq, s)
		var query string
		var args []any
		if limit < 0 {
			query, args = fq.ordered("sequence")
		} else {
			query, args = fq.page("sequence", limit-n)
		}
		if err := q.streamAuditEvents(ctx, counted, query, args...); err != nil {
			return false, err
		}
		return limit < 0 || n < limit, nil
	})
}

// filteredStream starts the query of a filtered export's stream: whole
// events (auditEventColumns, which the raw decoder reads) of tenant/project
// that pass f, through the search's conditions (andAuditEventFilter). The
// caller adds the export's range, which f narrows but never widens (both
// must hold), and the order.
//
// Hand-written, not in queries/: its conditions depend on the filter.
func filteredStream(tenantID, projectID string, f domain.AuditEventFilter) *filtered {
	fq := newFiltered(`SELECT `+auditEventColumns+` FROM audit_events WHERE tenant_id = $1 AND project_id = $2`, tenantID, projectID)
	andAuditEventFilter(fq, f)
	return fq
}

// streamAuditEvents runs a query of whole events and calls fn for each row,
// decoding the wire's binary values into one reused event where it can.
func (q *queries) streamAuditEvents(ctx context.Context, fn func(*domain.AuditEvent) error, query string, args ...any) error {
	rows, err := q.db.Query(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("streaming audit events: %w", err)
	}
	defer rows.Close()
	fields := rows.FieldDescriptions()
	raw := rawDecodable(fields)
	jsonbBinary := raw && fields[20].Format == pgx.BinaryFormatCode
	var dec rawEventDecoder
	for rows.Next() {
		if raw {
			if e, ok := dec.decode(rows.RawValues(), jsonbBinary); ok {
				if err := fn(e); err != nil {
					return err
				}
				continue
			}
		}
		e, err := scanAuditEvent(rows)
		if err != nil {
			return fmt.Errorf("streaming audit events: %w", err)
		}
		if err := fn(&e); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("streaming audit events: %w", err)
	}
	return nil
}

// StreamAlarmHistory calls fn for each alarm record of tenant/project with
// occurredAt in [from, to), in time order, streaming.
func (q *queries) StreamAlarmHistory(ctx context.Context, tenantID, projectID string, from, to time.Time, fn func(*domain.AlarmRecord) error) error {
	rows, err := q.db.Query(ctx, dbsqlc.StreamAlarmHistory, tenantID, projectID, from, to)
	if err != nil {
		return fmt.Errorf("streaming alarm history: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var r dbsqlc.StreamAlarmHistoryRow
		if err := rows.Scan(&r.TenantID, &r.ProjectID, &r.ID, &r.OccurredAt, &r.AlarmID, &r.DeviceID, &r.Severity, &r.State,
			&r.Message, &r.Details); err != nil {
			return fmt.Errorf("streaming alarm history: %w", err)
		}
		a := alarmFromRow(&r)
		if err := fn(&a); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("streaming alarm history: %w", err)
	}
	return nil
}

// alarmFromRow is the domain alarm record of a stored row.
func alarmFromRow(r *dbsqlc.StreamAlarmHistoryRow) domain.AlarmRecord {
	return domain.AlarmRecord{TenantID: r.TenantID, ProjectID: r.ProjectID, ID: r.ID, OccurredAt: r.OccurredAt.UTC(),
		AlarmID: r.AlarmID, DeviceID: r.DeviceID, Severity: domain.AlarmSeverity(r.Severity),
		State: domain.AlarmState(r.State), Message: r.Message, Details: json.RawMessage(r.Details)}
}

// StreamTelemetryHistory calls fn for each telemetry point of
// tenant/project with occurredAt in [from, to), in time order, streaming.
func (q *queries) StreamTelemetryHistory(ctx context.Context, tenantID, projectID string, from, to time.Time, fn func(*domain.TelemetryPoint) error) error {
	rows, err := q.db.Query(ctx, dbsqlc.StreamTelemetryHistory, tenantID, projectID, from, to)
	if err != nil {
		return fmt.Errorf("streaming telemetry history: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var r dbsqlc.TelemetryHistory
		if err := rows.Scan(&r.TenantID, &r.ProjectID, &r.DeviceID, &r.Metric, &r.OccurredAt, &r.Value, &r.Unit); err != nil {
			return fmt.Errorf("streaming telemetry history: %w", err)
		}
		p := telemetryFromRow(&r)
		if err := fn(&p); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("streaming telemetry history: %w", err)
	}
	return nil
}

// telemetryFromRow is the domain telemetry point of a stored row.
func telemetryFromRow(r *dbsqlc.TelemetryHistory) domain.TelemetryPoint {
	return domain.TelemetryPoint{TenantID: r.TenantID, ProjectID: r.ProjectID, DeviceID: r.DeviceID, Metric: r.Metric,
		OccurredAt: r.OccurredAt.UTC(), Value: r.Value, Unit: r.Unit}
}

// AppendAlarmHistory inserts alarm records; a record whose id the tenant
// already has is skipped (idempotent retries). It returns how many it
// inserted.
//
// Hand-written, not in queries/: sqlc cannot type its multi-argument unnest.
func (q *queries) AppendAlarmHistory(ctx context.Context, records []domain.AlarmRecord) (int64, error) {
	n := len(records)
	tenants, projects, alarmIDs, devices, severities, states, messages, details :=
		make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	ids, times := make([]uuid.UUID, n), make([]time.Time, n)
	for i, r := range records {
		tenants[i], projects[i], alarmIDs[i], devices[i] = r.TenantID, r.ProjectID, r.AlarmID, r.DeviceID
		severities[i], states[i], messages[i], details[i] = string(r.Severity), string(r.State), r.Message, string(r.Details)
		ids[i], times[i] = r.ID, r.OccurredAt
	}
	tag, err := q.db.Exec(ctx, `INSERT INTO alarm_history (tenant_id, project_id, id, occurred_at, alarm_id, device_id,
			severity, state, message, details)
		SELECT t, p, i, o, a, d, sv, st, m, dt::jsonb FROM unnest($1::text[], $2::text[], $3::uuid[], $4::timestamptz[],
			$5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[]) AS u(t, p, i, o, a, d, sv, st, m, dt)
		ON CONFLICT DO NOTHING`, tenants, projects, ids, times, alarmIDs, devices, severities, states, messages, details)
	if err != nil {
		return 0, fmt.Errorf("appending alarm history: %w", err)
	}
	return tag.RowsAffected(), nil
}

// AppendTelemetryHistory inserts telemetry points; a point the project
// already has (same time, device and metric) is skipped. It returns how many
// it inserted.
//
// Hand-written, not in queries/: sqlc cannot type its multi-argument unnest.
func (q *queries) AppendTelemetryHistory(ctx context.Context, points []domain.TelemetryPoint) (int64, error) {
	n := len(points)
	tenants, projects, devices, metrics, units := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	times, values := make([]time.Time, n), make([]float64, n)
	for i, p := range points {
		tenants[i], projects[i], devices[i], metrics[i], units[i] = p.TenantID, p.ProjectID, p.DeviceID, p.Metric, p.Unit
		times[i], values[i] = p.OccurredAt, p.Value
	}
	tag, err := q.db.Exec(ctx, `INSERT INTO telemetry_history (tenant_id, project_id, device_id, metric, occurred_at, value, unit)
		SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::timestamptz[], $6::float8[], $7::text[])
		ON CONFLICT DO NOTHING`, tenants, projects, devices, metrics, times, values, units)
	if err != nil {
		return 0, fmt.Errorf("appending telemetry history: %w", err)
	}
	return tag.RowsAffected(), nil
}
