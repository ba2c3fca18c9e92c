-- name: InsertAuditStream :exec
-- A new stream.
INSERT INTO audit_streams (id, tenant_id, project_ids, sink_type, sink_url, sealed_secret, filter,
    from_sequence, paused, created_at, created_by, updated_at)
VALUES (@id, @tenant_id, @project_ids, @sink_type, @sink_url, @sealed_secret, @filter,
    @from_sequence, @paused, @created_at, @created_by, @updated_at);

-- name: GetAuditStream :one
-- The tenant's stream.
SELECT id, tenant_id, project_ids, sink_type, sink_url, sealed_secret, filter, from_sequence, paused,
    created_at, created_by, updated_at
FROM audit_streams
WHERE tenant_id = @tenant_id AND id = @id;

-- name: LockAuditStream :one
-- The tenant's stream, locked until the end of the transaction.
SELECT id, tenant_id, project_ids, sink_type, sink_url, sealed_secret, filter, from_sequence, paused,
    created_at, created_by, updated_at
FROM audit_streams
WHERE tenant_id = @tenant_id AND id = @id
FOR UPDATE;

-- name: ListAuditStreams :many
-- A page of the tenant's streams by id, after after_id.
SELECT id, tenant_id, project_ids, sink_type, sink_url, sealed_secret, filter, from_sequence, paused,
    created_at, created_by, updated_at
FROM audit_streams
WHERE tenant_id = @tenant_id AND id > @after_id
ORDER BY id LIMIT @row_limit::bigint;

-- name: UpdateAuditStream :exec
-- Saves what a command may change of a stream.
UPDATE audit_streams
SET sink_url = @sink_url, sealed_secret = @sealed_secret, filter = @filter, paused = @paused, updated_at = @updated_at
WHERE tenant_id = @tenant_id AND id = @id;

-- name: DeleteAuditStream :exec
-- Deletes a stream and, by cascade, its cursors.
DELETE FROM audit_streams WHERE tenant_id = @tenant_id AND id = @id;
