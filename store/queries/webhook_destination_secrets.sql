-- name: InsertWebhookDestinationSecret :exec
-- Queued by InsertWebhookDestination and RotateWebhookDestinationSecret:
-- positional parameters, in the order the batches pass them.
INSERT INTO webhook_destination_secrets (destination_id, id, sealed, created_at) VALUES ($1, $2, $3, $4);

-- name: ExpireWebhookDestinationSecrets :exec
-- Queued by RotateWebhookDestinationSecret: the destination's secrets still
-- valid at $3 expire at $2 at the latest. Positional parameters.
UPDATE webhook_destination_secrets SET expires_at = LEAST(COALESCE(expires_at, $2::timestamptz), $2::timestamptz)
WHERE destination_id = $1 AND (expires_at IS NULL OR expires_at > $3::timestamptz);

-- name: ValidWebhookDestinationSecrets :many
-- The destination's secrets valid at $2, newest first. Queued by
-- WebhookBatchSendContext in its batch: positional parameters.
SELECT id, sealed, created_at, expires_at FROM webhook_destination_secrets
WHERE destination_id = $1 AND (expires_at IS NULL OR expires_at > $2) ORDER BY created_at DESC, id DESC;
