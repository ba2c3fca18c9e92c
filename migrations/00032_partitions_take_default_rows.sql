-- +goose Up

-- A month whose rows already sit in the DEFAULT partition (a device clock
-- far ahead wrote alarm or telemetry history of a month not created yet;
-- old history loaded before its months existed; a server clock that
-- jumped) could never get its partition: ATTACH refuses a range the
-- DEFAULT partition holds rows of ("updated partition constraint for
-- default partition would be violated"), so aether_create_partition failed
-- for that month at every run, and aether_create_audit_partitions skipped
-- it with a WARNING; every later row of the month then went into the
-- DEFAULT partition too.
--
-- Both creators now move those rows into the new month as they create it,
-- in their one transaction (aether_move_default_rows): the month's table
-- is created apart as before, the DEFAULT partition is locked (ACCESS
-- EXCLUSIVE, which ATTACH takes anyway, the wait bounded by a lock_timeout
-- of 5 s unless the transaction set one: a busy table fails this run and
-- the next run tries again), its rows of the month are deleted and inserted into
-- the new table unchanged, and the table is attached. Rows keep every
-- column, so sequences, chain hashes, recorded_at and the runs of months of
-- audit_events (audit_project_segments) are as they were; only the
-- partition holding them changes. Readers and writers of other months go
-- on; those of the DEFAULT partition wait for the commit. The DEFAULT
-- partition's own triggers (audit_events' purge-only guard against DELETE)
-- are disabled for the move only, inside the transaction and under its
-- lock, so no other session ever sees them off.
-- +goose StatementBegin
CREATE FUNCTION aether_move_default_rows(p_table text, p_schema text, p_partition text, p_kind text,
    p_from timestamptz, p_to timestamptz) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_default text;
    v_column  text;
    v_columns text;
    v_range   text;
    v_any     boolean;
    v_moved   bigint;
BEGIN
    SELECT c.relname INTO v_default FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent = format('%I.%I', p_schema, p_table)::regclass AND pg_get_expr(c.relpartbound, c.oid) = 'DEFAULT';
    IF v_default IS NULL THEN
        RETURN 0;
    END IF;
    SELECT a.attname INTO v_column FROM pg_partitioned_table t
    JOIN pg_attribute a ON a.attrelid = t.partrelid AND a.attnum = t.partattrs[0]
    WHERE t.partrelid = format('%I.%I', p_schema, p_table)::regclass;
    v_range := format('%I >= %s AND %I < %s', v_column, aether_partition_bound(p_kind, p_from),
        v_column, aether_partition_bound(p_kind, p_to));
    EXECUTE format('SELECT EXISTS (SELECT 1 FROM %I.%I WHERE %s)', p_schema, v_default, v_range) INTO v_any;
    IF NOT v_any THEN
        RETURN 0;
    END IF;
    IF current_setting('lock_timeout') IN ('0', '0ms') THEN
        PERFORM set_config('lock_timeout', '5s', true);
    END IF;
    EXECUTE format('LOCK TABLE %I.%I IN ACCESS EXCLUSIVE MODE', p_schema, v_default);
    SELECT string_agg(quote_ident(a.attname), ', ' ORDER BY a.attnum) INTO v_columns FROM pg_attribute a
    WHERE a.attrelid = format('%I.%I', p_schema, p_table)::regclass AND a.attnum > 0 AND NOT a.attisdropped;
    EXECUTE format('ALTER TABLE %I.%I DISABLE TRIGGER USER', p_schema, v_default);
    EXECUTE format('WITH moved AS (DELETE FROM %I.%I WHERE %s RETURNING %s) INSERT INTO %I.%I (%s) SELECT %s FROM moved',
        p_schema, v_default, v_range, v_columns, p_schema, p_partition, v_columns, v_columns);
    GET DIAGNOSTICS v_moved = ROW_COUNT;
    EXECUTE format('ALTER TABLE %I.%I ENABLE TRIGGER USER', p_schema, v_default);
    RAISE NOTICE 'aether_move_default_rows: % rows of [%, %) moved from %.% into %.%', v_moved, p_from, p_to,
        p_schema, v_default, p_schema, p_partition;
    RETURN v_moved;
END
$$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION aether_move_default_rows(text, text, text, text, timestamptz, timestamptz) FROM PUBLIC;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION aether_create_partition(p_table text, p_month timestamptz) RETURNS text
LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    v_kind    text;
    v_options text;
    v_from    timestamptz;
    v_to      timestamptz;
    v_name    text;
    v_schema  text;
