-- name: DeadLetterPurgedWebhookDeliveries :execrows
-- The project's deliveries waiting to be sent whose event lies in the
-- purged prefix.
UPDATE webhook_deliveries d SET state = 'DEAD_LETTERED', dead_lettered_at = @now::timestamptz,
    updated_at = @now, next_attempt_at = NULL, last_error = @last_error
FROM audit_project_heads h
WHERE h.tenant_id = @tenant_id AND h.project_id = @project_id AND d.tenant_id = @tenant_id AND d.project_id = @project_id
  AND d.state IN ('PENDING', 'RETRYING') AND d.event_sequence <= h.purged_through;

-- name: GetWebhookDelivery :one
-- The tenant's delivery with this id. Queries of whole deliveries select
-- every column in table order: sqlc gives them dbsqlc.WebhookDelivery.
SELECT tenant_id, project_id, id, subscription_id, destination_id, event_id, event_sequence,
    event_type, idempotency_key, state, attempt_count, max_attempts, next_attempt_at, created_at, updated_at,
    delivered_at, dead_lettered_at, last_error, replay_of, ordered, attempt_started_at, attempt_status_code,
    attempt_latency_us, attempt_response_body
FROM webhook_deliveries WHERE tenant_id = @tenant_id AND id = @id;

-- name: LockWebhookDelivery :one
-- GetWebhookDelivery, locking the row for the rest of the transaction.
SELECT tenant_id, project_id, id, subscription_id, destination_id, event_id, event_sequence,
    event_type, idempotency_key, state, attempt_count, max_attempts, next_attempt_at, created_at, updated_at,
    delivered_at, dead_lettered_at, last_error, replay_of, ordered, attempt_started_at, attempt_status_code,
    attempt_latency_us, attempt_response_body
FROM webhook_deliveries WHERE tenant_id = @tenant_id AND id = @id FOR UPDATE;

-- name: BatchSendWebhookDeliveries :many
-- The tenant's deliveries among ids ($2) to one destination ($3). Queued by
-- WebhookBatchSendContext in its batch, ids as [16]byte arrays: positional
-- parameters. The tenant is matched as a pair with each id, not as a filter
-- of its own, so that the plan is one primary-key lookup per id whatever
-- the statistics say of the tenant (see docs/benchmarks.md, "Trickle rows:
-- plans"); id = ANY($2) repeats the ids as a condition on the partition
-- key, so that a custom plan reads only the partitions of those ids
-- (migration 00024); id BETWEEN $4 AND $5, the least and the greatest of
-- the ids (store.idBounds), does the same for its generic plan, which
-- prunes by it when it starts.
SELECT tenant_id, project_id, id, subscription_id, destination_id, event_id, event_sequence,
    event_type, idempotency_key, state, attempt_count, max_attempts, next_attempt_at, created_at, updated_at,
    delivered_at, dead_lettered_at, last_error, replay_of, ordered, attempt_started_at, attempt_status_code,
    attempt_latency_us, attempt_response_body
FROM webhook_deliveries WHERE (tenant_id, id) IN (SELECT $1::text, unnest($2::uuid[])) AND id = ANY($2::uuid[]) AND destination_id = $3
    AND id BETWEEN $4::uuid AND $5::uuid;

-- name: UpdateWebhookDelivery :exec
UPDATE webhook_deliveries SET state = @state, attempt_count = @attempt_count, max_attempts = @max_attempts,
    next_attempt_at = @next_attempt_at, updated_at = @updated_at, delivered_at = @delivered_at,
    dead_lettered_at = @dead_lettered_at, last_error = @last_error
WHERE tenant_id = @tenant_id AND id = @id;

-- name: CancelWebhookDeliveriesOfDestination :execrows
-- Ends the deliveries of a deleted destination that were not sent to the
-- end (an attempt under way ends on its own; its retry is cancelled then).
UPDATE webhook_deliveries SET state = 'CANCELLED', next_attempt_at = NULL, updated_at = @now::timestamptz,
    last_error = @reason
WHERE tenant_id = @tenant_id AND project_id = @project_id AND destination_id = @destination_id
    AND state IN ('PENDING', 'RETRYING', 'PAUSED');

-- name: ResumeWebhookDeliveriesOfDestination :many
-- Moves the PAUSED deliveries of a destination back to PENDING, due at
-- @now, and returns what their jobs need, in order of sequence.
WITH r AS (
    UPDATE webhook_deliveries SET state = 'PENDING', next_attempt_at = @now::timestamptz, updated_at = @now
    WHERE tenant_id = @tenant_id AND project_id = @project_id AND destination_id = @destination_id
        AND state = 'PAUSED'
    RETURNING id, subscription_id, event_id, event_sequence, attempt_count, ordered
)
SELECT id, subscription_id, event_id, event_sequence, attempt_count, ordered FROM r ORDER BY event_sequence, id;

-- name: PauseWebhookDeliveriesOfDestination :execrows
-- Moves the deliveries of a disabled destination that wait for an attempt
-- to PAUSED, their attempts and budget kept.
UPDATE webhook_deliveries SET state = 'PAUSED', next_attempt_at = NULL, updated_at = @now::timestamptz
WHERE tenant_id = @tenant_id AND project_id = @project_id AND destination_id = @destination_id
    AND state IN ('PENDING', 'RETRYING');

-- name: RecoverableWebhookDeliveries :many
-- A destination's deliveries whose last attempt failed at or after since:
-- RETRYING ones and dead letters, whose events retention has not purged,
-- oldest first (the project index, filtered).
SELECT tenant_id, project_id, id, subscription_id, destination_id, event_id, event_sequence,
    event_type, idempotency_key, state, attempt_count, max_attempts, next_attempt_at, created_at, updated_at,
    delivered_at, dead_lettered_at, last_error, replay_of, ordered, attempt_started_at, attempt_status_code,
    attempt_latency_us, attempt_response_body
FROM webhook_deliveries
WHERE tenant_id = @tenant_id AND project_id = @project_id AND destination_id = @destination_id
  AND state IN ('RETRYING', 'DEAD_LETTERED') AND updated_at >= @since::timestamptz
  AND event_sequence > @purged_through::bigint
ORDER BY id LIMIT @row_limit::bigint;
