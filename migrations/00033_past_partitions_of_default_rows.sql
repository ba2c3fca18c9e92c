-- +goose Up

-- Past months that never got a partition. Since migration 00032 a creator
-- moves the DEFAULT partition's rows of the month it creates into it, but
-- the maintenance jobs only create the current month and the months ahead:
-- rows of a past month in a DEFAULT partition (a backfilled or clock-skewed
-- row, history loaded before its months existed) stayed there for good,
-- and every later row of that month joined them, unless the owner created
-- the month by hand.
--
-- aether_default_partition_months lists the months (UTC, their first
-- instant) of the rows a partitioned table's DEFAULT partition holds, by
-- its partition key (a time, or a UUIDv7 whose first 48 bits are its Unix
-- time in milliseconds). Only the creator below calls it.
-- +goose StatementBegin
CREATE FUNCTION aether_default_partition_months(p_table regclass) RETURNS SETOF timestamptz
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_kind    text;
    v_schema  text;
    v_default text;
    v_column  text;
    v_at      text;
BEGIN
    SELECT n.nspname INTO v_schema FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = p_table;
    SELECT c.relname INTO v_default FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent = p_table AND pg_get_expr(c.relpartbound, c.oid) = 'DEFAULT';
    IF v_default IS NULL THEN
        RETURN;
    END IF;
    SELECT a.attname INTO v_column FROM pg_partitioned_table t
    JOIN pg_attribute a ON a.attrelid = t.partrelid AND a.attnum = t.partattrs[0]
    WHERE t.partrelid = p_table;
    SELECT t.bound_kind INTO v_kind FROM aether_partitioned_tables t
    WHERE t.table_name = (SELECT c.relname FROM pg_class c WHERE c.oid = p_table);
    IF v_kind = 'UUIDV7' THEN
        v_at := format('to_timestamp((''x'' || substr(replace(%I::text, ''-'', ''''), 1, 12))::bit(48)::bigint / 1000.0)', v_column);
    ELSE
        v_at := quote_ident(v_column);
    END IF;
    RETURN QUERY EXECUTE format('SELECT DISTINCT date_trunc(''month'', %s, ''UTC'') FROM %I.%I ORDER BY 1', v_at, v_schema, v_default);
END
$$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION aether_default_partition_months(regclass) FROM PUBLIC;

-- aether_create_past_partitions creates the partition of every month of
-- [p_since's month, p_before) whose rows sit in p_table's DEFAULT partition,
-- through the table's creator (aether_create_audit_partitions for
-- audit_events, aether_create_partition for a registered table), which
-- moves those rows into it (migration 00032) and attaches it, all in the
-- caller's transaction. It returns the names of the partitions it created.
-- A month without rows in the DEFAULT partition gets nothing: the service
-- never creates empty partitions in the past. The maintenance jobs call it
-- (app.MaintainPartitions, app.CreateAuditPartitions) with p_since the
-- oldest instant still within retention and p_before the current month;
-- the runtime role may EXECUTE it (store.GrantAppRole), not the creators
-- of past months themselves.
-- +goose StatementBegin
CREATE FUNCTION aether_create_past_partitions(p_table regclass, p_since timestamptz, p_before timestamptz)
RETURNS SETOF text
LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    v_table text := (SELECT c.relname FROM pg_class c WHERE c.oid = p_table);
    v_month timestamptz;
    v_name  text;
BEGIN
    IF p_since IS NULL OR p_before IS NULL OR NOT isfinite(p_before) OR p_since >= p_before THEN
        RAISE EXCEPTION 'aether_create_past_partitions: a range [since, before) with a finite end is required'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF v_table IS DISTINCT FROM 'audit_events'
        AND NOT EXISTS (SELECT 1 FROM aether_partitioned_tables t WHERE t.table_name = v_table) THEN
        RAISE EXCEPTION 'aether_create_past_partitions: % is not a partitioned table of the service', p_table
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOR v_month IN SELECT m FROM aether_default_partition_months(p_table) m
                   WHERE m >= date_trunc('month', p_since, 'UTC') AND m < p_before ORDER BY m LOOP
        IF v_table = 'audit_events' THEN
            IF aether_create_audit_partitions(v_month, v_month) > 0 THEN
                RETURN NEXT 'audit_events_p' || to_char(v_month AT TIME ZONE 'UTC', 'YYYYMM');
            END IF;
        ELSE
            v_name := aether_create_partition(v_table, v_month);
            IF v_name IS NOT NULL THEN
                RETURN NEXT v_name;
            END IF;
        END IF;
    END LOOP;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION aether_default_partition_months(regclass) SET search_path = pg_catalog, %I, pg_temp',
        current_schema());
    EXECUTE format('ALTER FUNCTION aether_create_past_partitions(regclass, timestamptz, timestamptz) SET search_path = pg_catalog, %I, pg_temp',
        current_schema());
END
$$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION aether_create_past_partitions(regclass, timestamptz, timestamptz) FROM PUBLIC;

-- +goose Down
DROP FUNCTION aether_create_past_partitions(regclass, timestamptz, timestamptz);
DROP FUNCTION aether_default_partition_months(regclass);
