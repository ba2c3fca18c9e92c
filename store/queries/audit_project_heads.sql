-- name: LockAuditHead :one
-- Locks the head and reads, under the same lock, whether the project has an
-- active webhook subscription.
SELECT h.last_sequence, h.last_hash, h.last_recorded_at, EXISTS (SELECT 1 FROM webhook_subscriptions w
        WHERE w.tenant_id = h.tenant_id AND w.project_id = h.project_id AND w.state = 'ACTIVE') AS webhooks
FROM audit_project_heads h
WHERE h.tenant_id = @tenant_id AND h.project_id = @project_id FOR UPDATE OF h;

-- name: ExpectAuditHead :exec
-- Queued by ExpectAuditHead: locks the head and fails the transaction
-- unless it is at the given sequence and hash and the project's webhooks
-- are as given (migration 00019). Positional parameters, in the order the
-- batch passes them.
SELECT aether_expect_audit_head($1::text, $2::text, $3::bigint, $4::bytea, $5::boolean);

-- name: BoundAppendWaits :exec
-- Queued by BoundAppendWaits first in an append's transaction: bounds, for
-- the rest of the transaction only, how long it waits for a lock (the head
-- held by another session) and how long it may sit idle while holding one.
-- Positional parameters: the bounds as setting values ('1500ms').
SELECT set_config('lock_timeout', $1::text, true), set_config('idle_in_transaction_session_timeout', $2::text, true);

-- name: CreateAuditHead :exec
INSERT INTO audit_project_heads (tenant_id, project_id) VALUES (@tenant_id, @project_id)
ON CONFLICT (tenant_id, project_id) DO NOTHING;

-- name: UpdateAuditHead :exec
-- Queued by AppendAuditEvents in the batch of the append: positional
-- parameters, in the order the batch passes them.
UPDATE audit_project_heads SET last_sequence = $3, last_hash = $4, last_recorded_at = $5
WHERE tenant_id = $1 AND project_id = $2;

-- name: GetAuditHead :one
SELECT last_sequence, last_hash, last_recorded_at FROM audit_project_heads
WHERE tenant_id = @tenant_id AND project_id = @project_id;

-- name: TenantProjects :many
SELECT project_id FROM audit_project_heads WHERE tenant_id = @tenant_id ORDER BY project_id;

-- name: GetAuditPurgedPrefix :one
SELECT purged_through, purged_hash FROM audit_project_heads
WHERE tenant_id = @tenant_id AND project_id = @project_id;

-- name: AuditPurgeCandidates :many
-- Projects whose oldest remaining event is older than their tenant's
-- retention (the override, else default_seconds): one index probe each.
-- (sqlc.arg rather than @: sqlc misreads @ next to secs =>.)
SELECT h.tenant_id, h.project_id,
    COALESCE(o.retention_days * 86400.0, sqlc.arg(default_seconds)::float8)::float8 AS retention_seconds
FROM audit_project_heads h LEFT JOIN audit_retention_overrides o ON o.tenant_id = h.tenant_id
WHERE h.last_sequence > h.purged_through AND EXISTS (
    SELECT 1 FROM audit_events e
    WHERE e.tenant_id = h.tenant_id AND e.project_id = h.project_id AND e.sequence = h.purged_through + 1
      AND e.recorded_at < sqlc.arg(now)::timestamptz
          - make_interval(secs => COALESCE(o.retention_days * 86400.0, sqlc.arg(default_seconds)::float8)))
ORDER BY h.tenant_id, h.project_id LIMIT sqlc.arg(row_limit)::bigint;

-- name: PurgeAuditPrefix :one
-- The retention purge of one batch, through the SECURITY DEFINER function of
-- migration 00012 (the runtime role may not delete events itself): moves
-- the purged prefix to the last event recorded before the cutoff, at most
-- max_events past it, with that event's chain hash as the anchor, and
-- deletes the events at or below it. No row when nothing is old enough.
-- (The column list and casts name and type its columns for sqlc, which does
-- not read a function's RETURNS TABLE.)
SELECT p.purge_from::bigint AS purge_from, p.purge_through::bigint AS purge_through,
    p.through_hash::bytea AS through_hash, p.purged::bigint AS purged
FROM aether_purge_audit_events(@tenant_id::text, @project_id::text, @cutoff::timestamptz, @max_events::bigint)
    AS p (purge_from, purge_through, through_hash, purged);
