-- +goose Up

-- Partitions of audit_events for past months (issue 19): a database that
-- takes in old history (an import, the scale benchmark's loader) needs the
-- months it writes into to exist first, or the rows land in the DEFAULT
-- partition, which then blocks that month's partition for good. The
-- creator of migration 00022 only creates from the current month on; this
-- one takes the first month too, creates every month of [p_from, p_through]
-- that no bounded partition covers yet (a month overlapping one, the legacy
-- partition of an upgraded database included, is skipped), each exactly as
-- before, and returns how many it created. The one-argument creator, which
-- the periodic job calls, becomes this one from the current month.
--
-- Bounds: both given and finite, p_from at or before p_through, p_through
-- within ten years from now, and at most 240 months per call. Only the
-- owner (the role that migrates, an operator) may call it: the runtime role
-- is given no EXECUTE on it (store.GrantAppRole), since the service itself
-- never writes into the past.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION aether_create_audit_partitions(p_from timestamptz, p_through timestamptz) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    v_from    timestamptz;
    v_to      timestamptz;
    v_name    text;
    v_schema  text := (SELECT c.relnamespace::regnamespace::text FROM pg_class c WHERE c.oid = 'audit_events'::regclass);
    v_created integer := 0;
BEGIN
    IF p_from IS NULL OR p_through IS NULL OR NOT isfinite(p_from) OR NOT isfinite(p_through)
        OR p_from > p_through OR p_through > now() + interval '10 years'
        OR p_through >= (p_from AT TIME ZONE 'UTC' + interval '240 months') AT TIME ZONE 'UTC' THEN
        RAISE EXCEPTION 'aether_create_audit_partitions: a range of at most 240 months, ending within ten years, is required'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- Serialize creators: two maintenance runs must not race on one month.
    PERFORM pg_advisory_xact_lock(hashtextextended('aether_create_audit_partitions', 0));
    v_from := date_trunc('month', p_from, 'UTC');
    WHILE v_from <= p_through LOOP
        v_to := (v_from AT TIME ZONE 'UTC' + interval '1 month') AT TIME ZONE 'UTC';
        v_name := 'audit_events_p' || to_char(v_from AT TIME ZONE 'UTC', 'YYYYMM');
        IF EXISTS (
            SELECT 1 FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
            WHERE i.inhparent = 'audit_events'::regclass AND pg_get_expr(c.relpartbound, c.oid) <> 'DEFAULT'
              AND COALESCE(substring(pg_get_expr(c.relpartbound, c.oid) FROM 'FROM \(''([^'']+)''\)')::timestamptz, '-infinity') < v_to
              AND substring(pg_get_expr(c.relpartbound, c.oid) FROM 'TO \(''([^'']+)''\)')::timestamptz > v_from) THEN
            NULL; -- covered already
        ELSIF EXISTS (SELECT 1 FROM audit_events_default WHERE recorded_at >= v_from AND recorded_at < v_to) THEN
            RAISE WARNING 'aether_create_audit_partitions: audit_events_default holds events of %; % not created', v_from, v_name;
        ELSE
            -- Qualified: the function's search path starts with pg_catalog.
            EXECUTE format('CREATE TABLE %s.%I (LIKE audit_events INCLUDING DEFAULTS INCLUDING CONSTRAINTS) WITH ('
                'autovacuum_analyze_scale_factor = 0, autovacuum_analyze_threshold = 50000, '
                'autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 50000, '
                'autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 200000)', v_schema, v_name);
            EXECUTE format('ALTER TABLE %s.%I ADD CONSTRAINT %I PRIMARY KEY (tenant_id, project_id, sequence), '
                'ADD CONSTRAINT %I UNIQUE (tenant_id, id), '
                'ADD CONSTRAINT %I CHECK (recorded_at >= %L AND recorded_at < %L)',
                v_schema, v_name, v_name || '_pkey', v_name || '_tenant_id_id_key', v_name || '_bound', v_from, v_to);
            EXECUTE format('CREATE TRIGGER audit_events_no_truncate BEFORE TRUNCATE ON %s.%I '
                'FOR EACH STATEMENT EXECUTE FUNCTION audit_events_reject_change()', v_schema, v_name);
            EXECUTE format('ALTER TABLE audit_events ATTACH PARTITION %s.%I FOR VALUES FROM (%L) TO (%L)', v_schema, v_name, v_from, v_to);
            v_created := v_created + 1;
        END IF;
        v_from := v_to;
    END LOOP;
    RETURN v_created;
END
$$;
-- +goose StatementEnd

-- The periodic job's creator: from the current month through p_through.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION aether_create_audit_partitions(p_through timestamptz) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
    IF p_through IS NULL OR p_through > now() + interval '10 years' THEN
        RAISE EXCEPTION 'aether_create_audit_partitions: a bound within ten years is required'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_through < date_trunc('month', now(), 'UTC') THEN
        RETURN 0;
    END IF;
    RETURN aether_create_audit_partitions(now(), p_through);
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION aether_create_audit_partitions(timestamptz, timestamptz) SET search_path = pg_catalog, %I, pg_temp',
        current_schema());
    EXECUTE format('ALTER FUNCTION aether_create_audit_partitions(timestamptz) SET search_path = pg_catalog, %I, pg_temp',
        current_schema());
