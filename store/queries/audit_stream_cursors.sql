-- name: InsertAuditStreamCursors :exec
-- The cursors of a new stream's listed projects, each at acked_sequence.
INSERT INTO audit_stream_cursors (stream_id, project_id, tenant_id, acked_sequence)
SELECT @stream_id, p, @tenant_id, @acked_sequence
FROM unnest(@project_ids::text[]) AS p
ON CONFLICT DO NOTHING;

-- name: EnsureAllProjectsAuditStreamCursors :one
-- Gives every stream of all its tenant's projects a cursor in each project
-- that has a head and no cursor yet, at the stream's start (the sequence
-- before from_sequence, else 0), and tells whether any cursor exists (the
-- ones inserted here are not visible to the statement's own read).
WITH inserted AS (
    INSERT INTO audit_stream_cursors (stream_id, project_id, tenant_id, acked_sequence)
    SELECT s.id, h.project_id, s.tenant_id, COALESCE(s.from_sequence - 1, 0)
    FROM audit_streams s
    JOIN audit_project_heads h ON h.tenant_id = s.tenant_id
    WHERE s.project_ids IS NULL
      AND NOT EXISTS (SELECT 1 FROM audit_stream_cursors c WHERE c.stream_id = s.id AND c.project_id = h.project_id)
    ON CONFLICT DO NOTHING
    RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM audit_stream_cursors UNION ALL SELECT 1 FROM inserted) AS any_cursor;

-- name: ClaimAuditStreamCursors :many
-- Leases, to owner until lease_until, up to row_limit cursors with work:
-- of a stream not paused, behind their project's head, not leased (or
-- whose lease expired: its process died) and not waiting for a retry.
-- Rows another claim is taking are skipped.
WITH due AS (
    SELECT c.stream_id, c.project_id
    FROM audit_stream_cursors c
    JOIN audit_streams s ON s.id = c.stream_id
    JOIN audit_project_heads h ON h.tenant_id = c.tenant_id AND h.project_id = c.project_id
    WHERE NOT s.paused
      AND h.last_sequence > c.acked_sequence
      AND (c.lease_until IS NULL OR c.lease_until < @now::timestamptz)
      AND (c.retry_at IS NULL OR c.retry_at <= @now::timestamptz)
    ORDER BY c.last_delivery_at NULLS FIRST
    LIMIT @row_limit::bigint
    FOR UPDATE OF c SKIP LOCKED
)
UPDATE audit_stream_cursors c
SET lease_owner = @owner, lease_until = @lease_until::timestamptz
FROM due
WHERE c.stream_id = due.stream_id AND c.project_id = due.project_id
RETURNING c.stream_id, c.project_id, c.tenant_id, c.acked_sequence, c.last_delivery_at, c.last_error,
    c.last_error_at, c.failures, c.retry_at;

-- name: AdvanceAuditStreamCursor :execrows
-- Moves a leased cursor from acked_sequence to through after the sink
-- acknowledged, clears its error and extends the lease. No row when the
-- lease was lost or the stream deleted.
UPDATE audit_stream_cursors
SET acked_sequence = @through, last_delivery_at = @now::timestamptz, last_error = NULL, last_error_at = NULL,
    failures = 0, retry_at = NULL, lease_until = @lease_until::timestamptz
WHERE stream_id = @stream_id AND project_id = @project_id AND lease_owner = @owner
  AND acked_sequence = @acked_sequence AND @through >= acked_sequence;

-- name: FailAuditStreamCursor :execrows
-- Records a failed delivery of a leased cursor and releases it until
-- retry_at.
UPDATE audit_stream_cursors
SET last_error = @last_error, last_error_at = @now::timestamptz, failures = failures + 1,
    retry_at = @retry_at::timestamptz, lease_owner = NULL, lease_until = NULL
WHERE stream_id = @stream_id AND project_id = @project_id AND lease_owner = @owner;

-- name: ReleaseAuditStreamCursor :exec
-- Gives a leased cursor back.
UPDATE audit_stream_cursors
SET lease_owner = NULL, lease_until = NULL
WHERE stream_id = @stream_id AND project_id = @project_id AND lease_owner = @owner;

-- name: RetryAuditStreamCursorsNow :exec
-- Makes the stream's failed cursors due at once (on resume).
UPDATE audit_stream_cursors SET retry_at = NULL WHERE stream_id = @stream_id AND retry_at IS NOT NULL;

-- name: ListAuditStreamHealth :many
-- The stream's cursors with their project's head and when the oldest event
-- not yet acknowledged was recorded (now when there is none: caught up),
-- by project.
SELECT c.stream_id, c.project_id, c.tenant_id, c.acked_sequence, c.last_delivery_at, c.last_error,
    c.last_error_at, c.failures, c.retry_at,
    COALESCE(h.last_sequence, 0)::bigint AS head,
    COALESCE((SELECT e.recorded_at FROM audit_events e
     WHERE e.tenant_id = c.tenant_id AND e.project_id = c.project_id AND e.sequence > c.acked_sequence
     ORDER BY e.sequence LIMIT 1), now())::timestamptz AS oldest_pending_at
FROM audit_stream_cursors c
LEFT JOIN audit_project_heads h ON h.tenant_id = c.tenant_id AND h.project_id = c.project_id
WHERE c.stream_id = @stream_id
ORDER BY c.project_id;

-- name: ListAllAuditStreamLag :many
-- Every cursor of every stream with its lag, for /metrics.
SELECT s.tenant_id, c.stream_id, c.project_id, s.paused, c.acked_sequence,
    COALESCE(h.last_sequence, 0)::bigint AS head,
    COALESCE((SELECT e.recorded_at FROM audit_events e
     WHERE e.tenant_id = c.tenant_id AND e.project_id = c.project_id AND e.sequence > c.acked_sequence
     ORDER BY e.sequence LIMIT 1), now())::timestamptz AS oldest_pending_at
FROM audit_stream_cursors c
JOIN audit_streams s ON s.id = c.stream_id
LEFT JOIN audit_project_heads h ON h.tenant_id = c.tenant_id AND h.project_id = c.project_id
ORDER BY c.stream_id, c.project_id;
