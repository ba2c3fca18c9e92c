-- name: FindAuditEventsByID :many
-- The tenant's events among ids, in any project. WebhookBatchSendContext
-- queues it in its batch. Queries of whole events select every column in
-- table order, as auditEventColumnNames does: sqlc gives them
-- dbsqlc.AuditEvent.
SELECT tenant_id, project_id, sequence, id, action, occurred_at, recorded_at,
    subject_type, subject_id, subject_display_name, resource_type, resource_id, outcome,
    governance_risk, governance_reason, governance_ticket, governance_confirmed_by,
    trace_id, request_id, causation_id, evidence_digests, details, input_fingerprint, chain_hash,
    chain_version, recorded_by_issuer, recorded_by_subject, recorded_by_token_id, recorded_by_client_id
FROM audit_events WHERE tenant_id = @tenant_id AND id = ANY(@ids::uuid[]);

-- name: GetAuditEvent :one
SELECT tenant_id, project_id, sequence, id, action, occurred_at, recorded_at,
    subject_type, subject_id, subject_display_name, resource_type, resource_id, outcome,
    governance_risk, governance_reason, governance_ticket, governance_confirmed_by,
    trace_id, request_id, causation_id, evidence_digests, details, input_fingerprint, chain_hash,
    chain_version, recorded_by_issuer, recorded_by_subject, recorded_by_token_id, recorded_by_client_id
FROM audit_events WHERE tenant_id = @tenant_id AND project_id = @project_id AND id = @id;

-- name: GetAuditEventBySequence :one
SELECT tenant_id, project_id, sequence, id, action, occurred_at, recorded_at,
    subject_type, subject_id, subject_display_name, resource_type, resource_id, outcome,
    governance_risk, governance_reason, governance_ticket, governance_confirmed_by,
    trace_id, request_id, causation_id, evidence_digests, details, input_fingerprint, chain_hash,
    chain_version, recorded_by_issuer, recorded_by_subject, recorded_by_token_id, recorded_by_client_id
FROM audit_events WHERE tenant_id = @tenant_id AND project_id = @project_id AND sequence = @sequence;

-- name: ScanAuditEvents :many
-- Streamed row by row by ScanAuditEvents (not through this function).
SELECT tenant_id, project_id, sequence, id, action, occurred_at, recorded_at,
    subject_type, subject_id, subject_display_name, resource_type, resource_id, outcome,
    governance_risk, governance_reason, governance_ticket, governance_confirmed_by,
    trace_id, request_id, causation_id, evidence_digests, details, input_fingerprint, chain_hash,
    chain_version, recorded_by_issuer, recorded_by_subject, recorded_by_token_id, recorded_by_client_id
FROM audit_events WHERE tenant_id = $1 AND project_id = $2 AND sequence BETWEEN $3 AND $4
ORDER BY sequence;

-- name: StreamAuditEventsByTime :many
-- Streamed row by row by StreamAuditEventsByTime (not through this function).
SELECT tenant_id, project_id, sequence, id, action, occurred_at, recorded_at,
    subject_type, subject_id, subject_display_name, resource_type, resource_id, outcome,
    governance_risk, governance_reason, governance_ticket, governance_confirmed_by,
    trace_id, request_id, causation_id, evidence_digests, details, input_fingerprint, chain_hash,
    chain_version, recorded_by_issuer, recorded_by_subject, recorded_by_token_id, recorded_by_client_id
FROM audit_events WHERE tenant_id = $1 AND project_id = $2 AND occurred_at >= $3 AND occurred_at < $4
ORDER BY occurred_at, sequence;

-- name: AuditEventRefs :many
-- about_destination is, for an operational webhook event (the service's
-- own, subject SYSTEM), the destination it is about: the fan-out never
-- delivers it there. recorded_at dates the fan-out's delivery ids
-- (domain.FanoutDeliveryID).
SELECT id, sequence, action, recorded_at,
    (CASE WHEN subject_type = 'SYSTEM' AND action LIKE 'webhook.%' THEN COALESCE(details->>'destinationId', '')
        ELSE '' END)::text AS about_destination
FROM audit_events
WHERE tenant_id = @tenant_id AND project_id = @project_id AND sequence BETWEEN @from_sequence::bigint AND @to_sequence::bigint
ORDER BY sequence;

-- name: NotifyAuditEvents :exec
-- Queued by AppendAuditEvents in the batch of the append: $1 is
-- AuditEventsChannel, $2 the AuditEventsNotification.
SELECT pg_notify($1::text, $2::text);

