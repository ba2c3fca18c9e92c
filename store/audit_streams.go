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
	"github.com/aetheriot/aether-audit/metrics"
	"github.com/aetheriot/aether-audit/store/dbsqlc"
)

// auditStreamFromRow is the domain stream of a stored row.
func auditStreamFromRow(r *dbsqlc.AuditStream) (domain.AuditStream, error) {
	s := domain.AuditStream{
		ID: r.ID, TenantID: r.TenantID, ProjectIDs: r.ProjectIds, AllProjects: r.ProjectIds == nil,
		SinkType: domain.AuditStreamSinkType(r.SinkType), SinkURL: r.SinkUrl, Paused: r.Paused,
		CreatedAt: r.CreatedAt.UTC(), CreatedBy: r.CreatedBy, UpdatedAt: r.UpdatedAt.UTC(), SealedSecret: r.SealedSecret,
	}
	if r.FromSequence != nil {
		v := uint64(*r.FromSequence)
		s.FromSequence = &v
	}
	if r.Filter != nil {
		s.Filter = &domain.AuditEventFilter{}
		if err := json.Unmarshal(r.Filter, s.Filter); err != nil {
			return s, fmt.Errorf("decoding the filter of audit stream %s: %w", r.ID, err)
		}
	}
	return s, nil
}

// oneAuditStream converts the result of a :one stream query.
func oneAuditStream(r dbsqlc.AuditStream, err error) (domain.AuditStream, error) {
	if errors.Is(err, pgx.ErrNoRows) {
		return domain.AuditStream{}, domain.ErrNotFound
	}
	if err != nil {
		return domain.AuditStream{}, fmt.Errorf("reading audit stream: %w", err)
	}
	return auditStreamFromRow(&r)
}

// GetAuditStream returns the tenant's stream (locked until the end of the
// transaction with lock, on a Tx), or domain.ErrNotFound.
func (q *queries) GetAuditStream(ctx context.Context, tenantID string, id uuid.UUID, lock bool) (domain.AuditStream, error) {
	if lock {
		return oneAuditStream(q.sqlc.LockAuditStream(ctx, dbsqlc.LockAuditStreamParams{TenantID: tenantID, ID: id}))
	}
	return oneAuditStream(q.sqlc.GetAuditStream(ctx, dbsqlc.GetAuditStreamParams{TenantID: tenantID, ID: id}))
}

