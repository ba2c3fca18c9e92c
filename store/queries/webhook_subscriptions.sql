-- name: InsertWebhookSubscription :exec
INSERT INTO webhook_subscriptions (tenant_id, project_id, id, destination_id, event_types, description, state,
    after_sequence, created_at, created_by, disabled_at, disabled_sequence, ordering, fanned_out_through)
VALUES (@tenant_id, @project_id, @id, @destination_id, @event_types, @description, @state,
    @after_sequence, @created_at, @created_by, @disabled_at, NULL, @ordering, @fanned_out_through);

-- name: GetWebhookSubscription :one
-- The tenant's subscription with this id. Queries of whole subscriptions select every column in table order: sqlc
-- gives them dbsqlc.WebhookSubscription.
SELECT tenant_id, project_id, id, destination_id, event_types, description, state,
    after_sequence, created_at, created_by, disabled_at, disabled_sequence, ordering,
    fanned_out_through, paused_by_delivery_id, ordered_awake_until
FROM webhook_subscriptions WHERE tenant_id = @tenant_id AND id = @id;

-- name: LockWebhookSubscription :one
-- GetWebhookSubscription, locking the row for the rest of the transaction.
SELECT tenant_id, project_id, id, destination_id, event_types, description, state,
    after_sequence, created_at, created_by, disabled_at, disabled_sequence, ordering,
    fanned_out_through, paused_by_delivery_id, ordered_awake_until
FROM webhook_subscriptions WHERE tenant_id = @tenant_id AND id = @id FOR UPDATE;

-- name: DisableWebhookSubscription :exec
UPDATE webhook_subscriptions SET state = @state, disabled_at = @disabled_at, disabled_sequence = @disabled_sequence
WHERE tenant_id = @tenant_id AND id = @id;

-- name: ListWebhookSubscriptions :many
SELECT tenant_id, project_id, id, destination_id, event_types, description, state,
    after_sequence, created_at, created_by, disabled_at, disabled_sequence, ordering,
    fanned_out_through, paused_by_delivery_id, ordered_awake_until
FROM webhook_subscriptions
WHERE tenant_id = @tenant_id AND project_id = @project_id AND id > @after_id
ORDER BY id LIMIT @row_limit::bigint;

-- name: ListActiveWebhookSubscriptions :many
-- ListWebhookSubscriptions, ACTIVE ones only (a separate statement, so that
-- it can use the partial index of active subscriptions).
SELECT tenant_id, project_id, id, destination_id, event_types, description, state,
    after_sequence, created_at, created_by, disabled_at, disabled_sequence, ordering,
    fanned_out_through, paused_by_delivery_id, ordered_awake_until
FROM webhook_subscriptions
WHERE tenant_id = @tenant_id AND project_id = @project_id AND id > @after_id AND state = 'ACTIVE'
ORDER BY id LIMIT @row_limit::bigint;

-- name: FanOutWebhookSubscriptions :many
-- Created before to_sequence, and active or disabled after from_sequence.
SELECT tenant_id, project_id, id, destination_id, event_types, description, state,
    after_sequence, created_at, created_by, disabled_at, disabled_sequence, ordering,
    fanned_out_through, paused_by_delivery_id, ordered_awake_until
FROM webhook_subscriptions
WHERE tenant_id = @tenant_id AND project_id = @project_id AND after_sequence < @to_sequence::bigint
    AND (state = 'ACTIVE' OR disabled_sequence > @from_sequence::bigint)
ORDER BY id LIMIT @row_limit::bigint;

-- name: ListActiveWebhookSubscriptionsOfDestination :many
-- The ACTIVE subscriptions of one destination (deleteWebhookDestination
-- ends them), locked for the rest of the transaction.
SELECT tenant_id, project_id, id, destination_id, event_types, description, state,
    after_sequence, created_at, created_by, disabled_at, disabled_sequence, ordering,
    fanned_out_through, paused_by_delivery_id, ordered_awake_until
FROM webhook_subscriptions
WHERE tenant_id = @tenant_id AND project_id = @project_id AND destination_id = @destination_id AND state = 'ACTIVE'
ORDER BY id FOR UPDATE;
