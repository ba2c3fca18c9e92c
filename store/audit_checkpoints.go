package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/store/dbsqlc"
)

// checkpointFromRow is the domain checkpoint of a stored row.
func checkpointFromRow(r *dbsqlc.AuditCheckpoint) domain.AuditCheckpoint {
	c := domain.AuditCheckpoint{TenantID: r.TenantID, ProjectID: r.ProjectID, Sequence: uint64(r.Sequence),
		IssueNumber: uint64(r.IssueNumber), PurgedThrough: uint64(r.PurgedThrough), KeyID: r.KeyID, JWS: r.Jws,
		IssuedAt: r.IssuedAt.UTC()}
	copy(c.ChainHash[:], r.ChainHash)
	copy(c.AnchorHash[:], r.AnchorHash)
	copy(c.JWSDigest[:], r.JwsDigest)
	if r.PreviousCheckpoint != nil {
		var h domain.Hash
		copy(h[:], r.PreviousCheckpoint)
		c.PreviousCheckpoint = &h
	}
	return c
}

// oneCheckpoint converts the result of a :one checkpoint query.
func oneCheckpoint(r dbsqlc.AuditCheckpoint, err error, what string) (domain.AuditCheckpoint, error) {
	if errors.Is(err, pgx.ErrNoRows) {
		return domain.AuditCheckpoint{}, domain.ErrNotFound
	}
	if err != nil {
		return domain.AuditCheckpoint{}, fmt.Errorf("reading %s: %w", what, err)
	}
	return checkpointFromRow(&r), nil
}

// GetAuditCheckpoint returns the project's checkpoint at seq, or
// domain.ErrNotFound.
func (q *queries) GetAuditCheckpoint(ctx context.Context, tenantID, projectID string, seq uint64) (domain.AuditCheckpoint, error) {
	r, err := q.sqlc.GetAuditCheckpoint(ctx, dbsqlc.GetAuditCheckpointParams{TenantID: tenantID, ProjectID: projectID, Sequence: clampInt64(seq)})
	return oneCheckpoint(r, err, "audit checkpoint")
}

// LatestIssuedAuditCheckpoint returns the project's checkpoint issued last,
// or domain.ErrNotFound when it has none.
func (q *queries) LatestIssuedAuditCheckpoint(ctx context.Context, tenantID, projectID string) (domain.AuditCheckpoint, error) {
	r, err := q.sqlc.LatestIssuedAuditCheckpoint(ctx, dbsqlc.LatestIssuedAuditCheckpointParams{TenantID: tenantID, ProjectID: projectID})
	return oneCheckpoint(r, err, "latest audit checkpoint")
}

// AuditCheckpointAtOrBelow returns the project's checkpoint with the
// highest sequence at or below seq, or domain.ErrNotFound.
func (q *queries) AuditCheckpointAtOrBelow(ctx context.Context, tenantID, projectID string, seq uint64) (domain.AuditCheckpoint, error) {
	r, err := q.sqlc.AuditCheckpointAtOrBelow(ctx, dbsqlc.AuditCheckpointAtOrBelowParams{TenantID: tenantID, ProjectID: projectID, Sequence: clampInt64(seq)})
	return oneCheckpoint(r, err, "audit checkpoint")
}

// ListAuditCheckpoints returns up to limit of the project's checkpoints with
// sequence above after, by sequence.
func (q *queries) ListAuditCheckpoints(ctx context.Context, tenantID, projectID string, after uint64, limit int) ([]domain.AuditCheckpoint, error) {
	rows, err := q.sqlc.ListAuditCheckpoints(ctx, dbsqlc.ListAuditCheckpointsParams{TenantID: tenantID, ProjectID: projectID,
		AfterSequence: clampInt64(after), RowLimit: int64(limit)})
	if err != nil {
		return nil, fmt.Errorf("listing audit checkpoints: %w", err)
	}
	out := make([]domain.AuditCheckpoint, len(rows))
	for i := range rows {
		out[i] = checkpointFromRow(&rows[i])
	}
	return out, nil
}

// AuditCheckpointsInRange returns up to limit of the project's checkpoints
// with sequence in [from, to], by sequence, each with the JWS of the one
// issued before it.
func (q *queries) AuditCheckpointsInRange(ctx context.Context, tenantID, projectID string, from, to uint64, limit int) ([]domain.StoredCheckpoint, error) {
	rows, err := q.sqlc.AuditCheckpointsInRange(ctx, dbsqlc.AuditCheckpointsInRangeParams{TenantID: tenantID, ProjectID: projectID,
		FromSequence: clampInt64(from), ToSequence: clampInt64(to), RowLimit: int64(limit)})
	if err != nil {
		return nil, fmt.Errorf("reading audit checkpoints: %w", err)
	}
	out := make([]domain.StoredCheckpoint, len(rows))
	for i, r := range rows {
		out[i] = domain.StoredCheckpoint{Sequence: uint64(r.Sequence), IssueNumber: uint64(r.IssueNumber), JWS: r.Jws, PreviousJWS: r.PreviousJws}
	}
	return out, nil
}

// AuditCheckpointCandidates returns up to limit projects, after
// (afterTenant, afterProject) in key order, whose head is past their
// highest checkpoint and their purged prefix.
func (q *queries) AuditCheckpointCandidates(ctx context.Context, afterTenant, afterProject string, limit int) ([]domain.CheckpointCandidate, error) {
	rows, err := q.sqlc.AuditCheckpointCandidates(ctx, dbsqlc.AuditCheckpointCandidatesParams{AfterTenant: afterTenant,
		AfterProject: afterProject, RowLimit: int64(limit)})
	if err != nil {
		return nil, fmt.Errorf("reading checkpoint candidates: %w", err)
	}
	out := make([]domain.CheckpointCandidate, len(rows))
	for i, r := range rows {
		out[i] = domain.CheckpointCandidate{TenantID: r.TenantID, ProjectID: r.ProjectID, HeadSequence: uint64(r.LastSequence)}
	}
	return out, nil
}

// InsertAuditCheckpoint stores a new checkpoint. A concurrent insert of the
// same sequence or issue number fails with a unique violation, which
// IsRetryable reports.
func (t *Tx) InsertAuditCheckpoint(ctx context.Context, c domain.AuditCheckpoint) error {
	var prev []byte
	if c.PreviousCheckpoint != nil {
		prev = c.PreviousCheckpoint[:]
	}
	err := t.sqlc.InsertAuditCheckpoint(ctx, dbsqlc.InsertAuditCheckpointParams{TenantID: c.TenantID, ProjectID: c.ProjectID,
		Sequence: clampInt64(c.Sequence), IssueNumber: clampInt64(c.IssueNumber), ChainHash: c.ChainHash[:],
		PurgedThrough: clampInt64(c.PurgedThrough), AnchorHash: c.AnchorHash[:], PreviousCheckpoint: prev,
		JwsDigest: c.JWSDigest[:], KeyID: c.KeyID, Jws: c.JWS, IssuedAt: c.IssuedAt})
	if err != nil {
		return fmt.Errorf("inserting audit checkpoint: %w", err)
	}
	return nil
}
