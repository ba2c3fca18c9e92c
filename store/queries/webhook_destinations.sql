-- name: InsertWebhookDestination :exec
-- Queued by InsertWebhookDestination with the first secret: positional
-- parameters, in the order the batch passes them.
INSERT INTO webhook_destinations (tenant_id, project_id, id, url, description, created_at, created_by)
VALUES ($1, $2, $3, $4, $5, $6, $7);

-- name: GetWebhookDestination :one
-- The destination with its count of valid secrets, also a deleted one,
-- whose deleted_at is set. WebhookBatchSendContext queues it in its batch:
-- positional parameters.
SELECT d.tenant_id, d.project_id, d.id, d.url, d.description, d.created_at, d.created_by,
    d.secret_rotated_at, (SELECT count(*) FROM webhook_destination_secrets s
        WHERE s.destination_id = d.id AND (s.expires_at IS NULL OR s.expires_at > clock_timestamp())) AS active_secrets,
    d.state, d.disabled_reason, d.disabled_at, d.deleted_at, d.rate_limit_per_second, d.max_in_flight, d.headers,
    d.consecutive_failures, d.failing_since, d.last_success_at, d.last_failure_at, d.circuit_open_until,
    d.circuit_opens, d.probe_until, d.hour_start, d.hour_succeeded, d.hour_failed, d.prev_hour_succeeded,
    d.prev_hour_failed
FROM webhook_destinations d WHERE d.tenant_id = $1 AND d.id = $2;

-- name: LockWebhookDestination :one
-- GetWebhookDestination, locking the row for the rest of the transaction.
SELECT d.tenant_id, d.project_id, d.id, d.url, d.description, d.created_at, d.created_by,
    d.secret_rotated_at, (SELECT count(*) FROM webhook_destination_secrets s
        WHERE s.destination_id = d.id AND (s.expires_at IS NULL OR s.expires_at > clock_timestamp())) AS active_secrets,
    d.state, d.disabled_reason, d.disabled_at, d.deleted_at, d.rate_limit_per_second, d.max_in_flight, d.headers,
    d.consecutive_failures, d.failing_since, d.last_success_at, d.last_failure_at, d.circuit_open_until,
    d.circuit_opens, d.probe_until, d.hour_start, d.hour_succeeded, d.hour_failed, d.prev_hour_succeeded,
    d.prev_hour_failed
FROM webhook_destinations d WHERE d.tenant_id = $1 AND d.id = $2 FOR UPDATE OF d;

-- name: ListWebhookDestinations :many
-- The project's destinations that were not deleted.
SELECT d.tenant_id, d.project_id, d.id, d.url, d.description, d.created_at, d.created_by,
    d.secret_rotated_at, (SELECT count(*) FROM webhook_destination_secrets s
        WHERE s.destination_id = d.id AND (s.expires_at IS NULL OR s.expires_at > clock_timestamp())) AS active_secrets,
    d.state, d.disabled_reason, d.disabled_at, d.deleted_at, d.rate_limit_per_second, d.max_in_flight, d.headers,
    d.consecutive_failures, d.failing_since, d.last_success_at, d.last_failure_at, d.circuit_open_until,
    d.circuit_opens, d.probe_until, d.hour_start, d.hour_succeeded, d.hour_failed, d.prev_hour_succeeded,
    d.prev_hour_failed
FROM webhook_destinations d
WHERE d.tenant_id = @tenant_id AND d.project_id = @project_id AND d.id > @after_id AND d.deleted_at IS NULL
ORDER BY d.id LIMIT @row_limit::bigint;

-- name: SetWebhookDestinationSecretRotated :exec
-- Queued by RotateWebhookDestinationSecret: positional parameters, in the
-- order the batch passes them.
UPDATE webhook_destinations SET secret_rotated_at = $2 WHERE id = $1;

