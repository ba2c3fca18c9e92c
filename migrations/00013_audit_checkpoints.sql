-- +goose Up

-- Signed checkpoints of each project's chain (docs/audit-chain.md, "Signed
-- checkpoints"): a compact JWS over (sequence, chain hash, purged prefix,
-- previous checkpoint), signed with the service's Ed25519 checkpoint key.
-- At most one per (tenant, project, sequence). issue_number counts a
-- project's checkpoints in the order they were issued (1, 2, …), which is
-- the order previousCheckpoint links them in (not necessarily by sequence:
-- an export may ask for one below the latest). Append-only like
-- audit_events.
CREATE TABLE audit_checkpoints (
    tenant_id           text COLLATE "C" NOT NULL,
    project_id          text COLLATE "C" NOT NULL,
    sequence            bigint NOT NULL CHECK (sequence > 0),
    issue_number        bigint NOT NULL CHECK (issue_number > 0),
    chain_hash          bytea NOT NULL CHECK (octet_length(chain_hash) = 32),
    purged_through      bigint NOT NULL CHECK (purged_through >= 0 AND purged_through < sequence),
    anchor_hash         bytea NOT NULL CHECK (octet_length(anchor_hash) = 32),
    -- SHA-256 of the previous checkpoint's JWS text; NULL for the first.
    previous_checkpoint bytea CHECK (octet_length(previous_checkpoint) = 32),
    -- SHA-256 of this checkpoint's JWS text, what the next one links to.
    jws_digest          bytea NOT NULL CHECK (octet_length(jws_digest) = 32),
    key_id              text NOT NULL,
    jws                 text NOT NULL,
    issued_at           timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, project_id, sequence),
    UNIQUE (tenant_id, project_id, issue_number),
    CHECK ((issue_number = 1) = (previous_checkpoint IS NULL))
);

-- +goose StatementBegin
CREATE FUNCTION audit_checkpoints_reject_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit_checkpoints is append-only: % is not allowed', TG_OP
        USING ERRCODE = 'integrity_constraint_violation';
END
$$;
-- +goose StatementEnd

CREATE TRIGGER audit_checkpoints_append_only
    BEFORE UPDATE OR DELETE ON audit_checkpoints
    FOR EACH ROW EXECUTE FUNCTION audit_checkpoints_reject_change();

CREATE TRIGGER audit_checkpoints_no_truncate
    BEFORE TRUNCATE ON audit_checkpoints
    FOR EACH STATEMENT EXECUTE FUNCTION audit_checkpoints_reject_change();

-- AUDIT exports by sequence range (from_sequence..to_sequence, inclusive)
-- instead of a time range, and the checkpoint an AUDIT export recorded at
-- its last exported sequence.
ALTER TABLE data_exports
    ALTER COLUMN range_from DROP NOT NULL,
    ALTER COLUMN range_to DROP NOT NULL,
    ADD COLUMN from_sequence bigint,
    ADD COLUMN to_sequence bigint,
    ADD COLUMN checkpoint_sequence bigint,
    ADD COLUMN checkpoint_jws text,
    ADD CONSTRAINT data_exports_one_range CHECK (
        (range_from IS NOT NULL AND range_to IS NOT NULL AND from_sequence IS NULL AND to_sequence IS NULL)
        OR (range_from IS NULL AND range_to IS NULL AND kind = 'AUDIT'
            AND from_sequence >= 1 AND to_sequence >= from_sequence)),
    ADD CONSTRAINT data_exports_checkpoint CHECK ((checkpoint_sequence IS NULL) = (checkpoint_jws IS NULL));

-- +goose Down
ALTER TABLE data_exports
    DROP CONSTRAINT data_exports_checkpoint,
    DROP CONSTRAINT data_exports_one_range,
    DROP COLUMN checkpoint_jws,
    DROP COLUMN checkpoint_sequence,
    DROP COLUMN to_sequence,
    DROP COLUMN from_sequence,
    ALTER COLUMN range_to SET NOT NULL,
    ALTER COLUMN range_from SET NOT NULL;
DROP TABLE audit_checkpoints;
DROP FUNCTION audit_checkpoints_reject_change();
