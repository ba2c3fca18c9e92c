-- name: AuditProjectSegments :many
-- The runs of a project's sequences by month of recorded_at (migration
-- 00022), in order, then the head as a last row: first_sequence is the
-- head's sequence + 1 and recorded_from its recorded_at (the upper bound of
-- the newest run). No row for a project without a head.
SELECT s.first_sequence::bigint AS first_sequence, s.recorded_from::timestamptz AS recorded_from, false AS head
FROM audit_project_segments s WHERE s.tenant_id = @tenant_id AND s.project_id = @project_id
UNION ALL
SELECT h.last_sequence + 1, h.last_recorded_at, true FROM audit_project_heads h
WHERE h.tenant_id = @tenant_id AND h.project_id = @project_id
ORDER BY 1;

-- name: InsertAuditProjectSegment :exec
-- Queued by AppendAuditEvents when an append moves a project into a new
-- month: positional parameters, in the order the batch passes them.
INSERT INTO audit_project_segments (tenant_id, project_id, first_sequence, recorded_from)
VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING;

-- name: CreateAuditPartitions :one
-- The monthly partitions of audit_events through the month of through,
-- through the SECURITY DEFINER function of migration 00022.
SELECT aether_create_audit_partitions(@through::timestamptz)::integer AS created;

-- name: CreatePastAuditPartitions :one
-- The monthly partitions of audit_events from the month of from_time
-- through the month of through, past months included, through the SECURITY
-- DEFINER function of migration 00026 (the owner's connection only).
SELECT aether_create_audit_partitions(@from_time::timestamptz, @through::timestamptz)::integer AS created;

-- name: LockAuditEventIDs :exec
-- Queued by Tx.FindAuditEventsByID: a transaction-level advisory lock on
-- each of the tenant's event ids $2, in id order (so two transactions
-- cannot deadlock on them).
SELECT count(pg_advisory_xact_lock(hashtextextended($1::text || '/' || i.id::text, 19)))
FROM (SELECT DISTINCT unnest($2::uuid[]) AS id ORDER BY 1) i;

-- name: PurgeAuditPartition :many
-- The purged prefixes moved over one partition's range, through the
-- SECURITY DEFINER function of migration 00022.
SELECT p.tenant_id::text AS tenant_id, p.project_id::text AS project_id, p.purge_from::bigint AS purge_from,
    p.purge_through::bigint AS purge_through, p.through_hash::bytea AS through_hash, p.purged::bigint AS purged
FROM aether_purge_audit_partition(@from_time::timestamptz, @to_time::timestamptz, @cutoff::timestamptz)
    AS p (tenant_id, project_id, purge_from, purge_through, through_hash, purged);

-- name: DropAuditPartition :one
SELECT aether_drop_audit_partition(@name::text, @lock_timeout::interval)::boolean AS dropped;

-- name: MaxAuditRetentionDays :one
-- The longest retention of any tenant's override, 0 without one.
SELECT COALESCE(max(retention_days), 0)::integer AS days FROM audit_retention_overrides;