BEGIN
    SELECT t.bound_kind, t.storage_options INTO v_kind, v_options
    FROM aether_partitioned_tables t WHERE t.table_name = p_table;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'aether_create_partition: % is not a partitioned table of the service', p_table
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_from := date_trunc('month', p_month AT TIME ZONE 'UTC') AT TIME ZONE 'UTC';
    v_to := (date_trunc('month', p_month AT TIME ZONE 'UTC') + interval '1 month') AT TIME ZONE 'UTC';
    v_name := p_table || '_p' || to_char(v_from AT TIME ZONE 'UTC', 'YYYYMM');
    PERFORM pg_advisory_xact_lock(hashtext('aether_partitions'), hashtext(p_table));
    IF EXISTS (SELECT 1 FROM aether_partitions p
               WHERE p.table_name = p_table AND p.range_from < v_to AND p.range_to > v_from) THEN
        RETURN NULL;
    END IF;
    PERFORM set_config('lock_timeout', '5s', true);
    -- Created next to its table (pg_catalog comes first in the path).
    SELECT n.nspname INTO v_schema FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE c.oid = p_table::regclass;
    EXECUTE format('CREATE TABLE %I.%I (LIKE %I.%I INCLUDING DEFAULTS INCLUDING CONSTRAINTS)%s', v_schema, v_name,
        v_schema, p_table, CASE WHEN v_options = '' THEN '' ELSE ' WITH (' || v_options || ')' END);
    PERFORM aether_move_default_rows(p_table, v_schema, v_name, v_kind, v_from, v_to);
    EXECUTE format('ALTER TABLE %I.%I ATTACH PARTITION %I.%I FOR VALUES FROM (%s) TO (%s)', v_schema, p_table, v_schema, v_name,
        aether_partition_bound(v_kind, v_from), aether_partition_bound(v_kind, v_to));
    INSERT INTO aether_partitions (partition_name, table_name, range_from, range_to)
    VALUES (v_name, p_table, v_from, v_to);
    RETURN v_name;
END
$$;
-- +goose StatementEnd

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
            PERFORM aether_move_default_rows('audit_events', (SELECT n.nspname FROM pg_class c JOIN pg_namespace n
                ON n.oid = c.relnamespace WHERE c.oid = 'audit_events'::regclass), v_name, 'TIMESTAMPTZ', v_from, v_to);
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
    EXECUTE format('ALTER FUNCTION aether_move_default_rows(text, text, text, text, timestamptz, timestamptz) SET search_path = pg_catalog, %I, pg_temp',
        current_schema());
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION aether_create_partition(p_table text, p_month timestamptz) RETURNS text
LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    v_kind    text;
    v_options text;
    v_from    timestamptz;
    v_to      timestamptz;
    v_name    text;
    v_schema  text;
BEGIN
    SELECT t.bound_kind, t.storage_options INTO v_kind, v_options
    FROM aether_partitioned_tables t WHERE t.table_name = p_table;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'aether_create_partition: % is not a partitioned table of the service', p_table
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_from := date_trunc('month', p_month AT TIME ZONE 'UTC') AT TIME ZONE 'UTC';
    v_to := (date_trunc('month', p_month AT TIME ZONE 'UTC') + interval '1 month') AT TIME ZONE 'UTC';
    v_name := p_table || '_p' || to_char(v_from AT TIME ZONE 'UTC', 'YYYYMM');
    PERFORM pg_advisory_xact_lock(hashtext('aether_partitions'), hashtext(p_table));
    IF EXISTS (SELECT 1 FROM aether_partitions p
               WHERE p.table_name = p_table AND p.range_from < v_to AND p.range_to > v_from) THEN
        RETURN NULL;
    END IF;
    PERFORM set_config('lock_timeout', '5s', true);
    -- Created next to its table (pg_catalog comes first in the path).
    SELECT n.nspname INTO v_schema FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE c.oid = p_table::regclass;
    EXECUTE format('CREATE TABLE %I.%I (LIKE %I.%I INCLUDING DEFAULTS INCLUDING CONSTRAINTS)%s', v_schema, v_name,
        v_schema, p_table, CASE WHEN v_options = '' THEN '' ELSE ' WITH (' || v_options || ')' END);
    EXECUTE format('ALTER TABLE %I.%I ATTACH PARTITION %I.%I FOR VALUES FROM (%s) TO (%s)', v_schema, p_table, v_schema, v_name,
        aether_partition_bound(v_kind, v_from), aether_partition_bound(v_kind, v_to));
    INSERT INTO aether_partitions (partition_name, table_name, range_from, range_to)
    VALUES (v_name, p_table, v_from, v_to);
    RETURN v_name;
END
$$;
-- +goose StatementEnd

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
DROP FUNCTION aether_move_default_rows(text, text, text, text, timestamptz, timestamptz);
