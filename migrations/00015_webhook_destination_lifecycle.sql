-- +goose Up

-- A destination's lifecycle, limits, custom headers and health
-- (docs/webhooks.md, "Destination lifecycle" and "Health"). Health lives
-- here, in PostgreSQL, so that every process sees one circuit breaker and
-- one rate limit per destination.
--
--   state                 ENABLED, DISABLED (by a command) or AUTO_DISABLED
--                         (by the service: failing too long, or 410 Gone)
--   deleted_at            set by deleteWebhookDestination; the row stays as
--                         the evidence its deliveries refer to, but no query
--                         shows it again
--   rate_limit_per_second requests per second across all processes (NULL: none);
--                         rate_tokens/rate_at are its token bucket
--   max_in_flight         concurrent requests per process (NULL: the service's)
--   headers               custom request headers, [{"name":…,"value":…}]
--   consecutive_failures  failed attempts since the last success
--   failing_since         first failure since the last success
--   circuit_open_until    breaker open: no request before it, then one probe
--   circuit_opens         failed probes in a row: the backoff's exponent
--   probe_until           a probe is out until then
--   hour_*                attempts of the current and previous clock hour,
--                         for the success rate over the last hour
ALTER TABLE webhook_destinations
    ADD COLUMN state text NOT NULL DEFAULT 'ENABLED' CHECK (state IN ('ENABLED', 'DISABLED', 'AUTO_DISABLED')),
    ADD COLUMN disabled_reason text NOT NULL DEFAULT '',
    ADD COLUMN disabled_at timestamptz,
    ADD COLUMN deleted_at timestamptz,
    ADD COLUMN rate_limit_per_second integer CHECK (rate_limit_per_second > 0),
    ADD COLUMN rate_tokens double precision NOT NULL DEFAULT 0,
    ADD COLUMN rate_at timestamptz,
    ADD COLUMN max_in_flight integer CHECK (max_in_flight > 0),
    ADD COLUMN headers jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(headers) = 'array'),
    ADD COLUMN consecutive_failures integer NOT NULL DEFAULT 0,
    ADD COLUMN failing_since timestamptz,
    ADD COLUMN last_success_at timestamptz,
    ADD COLUMN last_failure_at timestamptz,
    ADD COLUMN circuit_open_until timestamptz,
    ADD COLUMN circuit_opens integer NOT NULL DEFAULT 0,
    ADD COLUMN probe_until timestamptz,
    ADD COLUMN hour_start timestamptz,
    ADD COLUMN hour_succeeded integer NOT NULL DEFAULT 0,
    ADD COLUMN hour_failed integer NOT NULL DEFAULT 0,
    ADD COLUMN prev_hour_succeeded integer NOT NULL DEFAULT 0,
    ADD COLUMN prev_hour_failed integer NOT NULL DEFAULT 0;

-- PAUSED: waiting while its destination is disabled, without using an
-- attempt. CANCELLED: its destination was deleted (final; the reason in
-- last_error).
ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_state_check;
ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_state_check
    CHECK (state IN ('PENDING', 'DELIVERING', 'DELIVERED', 'RETRYING', 'DEAD_LETTERED', 'PAUSED', 'CANCELLED'));

-- +goose Down
ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_state_check;
ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_state_check
    CHECK (state IN ('PENDING', 'DELIVERING', 'DELIVERED', 'RETRYING', 'DEAD_LETTERED'));
ALTER TABLE webhook_destinations
    DROP COLUMN state, DROP COLUMN disabled_reason, DROP COLUMN disabled_at, DROP COLUMN deleted_at,
    DROP COLUMN rate_limit_per_second, DROP COLUMN rate_tokens, DROP COLUMN rate_at, DROP COLUMN max_in_flight,
    DROP COLUMN headers, DROP COLUMN consecutive_failures, DROP COLUMN failing_since, DROP COLUMN last_success_at,
    DROP COLUMN last_failure_at, DROP COLUMN circuit_open_until, DROP COLUMN circuit_opens, DROP COLUMN probe_until,
    DROP COLUMN hour_start, DROP COLUMN hour_succeeded, DROP COLUMN hour_failed, DROP COLUMN prev_hour_succeeded,
    DROP COLUMN prev_hour_failed;
