-- name: QueueOrderedWebhookDeliveries :exec
-- Puts the ordered ones among the tenant's deliveries ids in their
-- subscriptions' queues.
INSERT INTO webhook_ordered_queue (tenant_id, subscription_id, event_sequence, delivery_id)
SELECT d.tenant_id, d.subscription_id, d.event_sequence, d.id FROM webhook_deliveries d
WHERE d.tenant_id = @tenant_id AND d.id = ANY(@ids::uuid[]) AND d.ordered
ON CONFLICT DO NOTHING;

-- name: OrderedWebhookQueue :many
-- The first deliveries of a subscription's queue, in the order they are
-- sent (project sequence, then id: a replay's after the fan-out's).
SELECT d.tenant_id, d.project_id, d.id, d.subscription_id, d.destination_id, d.event_id, d.event_sequence,
    d.event_type, d.idempotency_key, d.state, d.attempt_count, d.max_attempts, d.next_attempt_at, d.created_at,
    d.updated_at, d.delivered_at, d.dead_lettered_at, d.last_error, d.replay_of, d.ordered, d.attempt_started_at,
    d.attempt_status_code, d.attempt_latency_us, d.attempt_response_body
FROM webhook_ordered_queue q JOIN webhook_deliveries d ON d.id = q.delivery_id
WHERE q.tenant_id = @tenant_id AND q.subscription_id = @subscription_id
ORDER BY q.event_sequence, q.delivery_id LIMIT @row_limit::bigint;

-- name: DequeueOrderedWebhookDeliveries :exec
-- Removes finished deliveries from a subscription's queue.
DELETE FROM webhook_ordered_queue
WHERE tenant_id = @tenant_id AND subscription_id = @subscription_id AND delivery_id = ANY(@ids::uuid[]);

-- name: LockOrderedWebhookSubscriptions :many
-- Locks the tenant's subscriptions among ids, in id order (so that
-- concurrent fan-outs cannot deadlock), for their ordered fan-out.
SELECT id, fanned_out_through, ordered_awake_until FROM webhook_subscriptions
WHERE tenant_id = @tenant_id AND id = ANY(@ids::uuid[])
ORDER BY id FOR UPDATE;

-- name: SetWebhookSubscriptionFannedOut :exec
UPDATE webhook_subscriptions SET fanned_out_through = @fanned_out_through::bigint
WHERE tenant_id = @tenant_id AND id = @id;

-- name: SetWebhookSubscriptionAwake :exec
-- Says that an ordered job is queued or running for the subscription until
-- awake_until (NULL: none).
UPDATE webhook_subscriptions SET ordered_awake_until = @awake_until
WHERE tenant_id = @tenant_id AND id = @id;

-- name: SetWebhookSubscriptionPausedBy :exec
UPDATE webhook_subscriptions SET paused_by_delivery_id = @paused_by_delivery_id
WHERE tenant_id = @tenant_id AND id = @id;
