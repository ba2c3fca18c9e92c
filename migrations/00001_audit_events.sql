-- +goose Up

-- The head of each tenant/project's audit chain. Appending events locks this
-- row (SELECT ... FOR UPDATE), so sequences are assigned densely in commit
-- order and chain hashes are computed in Go, once per batch.
CREATE TABLE audit_project_heads (
    tenant_id     text COLLATE "C" NOT NULL,
    project_id    text COLLATE "C" NOT NULL,
    last_sequence bigint NOT NULL DEFAULT 0 CHECK (last_sequence >= 0),
    last_hash     bytea  NOT NULL DEFAULT '\x0000000000000000000000000000000000000000000000000000000000000000'::bytea,
    PRIMARY KEY (tenant_id, project_id)
);

-- Immutable audit evidence. Keyed by tenant and project first so that it can
-- later be time-partitioned or tenant-sharded.
CREATE TABLE audit_events (
    tenant_id            text COLLATE "C" NOT NULL,
    project_id           text COLLATE "C" NOT NULL,
    sequence             bigint NOT NULL CHECK (sequence > 0),
    id                   uuid   NOT NULL,
    action               text COLLATE "C" NOT NULL,
    occurred_at          timestamptz NOT NULL,
    recorded_at          timestamptz NOT NULL,
    subject_type         text NOT NULL,
    subject_id           text COLLATE "C" NOT NULL,
    subject_display_name text NOT NULL DEFAULT '',
    resource_type        text COLLATE "C" NOT NULL,
    resource_id          text COLLATE "C" NOT NULL,
    outcome              text NOT NULL,
    -- governance: absent when governance_risk IS NULL
    governance_risk      text,
    governance_reason    text NOT NULL DEFAULT '',
    governance_ticket    text NOT NULL DEFAULT '',
    governance_confirmed_by text NOT NULL DEFAULT '',
    -- correlation: absent when all three are empty
    trace_id             text COLLATE "C" NOT NULL DEFAULT '',
    request_id           text COLLATE "C" NOT NULL DEFAULT '',
    causation_id         text COLLATE "C" NOT NULL DEFAULT '',
    evidence_digests     jsonb NOT NULL DEFAULT '[]',
    -- json, not jsonb: the canonical text covered by chain_hash is kept byte for byte.
    details              json  NOT NULL,
    input_fingerprint    bytea NOT NULL,
    chain_hash           bytea NOT NULL,
    PRIMARY KEY (tenant_id, project_id, sequence),
    UNIQUE (tenant_id, id)
);

CREATE INDEX audit_events_action_idx   ON audit_events (tenant_id, project_id, action, sequence);
CREATE INDEX audit_events_subject_idx  ON audit_events (tenant_id, project_id, subject_id, sequence);
CREATE INDEX audit_events_resource_idx ON audit_events (tenant_id, project_id, resource_type, resource_id, sequence);
CREATE INDEX audit_events_occurred_idx ON audit_events (tenant_id, project_id, occurred_at);

-- Append-only at the database level: UPDATE, DELETE and TRUNCATE are refused.
-- +goose StatementBegin
CREATE FUNCTION audit_events_reject_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit_events is append-only: % is not allowed', TG_OP
        USING ERRCODE = 'integrity_constraint_violation';
END
$$;
-- +goose StatementEnd

CREATE TRIGGER audit_events_append_only
    BEFORE UPDATE OR DELETE ON audit_events
    FOR EACH ROW EXECUTE FUNCTION audit_events_reject_change();

CREATE TRIGGER audit_events_no_truncate
    BEFORE TRUNCATE ON audit_events
    FOR EACH STATEMENT EXECUTE FUNCTION audit_events_reject_change();

-- Idempotency records of mutations that carry an idempotencyKey: the same key
-- with the same request fingerprint replays the stored result; with another
-- fingerprint it fails closed.
CREATE TABLE idempotency_keys (
    tenant_id   text COLLATE "C" NOT NULL,
    operation   text COLLATE "C" NOT NULL,
    key         text COLLATE "C" NOT NULL,
    fingerprint bytea NOT NULL,
    result      jsonb NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, operation, key)
);
CREATE INDEX idempotency_keys_expires_idx ON idempotency_keys (expires_at);

-- +goose Down
DROP TABLE idempotency_keys;
DROP TABLE audit_events;
DROP FUNCTION audit_events_reject_change();
DROP TABLE audit_project_heads;
