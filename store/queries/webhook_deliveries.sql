-- name: DeadLetterPurgedWebhookDeliveries :execrows
-- The project's deliveries waiting to be sent whose event lies in the
-- purged prefix.
UPDATE webhook_deliveries d SET state = 'DEAD_LETTERED', dead_lettered_at = @now::timestamptz,
    updated_at = @now, next_attempt_at = NULL, last_error = @last_error
FROM audit_project_heads h
WHERE h.tenant_id = @tenant_id AND h.project_id = @project_id AND d.tenant_id = @tenant_id AND d.project_id = @project_id
  AND d.state IN ('PENDING', 'RETRYING') AND d.event_sequence <= h.purged_through;
