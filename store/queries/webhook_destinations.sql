-- name: InsertWebhookDestination :exec
-- Queued by InsertWebhookDestination with the first secret: positional
-- parameters, in the order the batch passes them.
INSERT INTO webhook_destinations (tenant_id, project_id, id, url, description, created_at, created_by)
VALUES ($1, $2, $3, $4, $5, $6, $7);

-- name: GetWebhookDestination :one
-- The destination with its count of valid secrets. WebhookBatchSendContext
-- queues it in its batch: positional parameters.
SELECT d.tenant_id, d.project_id, d.id, d.url, d.description, d.created_at, d.created_by,
    d.secret_rotated_at, (SELECT count(*) FROM webhook_destination_secrets s
        WHERE s.destination_id = d.id AND (s.expires_at IS NULL OR s.expires_at > clock_timestamp())) AS active_secrets
FROM webhook_destinations d WHERE d.tenant_id = $1 AND d.id = $2;

-- name: LockWebhookDestination :one
-- GetWebhookDestination, locking the row for the rest of the transaction.
SELECT d.tenant_id, d.project_id, d.id, d.url, d.description, d.created_at, d.created_by,
    d.secret_rotated_at, (SELECT count(*) FROM webhook_destination_secrets s
        WHERE s.destination_id = d.id AND (s.expires_at IS NULL OR s.expires_at > clock_timestamp())) AS active_secrets
FROM webhook_destinations d WHERE d.tenant_id = $1 AND d.id = $2 FOR UPDATE OF d;

-- name: ListWebhookDestinations :many
SELECT d.tenant_id, d.project_id, d.id, d.url, d.description, d.created_at, d.created_by,
    d.secret_rotated_at, (SELECT count(*) FROM webhook_destination_secrets s
        WHERE s.destination_id = d.id AND (s.expires_at IS NULL OR s.expires_at > clock_timestamp())) AS active_secrets
FROM webhook_destinations d
WHERE d.tenant_id = @tenant_id AND d.project_id = @project_id AND d.id > @after_id
ORDER BY d.id LIMIT @row_limit::bigint;

-- name: SetWebhookDestinationSecretRotated :exec
-- Queued by RotateWebhookDestinationSecret: positional parameters, in the
-- order the batch passes them.
UPDATE webhook_destinations SET secret_rotated_at = $2 WHERE id = $1;