END
$$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION aether_create_audit_partitions(timestamptz, timestamptz) FROM PUBLIC;

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION aether_create_audit_partitions(p_through timestamptz) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    v_from    timestamptz;
    v_to      timestamptz;
    v_name    text;
    v_schema  text := (SELECT c.relnamespace::regnamespace::text FROM pg_class c WHERE c.oid = 'audit_events'::regclass);
    v_created integer := 0;
BEGIN
    IF p_through IS NULL OR p_through > now() + interval '10 years' THEN
        RAISE EXCEPTION 'aether_create_audit_partitions: a bound within ten years is required'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM pg_advisory_xact_lock(hashtextextended('aether_create_audit_partitions', 0));
    SELECT max(substring(pg_get_expr(c.relpartbound, c.oid) FROM 'TO \(''([^'']+)''\)')::timestamptz)
    INTO v_from
    FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent = 'audit_events'::regclass AND pg_get_expr(c.relpartbound, c.oid) <> 'DEFAULT';
    v_from := greatest(COALESCE(v_from, '-infinity'), date_trunc('month', now(), 'UTC'));
    WHILE v_from <= p_through LOOP
        v_to := (v_from AT TIME ZONE 'UTC' + interval '1 month') AT TIME ZONE 'UTC';
        v_name := 'audit_events_p' || to_char(v_from AT TIME ZONE 'UTC', 'YYYYMM');
        IF EXISTS (SELECT 1 FROM audit_events_default WHERE recorded_at >= v_from AND recorded_at < v_to) THEN
            RAISE WARNING 'aether_create_audit_partitions: audit_events_default holds events of %; % not created', v_from, v_name;
        ELSE
            EXECUTE format('CREATE TABLE %s.%I (LIKE audit_events INCLUDING DEFAULTS INCLUDING CONSTRAINTS) WITH ('
                'autovacuum_analyze_scale_factor = 0, autovacuum_analyze_threshold = 50000, '
                'autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 50000, '
                'autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 200000)', v_schema, v_name);
            EXECUTE format('ALTER TABLE %s.%I ADD CONSTRAINT %I PRIMARY KEY (tenant_id, project_id, sequence), '
                'ADD CONSTRAINT %I UNIQUE (tenant_id, id), '
                'ADD CONSTRAINT %I CHECK (recorded_at >= %L AND recorded_at < %L)',
                v_schema, v_name, v_name || '_pkey', v_name || '_tenant_id_id_key', v_name || '_bound', v_from, v_to);
            EXECUTE format('CREATE TRIGGER audit_events_no_truncate BEFORE TRUNCATE ON %s.%I '
                'FOR EACH STATEMENT EXECUTE FUNCTION audit_events_reject_change()', v_schema, v_name);
            EXECUTE format('ALTER TABLE audit_events ATTACH PARTITION %s.%I FOR VALUES FROM (%L) TO (%L)', v_schema, v_name, v_from, v_to);
            v_created := v_created + 1;
        END IF;
        v_from := v_to;
    END LOOP;
    RETURN v_created;
END
$$;
-- +goose StatementEnd
-- +goose StatementBegin
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION aether_create_audit_partitions(timestamptz) SET search_path = pg_catalog, %I, pg_temp',
        current_schema());
END
$$;
-- +goose StatementEnd
DROP FUNCTION aether_create_audit_partitions(timestamptz, timestamptz);
