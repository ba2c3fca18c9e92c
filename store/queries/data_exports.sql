-- name: InsertDataExport :exec
-- Queued by InsertDataExport with its notification: positional parameters,
-- every column in table order.
INSERT INTO data_exports (tenant_id, project_id, id, kind, format, compression, range_from, range_to, state,
    requested_by, requested_at, started_at, progress_rows, progress_bytes, object_ref, content_digest, byte_length,
    row_count, ready_at, expires_at, failed_at, failure_reason, expired_at, updated_at,
    from_sequence, to_sequence, checkpoint_sequence, checkpoint_jws, filter)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10,
    $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29);

-- name: UpdateDataExport :exec
-- Queued by UpdateDataExport with its notification: positional parameters.
-- Only the lifecycle columns change; the request's are immutable.
UPDATE data_exports SET state = $3, started_at = $4, progress_rows = $5, progress_bytes = $6,
    object_ref = $7, content_digest = $8, byte_length = $9, row_count = $10, ready_at = $11, expires_at = $12,
    failed_at = $13, failure_reason = $14, expired_at = $15, updated_at = $16,
    checkpoint_sequence = $17, checkpoint_jws = $18
WHERE tenant_id = $1 AND id = $2;

-- name: UpdateDataExportProgress :exec
-- Queued by UpdateDataExportProgress with its notification: positional
-- parameters.
UPDATE data_exports SET progress_rows = $3, progress_bytes = $4, updated_at = $5
WHERE tenant_id = $1 AND id = $2 AND state = 'RUNNING';

-- name: NotifyDataExport :exec
-- Queued with every change of an export: $1 is DataExportsChannel, $2 the
-- DataExportNotification.
SELECT pg_notify($1::text, $2::text);

-- name: GetDataExport :one
-- The tenant's export with this id. Queries of whole exports select every
-- column in table order: sqlc gives them dbsqlc.DataExport.
SELECT tenant_id, project_id, id, kind, format, compression, range_from, range_to, state,
    requested_by, requested_at, started_at, progress_rows, progress_bytes, object_ref, content_digest, byte_length,
    row_count, ready_at, expires_at, failed_at, failure_reason, expired_at, updated_at,
    from_sequence, to_sequence, checkpoint_sequence, checkpoint_jws, filter
FROM data_exports WHERE tenant_id = @tenant_id AND id = @id;

-- name: LockDataExport :one
-- GetDataExport, locking the row for the rest of the transaction.
SELECT tenant_id, project_id, id, kind, format, compression, range_from, range_to, state,
    requested_by, requested_at, started_at, progress_rows, progress_bytes, object_ref, content_digest, byte_length,
    row_count, ready_at, expires_at, failed_at, failure_reason, expired_at, updated_at,
    from_sequence, to_sequence, checkpoint_sequence, checkpoint_jws, filter
FROM data_exports WHERE tenant_id = @tenant_id AND id = @id FOR UPDATE;

-- name: LockTenantDataExports :exec
-- Serializes the requests of a tenant's exports until the end of the
-- transaction.
SELECT pg_advisory_xact_lock(hashtextextended('data_exports:' || @tenant_id::text, 0));

-- name: CountActiveDataExports :one
SELECT count(*) FROM data_exports WHERE tenant_id = @tenant_id AND state IN ('QUEUED', 'RUNNING');

-- name: DueDataExportExpiries :many
-- READY exports past their expiry and FAILED ones that failed before
-- failed_before, each at most row_limit.
(SELECT tenant_id, project_id, id, kind, format, compression, range_from, range_to, state,
    requested_by, requested_at, started_at, progress_rows, progress_bytes, object_ref, content_digest, byte_length,
    row_count, ready_at, expires_at, failed_at, failure_reason, expired_at, updated_at,
    from_sequence, to_sequence, checkpoint_sequence, checkpoint_jws, filter
    FROM data_exports WHERE state = 'READY' AND expires_at <= @now::timestamptz ORDER BY expires_at LIMIT @row_limit::bigint)
UNION ALL
(SELECT tenant_id, project_id, id, kind, format, compression, range_from, range_to, state,
    requested_by, requested_at, started_at, progress_rows, progress_bytes, object_ref, content_digest, byte_length,
    row_count, ready_at, expires_at, failed_at, failure_reason, expired_at, updated_at,
    from_sequence, to_sequence, checkpoint_sequence, checkpoint_jws, filter
    FROM data_exports WHERE state = 'FAILED' AND failed_at <= @failed_before::timestamptz ORDER BY failed_at LIMIT @row_limit::bigint);

-- name: DeleteExpiredDataExports :execrows
-- Deletes up to row_limit EXPIRED exports that expired before
-- expired_before (their objects were deleted at expiry): the retention of
-- finished export rows (data_exports_expired_idx).
DELETE FROM data_exports WHERE id IN (
    SELECT id FROM data_exports WHERE state = 'EXPIRED' AND expired_at < @expired_before::timestamptz
    ORDER BY expired_at LIMIT @row_limit::bigint);
