-- +goose Up

-- The retention purge, as the one function through which audit events are
-- deleted. The serving process connects as a runtime role that may insert
-- and read events but neither delete nor change them (store.GrantAppRole);
-- this function runs with the rights of its owner, the role that migrates,
-- and deletes only what a retention purge may: the project's oldest events
-- recorded before p_cutoff, at most p_max_events past the purged prefix. It
-- moves the head's purged prefix first (the forward-only trigger on heads
-- keeps it from going back), with the chain hash of the last purged event
-- as the anchor of what remains, and then deletes at or below it under the
-- transaction-local switch the append-only trigger honours. It returns one
-- row (the purged range, its anchor hash and the number of events deleted),
-- or none when nothing is old enough. The caller records the purge's
-- audit.events.purged event in the same transaction.
-- +goose StatementBegin
CREATE FUNCTION aether_purge_audit_events(p_tenant text, p_project text, p_cutoff timestamptz, p_max_events bigint)
RETURNS TABLE (purge_from bigint, purge_through bigint, through_hash bytea, purged bigint)
LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    v_purged  bigint;
    v_last    bigint;
    v_through bigint;
    v_hash    bytea;
    v_count   bigint;
BEGIN
    IF p_max_events IS NULL OR p_max_events < 1 OR p_cutoff IS NULL THEN
        RAISE EXCEPTION 'aether_purge_audit_events: a cutoff and a positive batch size are required'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT h.purged_through, h.last_sequence INTO v_purged, v_last
    FROM audit_project_heads h
    WHERE h.tenant_id = p_tenant AND h.project_id = p_project
    FOR UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    -- The prefix ends before the first event at or after the cutoff (or at
    -- the head), at most p_max_events past the purged prefix: every purged
    -- event is older than the cutoff even if clocks stepped back.
    v_through := LEAST(
        COALESCE((SELECT e.sequence - 1 FROM audit_events e
            WHERE e.tenant_id = p_tenant AND e.project_id = p_project AND e.sequence > v_purged
              AND e.sequence <= v_purged + p_max_events AND e.recorded_at >= p_cutoff
            ORDER BY e.sequence LIMIT 1), v_last),
        v_purged + p_max_events);
    IF v_through <= v_purged THEN
        RETURN;
    END IF;
    SELECT e.chain_hash INTO v_hash FROM audit_events e
    WHERE e.tenant_id = p_tenant AND e.project_id = p_project AND e.sequence = v_through;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'aether_purge_audit_events: event % of %/% is missing', v_through, p_tenant, p_project
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    UPDATE audit_project_heads SET purged_through = v_through, purged_hash = v_hash
    WHERE tenant_id = p_tenant AND project_id = p_project;
    PERFORM set_config('aether.audit_purge', 'on', true);
    DELETE FROM audit_events
    WHERE tenant_id = p_tenant AND project_id = p_project AND sequence BETWEEN v_purged + 1 AND v_through;
    GET DIAGNOSTICS v_count = ROW_COUNT;
    PERFORM set_config('aether.audit_purge', 'off', true);
    purge_from := v_purged + 1;
    purge_through := v_through;
    through_hash := v_hash;
    purged := v_count;
    RETURN NEXT;
END
$$;
-- +goose StatementEnd

-- A SECURITY DEFINER function must not find the caller's objects: its
-- search path is this schema only (pg_catalog first, pg_temp last), fixed
-- to wherever the migration runs.
-- +goose StatementBegin
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION aether_purge_audit_events(text, text, timestamptz, bigint) SET search_path = pg_catalog, %I, pg_temp',
        current_schema());
END
$$;
-- +goose StatementEnd

-- Only the runtime role gets to call it (store.GrantAppRole grants it).
REVOKE ALL ON FUNCTION aether_purge_audit_events(text, text, timestamptz, bigint) FROM PUBLIC;

-- +goose Down
DROP FUNCTION aether_purge_audit_events(text, text, timestamptz, bigint);
