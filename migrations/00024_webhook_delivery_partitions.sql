-- +goose Up

-- Partitioned history (issue 19; docs/architecture.md, "Partitioned
-- history"). Tables that only grow are range-partitioned by month, so that
-- retention drops whole partitions (O(partitions), no dead rows) and the
-- cost of a lookup does not depend on how much history is kept.
--
-- aether_partitioned_tables registers each partitioned table with the kind
-- of its bounds: TIMESTAMPTZ (the partition key is a time) or UUIDV7 (the
-- key is a UUIDv7, whose first 48 bits are its Unix time in milliseconds:
-- the bound of an instant is the smallest UUIDv7 of that millisecond), and
-- the storage parameters every partition gets (a partitioned table holds
-- none of its own). aether_partitions records each partition's range, by
-- time, as aether_create_partition and the migrations create them. The
-- runtime role only reads both (store.GrantAppRole).
CREATE TABLE aether_partitioned_tables (
    table_name      text COLLATE "C" PRIMARY KEY,
    bound_kind      text NOT NULL CHECK (bound_kind IN ('TIMESTAMPTZ', 'UUIDV7')),
    storage_options text NOT NULL DEFAULT ''
);

CREATE TABLE aether_partitions (
    partition_name text COLLATE "C" PRIMARY KEY,
    table_name     text COLLATE "C" NOT NULL REFERENCES aether_partitioned_tables (table_name),
    range_from     timestamptz NOT NULL,
    range_to       timestamptz NOT NULL CHECK (range_to > range_from),
    created_at     timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX aether_partitions_table_idx ON aether_partitions (table_name, range_to);

-- The bound of instant p_at for a key of kind p_kind, as an SQL literal
-- (MINVALUE for -infinity).
-- +goose StatementBegin
CREATE FUNCTION aether_partition_bound(p_kind text, p_at timestamptz) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    h text;
BEGIN
    IF p_at = '-infinity'::timestamptz THEN
        RETURN 'MINVALUE';
    END IF;
    IF p_kind = 'UUIDV7' THEN
        h := lpad(to_hex((extract(epoch FROM p_at) * 1000)::bigint), 12, '0');
        RETURN quote_literal(substr(h, 1, 8) || '-' || substr(h, 9, 4) || '-7000-8000-000000000000');
    END IF;
    RETURN quote_literal(to_char(p_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'));
END
$$;
-- +goose StatementEnd

-- Creates the partition of p_table for the month (UTC) holding p_month,
-- unless a partition of the table already covers part of that month. It
-- returns the new partition's name, or NULL. The partition is created on
-- its own and then attached: ATTACH takes only a SHARE UPDATE EXCLUSIVE
-- lock on the table, so inserts and reads go on (CREATE ... PARTITION OF
-- would take an ACCESS EXCLUSIVE one). lock_timeout bounds the wait for
-- the default partition's lock; the caller tries again at its next run.
-- +goose StatementBegin
CREATE FUNCTION aether_create_partition(p_table text, p_month timestamptz) RETURNS text
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

-- Drops the partitions of p_table wholly before p_before (their range ends
-- at or before it) and deletes the rows before it that the default
-- partition caught. Before each drop it reports what the partition held:
-- one row per tenant and project with its row count, or one row without
-- tenant and project (NULL) for a table without those columns. A drop
-- takes an ACCESS EXCLUSIVE lock on the table for a moment; lock_timeout
-- bounds the wait.
-- +goose StatementBegin
CREATE FUNCTION aether_drop_partitions(p_table text, p_before timestamptz)
RETURNS TABLE (partition_name text, range_from timestamptz, range_to timestamptz, tenant_id text, project_id text, row_count bigint)
LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    v_kind     text;
    v_projects boolean;
    v_column   text;
    v_default  text;
    v_schema   text;
    p          record;
BEGIN
    IF p_before IS NULL OR p_before > now() THEN
        RAISE EXCEPTION 'aether_drop_partitions: the cutoff must lie in the past'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT t.bound_kind INTO v_kind FROM aether_partitioned_tables t WHERE t.table_name = p_table;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'aether_drop_partitions: % is not a partitioned table of the service', p_table
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM pg_advisory_xact_lock(hashtext('aether_partitions'), hashtext(p_table));
    PERFORM set_config('lock_timeout', '5s', true);
    SELECT n.nspname INTO v_schema FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE c.oid = p_table::regclass;
    v_projects := (SELECT count(*) = 2 FROM pg_attribute a
                   WHERE a.attrelid = p_table::regclass AND a.attname IN ('tenant_id', 'project_id') AND NOT a.attisdropped);
    FOR p IN SELECT x.partition_name, x.range_from, x.range_to FROM aether_partitions x
             WHERE x.table_name = p_table AND x.range_to <= p_before ORDER BY x.range_to LOOP
        IF v_projects THEN
            RETURN QUERY EXECUTE format('SELECT %L::text, %L::timestamptz, %L::timestamptz, tenant_id::text, project_id::text, count(*)
                FROM %I.%I GROUP BY tenant_id, project_id ORDER BY tenant_id, project_id', p.partition_name, p.range_from, p.range_to,
                v_schema, p.partition_name);
        ELSE
            RETURN QUERY EXECUTE format('SELECT %L::text, %L::timestamptz, %L::timestamptz, NULL::text, NULL::text, count(*) FROM %I.%I',
                p.partition_name, p.range_from, p.range_to, v_schema, p.partition_name);
        END IF;
        EXECUTE format('DROP TABLE %I.%I', v_schema, p.partition_name);
        DELETE FROM aether_partitions x WHERE x.partition_name = p.partition_name;
    END LOOP;
    SELECT c.relname INTO v_default FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent = p_table::regclass AND pg_get_expr(c.relpartbound, c.oid) = 'DEFAULT';
    IF v_default IS NOT NULL THEN
        SELECT a.attname INTO v_column FROM pg_partitioned_table t
        JOIN pg_attribute a ON a.attrelid = t.partrelid AND a.attnum = t.partattrs[0]
        WHERE t.partrelid = p_table::regclass;
        IF v_projects THEN
            RETURN QUERY EXECUTE format('WITH d AS (DELETE FROM %I.%I WHERE %I < %s RETURNING tenant_id, project_id)
                SELECT %L::text, ''-infinity''::timestamptz, %L::timestamptz, tenant_id::text, project_id::text, count(*)
                FROM d GROUP BY tenant_id, project_id ORDER BY tenant_id, project_id',
                v_schema, v_default, v_column, aether_partition_bound(v_kind, p_before), v_default, p_before);
        ELSE
            RETURN QUERY EXECUTE format('WITH d AS (DELETE FROM %I.%I WHERE %I < %s RETURNING 1)
                SELECT %L::text, ''-infinity''::timestamptz, %L::timestamptz, NULL::text, NULL::text, count(*)
                FROM d HAVING count(*) > 0',
                v_schema, v_default, v_column, aether_partition_bound(v_kind, p_before), v_default, p_before);
        END IF;
    END IF;
END
$$;
-- +goose StatementEnd

-- A SECURITY DEFINER function must not find the caller's objects (as
-- migration 00012's purge): pg_catalog, this schema, pg_temp last. Only
-- the runtime role may call them (store.GrantAppRole grants it).
-- +goose StatementBegin
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION aether_create_partition(text, timestamptz) SET search_path = pg_catalog, %I, pg_temp',
        current_schema());
    EXECUTE format('ALTER FUNCTION aether_drop_partitions(text, timestamptz) SET search_path = pg_catalog, %I, pg_temp',
        current_schema());
END
$$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION aether_create_partition(text, timestamptz) FROM PUBLIC;
REVOKE ALL ON FUNCTION aether_drop_partitions(text, timestamptz) FROM PUBLIC;

-- Turns the unpartitioned table p_table into the first partition of a new
-- partitioned table of the same name, without copying a row: the old
-- table is renamed to <p_table>_legacy (and its indexes with it), the new
-- parent is created by p_create (with its keys and indexes, which ATTACH
-- matches to the legacy ones), a validated CHECK proves that every row lies
-- below the legacy bound so that ATTACH does not scan again, and the
-- legacy table is attached for [MINVALUE, bound). The bound is the start
-- of the month after both now and p_max (the greatest key in the table).
-- A DEFAULT partition catches keys outside every partition. Only the
-- migrations call it; it is dropped by the last of them that needs it.
-- +goose StatementBegin
CREATE FUNCTION aether_partition_existing(p_table text, p_column text, p_kind text, p_options text,
    p_max timestamptz, p_create text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_legacy text := p_table || '_legacy';
    v_to     timestamptz;
    v_index  record;
BEGIN
    v_to := (date_trunc('month', greatest(now(), COALESCE(p_max, now())) AT TIME ZONE 'UTC') + interval '1 month') AT TIME ZONE 'UTC';
    EXECUTE format('ALTER TABLE %I RENAME TO %I', p_table, v_legacy);
    FOR v_index IN SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
                   WHERE i.indrelid = v_legacy::regclass LOOP
        EXECUTE format('ALTER INDEX %I RENAME TO %I', v_index.relname,
            replace(v_index.relname, p_table, v_legacy));
    END LOOP;
    EXECUTE p_create;
    EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I CHECK (%I < %s) NOT VALID', v_legacy, v_legacy || '_bound',
        p_column, aether_partition_bound(p_kind, v_to));
    EXECUTE format('ALTER TABLE %I VALIDATE CONSTRAINT %I', v_legacy, v_legacy || '_bound');
    EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (MINVALUE) TO (%s)', p_table, v_legacy,
        aether_partition_bound(p_kind, v_to));
    EXECUTE format('ALTER TABLE %I DROP CONSTRAINT %I', v_legacy, v_legacy || '_bound');
    EXECUTE format('CREATE TABLE %I PARTITION OF %I DEFAULT%s', p_table || '_default', p_table,
        CASE WHEN p_options = '' THEN '' ELSE ' WITH (' || p_options || ')' END);
    INSERT INTO aether_partitioned_tables (table_name, bound_kind, storage_options) VALUES (p_table, p_kind, p_options);
    INSERT INTO aether_partitions (partition_name, table_name, range_from, range_to)
    VALUES (v_legacy, p_table, '-infinity', v_to);
    -- The next two months exist before the maintenance job first runs.
    PERFORM aether_create_partition(p_table, v_to);
    PERFORM aether_create_partition(p_table, v_to + interval '1 month');
END
$$;
-- +goose StatementEnd

-- Deliveries by id and attempts by delivery id, with the same month
-- bounds: a delivery and its attempts share a month, every lookup by id
-- (or packed ids of a job, or an attempt join) prunes to one partition.
-- Deliveries keep fillfactor 50 (migration 00010: their updates stay HOT)
-- and every history table the analyze thresholds of migration 00021.
--
-- The fan-out's exactly-once key (subscription, event) cannot be a unique
-- index of a table partitioned by id: the fan-out now derives the id of a
-- delivery from its subscription and event (domain.FanoutDeliveryID), so the
-- primary key is that key. The legacy partition keeps its old unique
-- index until it is dropped (INSERT ... ON CONFLICT DO NOTHING honours
-- both).
-- +goose StatementBegin
DO $$
DECLARE
    v_analyze text := 'autovacuum_analyze_scale_factor = 0, autovacuum_analyze_threshold = 50000, '
        'autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 50000, '
        'autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 200000';
    v_max timestamptz;
BEGIN
    -- The latest id's time (its first 48 bits), through the primary key.
    SELECT to_timestamp(('x' || substr(replace(id::text, '-', ''), 1, 12))::bit(48)::bigint / 1000.0)
    INTO v_max FROM webhook_deliveries ORDER BY id DESC LIMIT 1;
    PERFORM aether_partition_existing('webhook_deliveries', 'id', 'UUIDV7', 'fillfactor = 50, ' || v_analyze, v_max,
        $create$
        CREATE TABLE webhook_deliveries (
            tenant_id        text COLLATE "C" NOT NULL,
            project_id       text COLLATE "C" NOT NULL,
            id               uuid NOT NULL,
            subscription_id  uuid NOT NULL,
            destination_id   uuid NOT NULL,
            event_id         uuid NOT NULL,
            event_sequence   bigint NOT NULL,
            event_type       text COLLATE "C" NOT NULL,
            idempotency_key  text COLLATE "C" NOT NULL,
            state            text NOT NULL CONSTRAINT webhook_deliveries_state_check CHECK (state IN ('PENDING',
                'DELIVERING', 'DELIVERED', 'RETRYING', 'DEAD_LETTERED', 'PAUSED', 'CANCELLED', 'SKIPPED')),
            attempt_count    integer NOT NULL DEFAULT 0,
            max_attempts     integer NOT NULL CONSTRAINT webhook_deliveries_max_attempts_check CHECK (max_attempts > 0),
            next_attempt_at  timestamptz,
            created_at       timestamptz NOT NULL,
            updated_at       timestamptz NOT NULL,
            delivered_at     timestamptz,
            dead_lettered_at timestamptz,
            last_error       text NOT NULL DEFAULT '',
            replay_of        uuid,
            ordered          boolean NOT NULL DEFAULT false,
            CONSTRAINT webhook_deliveries_pkey PRIMARY KEY (id)
        ) PARTITION BY RANGE (id);
        CREATE INDEX webhook_deliveries_project_idx ON webhook_deliveries (tenant_id, project_id, id);
        CREATE INDEX webhook_deliveries_event_idx ON webhook_deliveries (tenant_id, event_id);
        $create$);

    SELECT to_timestamp(('x' || substr(replace(delivery_id::text, '-', ''), 1, 12))::bit(48)::bigint / 1000.0)
    INTO v_max FROM webhook_delivery_attempts ORDER BY delivery_id DESC LIMIT 1;
    PERFORM aether_partition_existing('webhook_delivery_attempts', 'delivery_id', 'UUIDV7', v_analyze, v_max,
        $create$
        CREATE TABLE webhook_delivery_attempts (
            delivery_id   uuid NOT NULL,
            number        integer NOT NULL CONSTRAINT webhook_delivery_attempts_number_check CHECK (number > 0),
            outcome       text NOT NULL CONSTRAINT webhook_delivery_attempts_outcome_check
                CHECK (outcome IN ('DELIVERING', 'SUCCEEDED', 'FAILED', 'UNKNOWN')),
            started_at    timestamptz NOT NULL,
            finished_at   timestamptz,
            status_code   integer,
            latency_us    bigint,
            error_class   text NOT NULL DEFAULT '',
            error         text NOT NULL DEFAULT '',
            response_body text NOT NULL DEFAULT '',
            CONSTRAINT webhook_delivery_attempts_pkey PRIMARY KEY (delivery_id, number)
        ) PARTITION BY RANGE (delivery_id);
        $create$);
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DO $$
BEGIN
    RAISE EXCEPTION 'migration 00024 (partitioned webhook deliveries) cannot be reverted in place';
END
$$;
-- +goose StatementEnd
