-- +goose Up

-- A delivery's succeeded attempt lives in its delivery's row, as the
-- attempt under way does (migration 00010's comment, store
-- SaveWebhookDeliveriesIf): its number is attempt_count, its end
-- delivered_at, its outcome SUCCEEDED (state DELIVERED), and these columns
-- hold the rest. No attempt row is written for it: a delivery that
-- succeeds at its first try costs one row, not two (an insert, an index
-- entry, their WAL), the webhook-delivery benchmark's fan-out rows
-- (docs/benchmarks.md). Attempts that did not succeed keep their rows in
-- webhook_delivery_attempts; a success never has a later attempt, so the
-- folded attempt is always the last. attempt_started_at IS NULL on every
-- other row, and on deliveries delivered before this migration (their
-- succeeded attempt has its row). Adding nullable columns, and one whose
-- default is a constant, rewrites no partition.
ALTER TABLE webhook_deliveries
    ADD COLUMN attempt_started_at timestamptz,
    ADD COLUMN attempt_status_code integer,
    ADD COLUMN attempt_latency_us bigint,
    ADD COLUMN attempt_response_body text NOT NULL DEFAULT '';

-- +goose Down
-- The folded attempts get their rows back before the columns go.
INSERT INTO webhook_delivery_attempts (delivery_id, number, outcome, started_at, finished_at, status_code,
    latency_us, error_class, error, response_body)
SELECT id, attempt_count, 'SUCCEEDED', attempt_started_at, delivered_at, attempt_status_code,
    attempt_latency_us, '', '', attempt_response_body
FROM webhook_deliveries WHERE attempt_started_at IS NOT NULL
ON CONFLICT (delivery_id, number) DO NOTHING;
ALTER TABLE webhook_deliveries
    DROP COLUMN attempt_started_at,
    DROP COLUMN attempt_status_code,
    DROP COLUMN attempt_latency_us,
    DROP COLUMN attempt_response_body;
