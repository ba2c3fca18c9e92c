-- name: FindAuditEventsByID :many
-- The tenant's events among ids, in any project, recorded in
-- [@recorded_from, @recorded_to), each bound optional (NULL: no bound).
-- WebhookBatchSendContext queues it in its batch, bounded by the times of
-- its delivery ids: the bounds prune the partitions (by recorded_at) that
-- cannot hold the events, which the per-id lookups would otherwise each
-- scan (docs/benchmarks.md, "Fan-out ratio: database side"). A missing
-- bound is COALESCEd to an infinity, not tested with IS NULL in an OR: a
-- comparison of recorded_at with a stable expression of the parameters
-- still prunes partitions at execution in a generic plan (which pgx's
-- prepared statements come to use), an OR with a NULL test does not
-- (store/plans_partitions_test.go).
-- Queries of whole events select every column in table order, as
-- auditEventColumnNames does: sqlc gives them dbsqlc.AuditEvent. The
-- tenant is matched as a pair with each id, not as a filter of its own: a
-- tenant the statistics do not know yet (or know smaller than it is) would
-- otherwise be read whole through an index that starts with tenant_id (see
-- docs/benchmarks.md, "Trickle rows: plans").
SELECT tenant_id, project_id, sequence, id, action, occurred_at, recorded_at,
    subject_type, subject_id, subject_display_name, resource_type, resource_id, outcome,
    governance_risk, governance_reason, governance_ticket, governance_confirmed_by,
    trace_id, request_id, causation_id, evidence_digests, details, input_fingerprint, chain_hash,
    chain_version, recorded_by_issuer, recorded_by_subject, recorded_by_token_id, recorded_by_client_id
FROM audit_events WHERE (tenant_id, id) IN (SELECT @tenant_id::text, unnest(@ids::uuid[]))
    AND recorded_at >= COALESCE(sqlc.narg('recorded_from')::timestamptz, '-infinity')
    AND recorded_at < COALESCE(sqlc.narg('recorded_to')::timestamptz, 'infinity');

-- name: GetAuditEvent :one
SELECT tenant_id, project_id, sequence, id, action, occurred_at, recorded_at,
    subject_type, subject_id, subject_display_name, resource_type, resource_id, outcome,
    governance_risk, governance_reason, governance_ticket, governance_confirmed_by,
    trace_id, request_id, causation_id, evidence_digests, details, input_fingerprint, chain_hash,
    chain_version, recorded_by_issuer, recorded_by_subject, recorded_by_token_id, recorded_by_client_id
FROM audit_events WHERE tenant_id = @tenant_id AND project_id = @project_id AND id = @id;

-- name: ScanAuditEvents :many
-- Streamed row by row by ScanAuditEvents (not through this function), one
-- run of the project's sequences at a time: $5 and $6 are the run's
-- recorded_at bounds (auditSegment), so the statement reads one partition.
SELECT tenant_id, project_id, sequence, id, action, occurred_at, recorded_at,
    subject_type, subject_id, subject_display_name, resource_type, resource_id, outcome,
    governance_risk, governance_reason, governance_ticket, governance_confirmed_by,
    trace_id, request_id, causation_id, evidence_digests, details, input_fingerprint, chain_hash,
    chain_version, recorded_by_issuer, recorded_by_subject, recorded_by_token_id, recorded_by_client_id
FROM audit_events WHERE tenant_id = $1 AND project_id = $2 AND sequence BETWEEN $3 AND $4
    AND recorded_at >= $5 AND recorded_at < $6
ORDER BY sequence;

-- name: AuditEventRefs :many
-- One run of the project's sequences at a time, within its recorded_at
-- bounds (auditSegment). about_destination is, for an operational webhook event (the service's
-- own, subject SYSTEM), the destination it is about: the fan-out never
-- delivers it there. recorded_at dates the fan-out's delivery ids
-- (domain.FanoutDeliveryID).
SELECT id, sequence, action, recorded_at,
    (CASE WHEN subject_type = 'SYSTEM' AND action LIKE 'webhook.%' THEN COALESCE(details->>'destinationId', '')
        ELSE '' END)::text AS about_destination
FROM audit_events
WHERE tenant_id = @tenant_id AND project_id = @project_id AND sequence BETWEEN @from_sequence::bigint AND @to_sequence::bigint
    AND recorded_at >= @recorded_from AND recorded_at < @recorded_to
ORDER BY sequence;

-- name: NotifyAuditEvents :exec
-- Queued by AppendAuditEvents in the batch of the append: $1 is
-- AuditEventsChannel, $2 the AuditEventsNotification.
SELECT pg_notify($1::text, $2::text);