// ListAuditStreams returns up to limit of the tenant's streams by id,
// after after.
func (q *queries) ListAuditStreams(ctx context.Context, tenantID string, after uuid.UUID, limit int) ([]domain.AuditStream, error) {
	rows, err := q.sqlc.ListAuditStreams(ctx, dbsqlc.ListAuditStreamsParams{TenantID: tenantID, AfterID: after, RowLimit: int64(limit)})
	if err != nil {
		return nil, fmt.Errorf("listing audit streams: %w", err)
	}
	out := make([]domain.AuditStream, 0, len(rows))
	for i := range rows {
		s, err := auditStreamFromRow(&rows[i])
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// streamFilterColumn is the filter column of a stream: NULL without one.
func streamFilterColumn(f *domain.AuditEventFilter) ([]byte, error) {
	if f == nil {
		return nil, nil
	}
	return json.Marshal(f)
}

// InsertAuditStream stores a new stream and, for listed projects, their
// cursors at the stream's start.
func (t *Tx) InsertAuditStream(ctx context.Context, s domain.AuditStream) error {
	filter, err := streamFilterColumn(s.Filter)
	if err != nil {
		return err
	}
	var from *int64
	if s.FromSequence != nil {
		from = int64Ptr(s.FromSequence)
	}
	var projects []string
	if !s.AllProjects {
		projects = s.ProjectIDs
	}
	if err := t.sqlc.InsertAuditStream(ctx, dbsqlc.InsertAuditStreamParams{
		ID: s.ID, TenantID: s.TenantID, ProjectIds: projects, SinkType: string(s.SinkType), SinkUrl: s.SinkURL,
		SealedSecret: s.SealedSecret, Filter: filter, FromSequence: from, Paused: s.Paused,
		CreatedAt: s.CreatedAt, CreatedBy: s.CreatedBy, UpdatedAt: s.UpdatedAt,
	}); err != nil {
		return fmt.Errorf("inserting audit stream: %w", err)
	}
	if s.AllProjects {
		return nil
	}
	if err := t.sqlc.InsertAuditStreamCursors(ctx, dbsqlc.InsertAuditStreamCursorsParams{
		StreamID: s.ID, TenantID: s.TenantID, AckedSequence: clampInt64(s.StartCursor()), ProjectIds: s.ProjectIDs,
	}); err != nil {
		return fmt.Errorf("inserting audit stream cursors: %w", err)
	}
	return nil
}

// UpdateAuditStream saves a stream's sink URL, sealed secret, filter and
// pause.
func (t *Tx) UpdateAuditStream(ctx context.Context, s domain.AuditStream) error {
	filter, err := streamFilterColumn(s.Filter)
	if err != nil {
		return err
	}
	if err := t.sqlc.UpdateAuditStream(ctx, dbsqlc.UpdateAuditStreamParams{
		TenantID: s.TenantID, ID: s.ID, SinkUrl: s.SinkURL, SealedSecret: s.SealedSecret, Filter: filter,
		Paused: s.Paused, UpdatedAt: s.UpdatedAt,
	}); err != nil {
		return fmt.Errorf("updating audit stream: %w", err)
	}
	if !s.Paused {
		if err := t.sqlc.RetryAuditStreamCursorsNow(ctx, s.ID); err != nil {
			return fmt.Errorf("updating audit stream cursors: %w", err)
		}
	}
	return nil
}

// DeleteAuditStream deletes a stream and its cursors.
func (t *Tx) DeleteAuditStream(ctx context.Context, tenantID string, id uuid.UUID) error {
	if err := t.sqlc.DeleteAuditStream(ctx, dbsqlc.DeleteAuditStreamParams{TenantID: tenantID, ID: id}); err != nil {
		return fmt.Errorf("deleting audit stream: %w", err)
	}
	return nil
}

// cursorOf is the domain cursor of a row's columns.
func cursorOf(streamID uuid.UUID, projectID, tenantID string, acked int64, lastDelivery *time.Time, lastError *string, lastErrorAt *time.Time, failures int32, retryAt *time.Time) domain.AuditStreamCursor {
	c := domain.AuditStreamCursor{StreamID: streamID, ProjectID: projectID, TenantID: tenantID, Acked: uint64(acked),
		LastDeliveryAt: utcPtr(lastDelivery), LastErrorAt: utcPtr(lastErrorAt), Failures: int(failures), RetryAt: utcPtr(retryAt)}
	if lastError != nil {
		c.LastError = *lastError
	}
	return c
}

// pendingSince is when the oldest unacknowledged event was recorded; nil
// when the cursor is at the head (the query then answers its now).
func pendingSince(head, acked int64, oldest time.Time) *time.Time {
	if head <= acked {
		return nil
	}
	t := oldest.UTC()
	return &t
}

// AuditStreamHealth returns the stream's cursors with their project's head
// and the recording time of the oldest event not yet acknowledged, by
// project.
func (q *queries) AuditStreamHealth(ctx context.Context, streamID uuid.UUID) ([]domain.AuditStreamHealth, error) {
	rows, err := q.sqlc.ListAuditStreamHealth(ctx, streamID)
	if err != nil {
		return nil, fmt.Errorf("reading audit stream health: %w", err)
	}
	out := make([]domain.AuditStreamHealth, len(rows))
	for i, r := range rows {
		out[i] = domain.AuditStreamHealth{
			AuditStreamCursor: cursorOf(r.StreamID, r.ProjectID, r.TenantID, r.AckedSequence, r.LastDeliveryAt, r.LastError, r.LastErrorAt, r.Failures, r.RetryAt),
			Head:              uint64(r.Head), OldestPendingAt: pendingSince(r.Head, r.AckedSequence, r.OldestPendingAt),
		}
	}
	return out, nil
}

// AllAuditStreamLag returns every stream's lag in each of its projects at
// now, for /metrics.
func (s *Store) AllAuditStreamLag(ctx context.Context) ([]metrics.StreamLag, error) {
	rows, err := s.sqlc.ListAllAuditStreamLag(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading audit stream lag: %w", err)
	}
	now := time.Now()
	out := make([]metrics.StreamLag, len(rows))
	for i, r := range rows {
		h := domain.AuditStreamHealth{AuditStreamCursor: domain.AuditStreamCursor{Acked: uint64(r.AckedSequence)},
			Head: uint64(r.Head), OldestPendingAt: pendingSince(r.Head, r.AckedSequence, r.OldestPendingAt)}
		out[i] = metrics.StreamLag{TenantID: r.TenantID, StreamID: r.StreamID.String(), ProjectID: r.ProjectID,
			Events: h.LagEvents(), Seconds: h.LagSeconds(now)}
	}
	return out, nil
}

// EnsureAuditStreamCursors gives every allProjects stream a cursor in each
// project of its tenant that has a head and none yet, and reports whether
// any stream cursor exists.
func (q *queries) EnsureAuditStreamCursors(ctx context.Context) (bool, error) {
	exist, err := q.sqlc.EnsureAllProjectsAuditStreamCursors(ctx)
	if err != nil {
		return false, fmt.Errorf("creating audit stream cursors: %w", err)
	}
	return exist, nil
}

// ClaimAuditStreamCursors leases up to limit cursors with work to owner
// until leaseUntil (see the query).
func (q *queries) ClaimAuditStreamCursors(ctx context.Context, owner uuid.UUID, now, leaseUntil time.Time, limit int) ([]domain.AuditStreamCursor, error) {
	rows, err := q.sqlc.ClaimAuditStreamCursors(ctx, dbsqlc.ClaimAuditStreamCursorsParams{
		Now: now, RowLimit: int64(limit), Owner: &owner, LeaseUntil: leaseUntil,
	})
	if err != nil {
		return nil, fmt.Errorf("claiming audit stream cursors: %w", err)
	}
	out := make([]domain.AuditStreamCursor, len(rows))
	for i, r := range rows {
		out[i] = cursorOf(r.StreamID, r.ProjectID, r.TenantID, r.AckedSequence, r.LastDeliveryAt, r.LastError, r.LastErrorAt, r.Failures, r.RetryAt)
	}
	return out, nil
}

// AdvanceAuditStreamCursor moves owner's leased cursor c from c.Acked to
// through and extends the lease; false when the lease was lost, the cursor
// moved or the stream is gone.
func (q *queries) AdvanceAuditStreamCursor(ctx context.Context, c domain.AuditStreamCursor, through uint64, owner uuid.UUID, now, leaseUntil time.Time) (bool, error) {
	n, err := q.sqlc.AdvanceAuditStreamCursor(ctx, dbsqlc.AdvanceAuditStreamCursorParams{
		Through: clampInt64(through), Now: now, LeaseUntil: leaseUntil, StreamID: c.StreamID, ProjectID: c.ProjectID,
		Owner: &owner, AckedSequence: clampInt64(c.Acked),
	})
	if err != nil {
		return false, fmt.Errorf("advancing audit stream cursor: %w", err)
	}
	return n == 1, nil
}

// FailAuditStreamCursor records a failed delivery of owner's leased cursor
// and releases it until retryAt.
func (q *queries) FailAuditStreamCursor(ctx context.Context, c domain.AuditStreamCursor, owner uuid.UUID, message string, now, retryAt time.Time) error {
	if _, err := q.sqlc.FailAuditStreamCursor(ctx, dbsqlc.FailAuditStreamCursorParams{
		LastError: &message, Now: now, RetryAt: retryAt, StreamID: c.StreamID, ProjectID: c.ProjectID, Owner: &owner,
	}); err != nil {
		return fmt.Errorf("recording an audit stream failure: %w", err)
	}
	return nil
}

// ReleaseAuditStreamCursor gives owner's leased cursor back.
func (q *queries) ReleaseAuditStreamCursor(ctx context.Context, c domain.AuditStreamCursor, owner uuid.UUID) error {
	if err := q.sqlc.ReleaseAuditStreamCursor(ctx, dbsqlc.ReleaseAuditStreamCursorParams{StreamID: c.StreamID, ProjectID: c.ProjectID, Owner: &owner}); err != nil {
		return fmt.Errorf("releasing an audit stream cursor: %w", err)
	}
	return nil
}