-- name: UpdateWebhookDestinationSettings :exec
-- The settings updateWebhookDestination changes. A new rate limit starts
-- with a full bucket.
UPDATE webhook_destinations SET url = @url, description = @description, max_in_flight = @max_in_flight,
    headers = @headers,
    rate_tokens = CASE WHEN rate_limit_per_second IS DISTINCT FROM @rate_limit_per_second
        THEN COALESCE(@rate_limit_per_second, 0) ELSE rate_tokens END,
    rate_at = CASE WHEN rate_limit_per_second IS DISTINCT FROM @rate_limit_per_second
        THEN @now::timestamptz ELSE rate_at END,
    rate_limit_per_second = @rate_limit_per_second
WHERE tenant_id = @tenant_id AND id = @id;

-- name: SaveWebhookDestinationState :exec
-- A destination's lifecycle and health as the domain changed them.
UPDATE webhook_destinations SET state = @state, disabled_reason = @disabled_reason, disabled_at = @disabled_at,
    deleted_at = @deleted_at, consecutive_failures = @consecutive_failures, failing_since = @failing_since,
    last_success_at = @last_success_at, last_failure_at = @last_failure_at, circuit_open_until = @circuit_open_until,
    circuit_opens = @circuit_opens, probe_until = @probe_until, hour_start = @hour_start,
    hour_succeeded = @hour_succeeded, hour_failed = @hour_failed, prev_hour_succeeded = @prev_hour_succeeded,
    prev_hour_failed = @prev_hour_failed
WHERE tenant_id = @tenant_id AND id = @id;

-- name: RecordWebhookDestinationSuccesses :execrows
-- Counts @succeeded successful attempts at @now in the health of a
-- destination whose health is steady (domain.WebhookDestinationHealth.Steady,
-- the same condition: @hour_start is @now's clock hour), as RecordAttempts
-- would, in one statement that locks the row only until the end of the
-- transaction. No row: not steady (or deleted, or gone), the caller locks
-- the row and applies RecordAttempts.
UPDATE webhook_destinations SET last_success_at = @now::timestamptz,
    hour_succeeded = hour_succeeded + @succeeded::int
WHERE tenant_id = @tenant_id AND id = @id AND deleted_at IS NULL
    AND circuit_open_until IS NULL AND circuit_opens = 0 AND probe_until IS NULL
    AND consecutive_failures = 0 AND failing_since IS NULL AND hour_start = @hour_start::timestamptz;

-- name: ClaimWebhookDestinationProbe :execrows
-- Claims the one probe of a half-open breaker (open until at most @now, no
-- probe out) until @probe_until: one process, one job wins it.
UPDATE webhook_destinations SET probe_until = @probe_until
WHERE tenant_id = @tenant_id AND id = @id AND circuit_open_until <= @now::timestamptz
    AND (probe_until IS NULL OR probe_until <= @now);

-- name: TakeWebhookDestinationTokens :one
-- Takes up to @want whole tokens from the destination's rate limit bucket
-- (rate_limit_per_second tokens a second, at most one second's worth held)
-- at @now; returns how many it took and the fraction left.
WITH b AS (
    SELECT w.id, LEAST(w.rate_limit_per_second::float8, w.rate_tokens
        + GREATEST(0::float8, (EXTRACT(EPOCH FROM @now::timestamptz) - EXTRACT(EPOCH FROM COALESCE(w.rate_at, @now)))::float8)
        * w.rate_limit_per_second) AS available
    FROM webhook_destinations w
    WHERE w.tenant_id = @tenant_id AND w.id = @id AND w.rate_limit_per_second IS NOT NULL
    FOR UPDATE
), t AS (
    SELECT b.id, b.available, LEAST(floor(b.available), @want::int)::int AS taken FROM b
)
UPDATE webhook_destinations d SET rate_tokens = t.available - t.taken, rate_at = @now
FROM t WHERE d.id = t.id
RETURNING t.taken, (t.available - t.taken)::float8 AS remaining;
