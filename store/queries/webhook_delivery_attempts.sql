-- name: ListWebhookDeliveryAttempts :many
-- The attempts of the deliveries among ids, by delivery and number.
-- Queries of whole attempts select every column in table order: sqlc gives
-- them dbsqlc.WebhookDeliveryAttempt.
SELECT delivery_id, number, outcome, started_at, finished_at, status_code, latency_us, error_class, error, response_body
FROM webhook_delivery_attempts
WHERE delivery_id = ANY(@delivery_ids::uuid[]) ORDER BY delivery_id, number;

-- name: SaveWebhookDeliveryAttempt :exec
-- Inserts or updates (by number) an attempt of a delivery.
INSERT INTO webhook_delivery_attempts (delivery_id, number, outcome, started_at, finished_at, status_code,
    latency_us, error_class, error, response_body)
VALUES (@delivery_id, @number, @outcome, @started_at, @finished_at, @status_code,
    @latency_us, @error_class, @error, @response_body)
ON CONFLICT (delivery_id, number) DO UPDATE SET outcome = EXCLUDED.outcome, finished_at = EXCLUDED.finished_at,
    status_code = EXCLUDED.status_code, latency_us = EXCLUDED.latency_us, error_class = EXCLUDED.error_class,
    error = EXCLUDED.error, response_body = EXCLUDED.response_body;
