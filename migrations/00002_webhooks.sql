-- +goose Up

-- Where webhooks go. Only the id is referenced elsewhere; the URL lives here
-- and the signing secrets, encrypted, in webhook_destination_secrets.
CREATE TABLE webhook_destinations (
    tenant_id   text COLLATE "C" NOT NULL,
    project_id  text COLLATE "C" NOT NULL,
    id          uuid NOT NULL PRIMARY KEY,
    url         text NOT NULL,
    description text NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL,
    created_by  text NOT NULL,
    secret_rotated_at timestamptz
);

CREATE INDEX webhook_destinations_project_idx ON webhook_destinations (tenant_id, project_id, id);

-- Signing secrets, AES-256-GCM sealed under the master key (nonce prepended,
-- the destination and secret ids as associated data). expires_at is NULL for
-- the current secret and set for one being rotated out; every unexpired
-- secret signs.
CREATE TABLE webhook_destination_secrets (
    destination_id uuid NOT NULL REFERENCES webhook_destinations (id),
    id             uuid NOT NULL PRIMARY KEY,
    sealed         bytea NOT NULL,
    created_at     timestamptz NOT NULL,
    expires_at     timestamptz
);

CREATE INDEX webhook_destination_secrets_destination_idx ON webhook_destination_secrets (destination_id);

-- What to deliver where. after_sequence is the project's audit sequence of
-- the subscription's own creation event: it receives events after it.
CREATE TABLE webhook_subscriptions (
    tenant_id      text COLLATE "C" NOT NULL,
    project_id     text COLLATE "C" NOT NULL,
    id             uuid NOT NULL PRIMARY KEY,
    destination_id uuid NOT NULL REFERENCES webhook_destinations (id),
    event_types    text[] NOT NULL CHECK (cardinality(event_types) BETWEEN 1 AND 50),
    description    text NOT NULL DEFAULT '',
    state          text NOT NULL CHECK (state IN ('ACTIVE', 'DISABLED')),
    after_sequence bigint NOT NULL,
    created_at     timestamptz NOT NULL,
    created_by     text NOT NULL,
    disabled_at    timestamptz
);

CREATE INDEX webhook_subscriptions_project_idx ON webhook_subscriptions (tenant_id, project_id, id);
CREATE INDEX webhook_subscriptions_active_idx ON webhook_subscriptions (tenant_id, project_id) WHERE state = 'ACTIVE';

-- One delivery per (subscription, event): the unique constraint makes the
-- fan-out idempotent. idempotency_key is the webhook-id of every attempt.
CREATE TABLE webhook_deliveries (
    tenant_id        text COLLATE "C" NOT NULL,
    project_id       text COLLATE "C" NOT NULL,
    id               uuid NOT NULL PRIMARY KEY,
    subscription_id  uuid NOT NULL REFERENCES webhook_subscriptions (id),
    destination_id   uuid NOT NULL REFERENCES webhook_destinations (id),
    event_id         uuid NOT NULL,
    event_sequence   bigint NOT NULL,
    event_type       text COLLATE "C" NOT NULL,
    idempotency_key  text COLLATE "C" NOT NULL,
    state            text NOT NULL CHECK (state IN ('PENDING', 'DELIVERING', 'DELIVERED', 'RETRYING', 'DEAD_LETTERED')),
    attempt_count    integer NOT NULL DEFAULT 0,
    max_attempts     integer NOT NULL CHECK (max_attempts > 0),
    next_attempt_at  timestamptz,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    delivered_at     timestamptz,
    dead_lettered_at timestamptz,
    last_error       text NOT NULL DEFAULT '',
    UNIQUE (subscription_id, event_id)
);

CREATE INDEX webhook_deliveries_project_idx ON webhook_deliveries (tenant_id, project_id, id);
CREATE INDEX webhook_deliveries_state_idx ON webhook_deliveries (tenant_id, project_id, state, id);
CREATE INDEX webhook_deliveries_event_idx ON webhook_deliveries (tenant_id, event_id);

-- Evidence of each attempt. An attempt is inserted as DELIVERING and
-- committed before its request is sent; its outcome is written after.
CREATE TABLE webhook_delivery_attempts (
    delivery_id   uuid NOT NULL REFERENCES webhook_deliveries (id),
    number        integer NOT NULL CHECK (number > 0),
    outcome       text NOT NULL CHECK (outcome IN ('DELIVERING', 'SUCCEEDED', 'FAILED', 'UNKNOWN')),
    started_at    timestamptz NOT NULL,
    finished_at   timestamptz,
    status_code   integer,
    latency_us    bigint,
    error_class   text NOT NULL DEFAULT '',
    error         text NOT NULL DEFAULT '',
    response_body text NOT NULL DEFAULT '',
    PRIMARY KEY (delivery_id, number)
);

-- +goose Down
DROP TABLE webhook_delivery_attempts;
DROP TABLE webhook_deliveries;
DROP TABLE webhook_subscriptions;
DROP TABLE webhook_destination_secrets;
DROP TABLE webhook_destinations;
