-- +goose Up

-- Retention purges a prefix of a project's chain. The head keeps where the
-- purged prefix ends and the chain hash of its last event, the anchor from
-- which the remaining chain is verified.
ALTER TABLE audit_project_heads
    ADD COLUMN purged_through bigint NOT NULL DEFAULT 0 CHECK (purged_through >= 0),
    ADD COLUMN purged_hash    bytea  NOT NULL DEFAULT '\x0000000000000000000000000000000000000000000000000000000000000000'::bytea,
    ADD CONSTRAINT audit_project_heads_purge_within CHECK (purged_through <= last_sequence);

-- Heads only move forward: neither the sequence nor the purged prefix goes
-- back, so a purge bound cannot be raised and lowered again to delete
-- something else.
-- +goose StatementBegin
CREATE FUNCTION audit_project_heads_forward_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.last_sequence < OLD.last_sequence OR NEW.purged_through < OLD.purged_through
       OR NEW.tenant_id <> OLD.tenant_id OR NEW.project_id <> OLD.project_id THEN
        RAISE EXCEPTION 'audit_project_heads only move forward'
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER audit_project_heads_forward_only
    BEFORE UPDATE ON audit_project_heads
    FOR EACH ROW EXECUTE FUNCTION audit_project_heads_forward_only();

-- The one path by which audit events are deleted: the retention purge sets
-- aether.audit_purge for its transaction, and only events at or below their
-- project's purged prefix may go. UPDATE and TRUNCATE stay refused.
-- +goose StatementBegin
CREATE FUNCTION audit_events_purge_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('aether.audit_purge', true) = 'on' AND OLD.sequence <= (
        SELECT h.purged_through FROM audit_project_heads h
        WHERE h.tenant_id = OLD.tenant_id AND h.project_id = OLD.project_id) THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'audit_events is append-only: DELETE is allowed only to the retention purge'
        USING ERRCODE = 'integrity_constraint_violation';
END
$$;
-- +goose StatementEnd

DROP TRIGGER audit_events_append_only ON audit_events;
CREATE TRIGGER audit_events_no_update
    BEFORE UPDATE ON audit_events
    FOR EACH ROW EXECUTE FUNCTION audit_events_reject_change();
CREATE TRIGGER audit_events_purge_only
    BEFORE DELETE ON audit_events
    FOR EACH ROW EXECUTE FUNCTION audit_events_purge_only();

-- A tenant's own retention window, set by an admin; without a row the
-- service's default applies.
CREATE TABLE audit_retention_overrides (
    tenant_id      text COLLATE "C" PRIMARY KEY,
    retention_days integer NOT NULL CHECK (retention_days BETWEEN 1 AND 36500),
    updated_at     timestamptz NOT NULL,
    updated_by     text NOT NULL
);

-- +goose Down
DROP TABLE audit_retention_overrides;
DROP TRIGGER audit_events_purge_only ON audit_events;
DROP TRIGGER audit_events_no_update ON audit_events;
CREATE TRIGGER audit_events_append_only
    BEFORE UPDATE OR DELETE ON audit_events
    FOR EACH ROW EXECUTE FUNCTION audit_events_reject_change();
DROP FUNCTION audit_events_purge_only();
DROP TRIGGER audit_project_heads_forward_only ON audit_project_heads;
DROP FUNCTION audit_project_heads_forward_only();
ALTER TABLE audit_project_heads
    DROP CONSTRAINT audit_project_heads_purge_within,
    DROP COLUMN purged_hash,
    DROP COLUMN purged_through;
