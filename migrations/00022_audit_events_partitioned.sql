-- +goose NO TRANSACTION
-- +goose Up

-- audit_events becomes range-partitioned by month of recorded_at (issue 19;
-- docs/architecture.md, "Partitioned audit history"). The migration runs
-- outside one transaction, in steps that each hold a strong lock only for
-- a moment and that a rerun resumes:
--
--   1. the existing table gets a CHECK (recorded_at < bound), NOT VALID
--      (a brief lock, no scan), bound being the start of the month after
--      this one (or the one after that, on a month's last day);
--   2. the CHECK is validated under SHARE UPDATE EXCLUSIVE, which lets
--      appends go on while it scans;
--   3. in one transaction, the table is renamed audit_events_legacy, a
--      partitioned audit_events is created with the same columns, and the
--      old table is attached as its partition for [MINVALUE, bound): the
--      validated CHECK proves the bound, so ATTACH does not scan, and the
--      indexes of the partitioned table find their twins on it and are
--      attached without a build. An empty old table (a new database) is
--      dropped instead. Monthly partitions follow from bound (or from this
--      month), with a DEFAULT partition for anything outside them.

-- Where each project's sequences move into a new month: a run of sequences
-- from first_sequence up to the next row's, all recorded in
-- [recorded_from, the next row's recorded_from). An append that moves a
-- project into a new month adds the row (store.Tx.AppendAuditEvents); a
-- project without a row for sequence 1 starts with (1, -infinity). Reads by
-- sequence carry the recorded_at bounds of one run at a time, so each
-- statement prunes to one partition (store/audit_partitions.go).
CREATE TABLE IF NOT EXISTS audit_project_segments (
    tenant_id      text COLLATE "C" NOT NULL,
    project_id     text COLLATE "C" NOT NULL,
    first_sequence bigint NOT NULL CHECK (first_sequence > 0),
    recorded_from  timestamptz NOT NULL,
    PRIMARY KEY (tenant_id, project_id, first_sequence)
);

-- The recorded_at of the head event: an append records its events at
-- greatest(now, this), so recorded_at never goes back within a project and
-- sequence order and partition order agree. Heads stored before know no
-- time (year 1, the zero time).
ALTER TABLE audit_project_heads ADD COLUMN IF NOT EXISTS last_recorded_at timestamptz NOT NULL DEFAULT '0001-01-01 00:00:00+00';

-- Creates the monthly partitions of audit_events that do not exist yet,
-- from the month after the newest one (or this month) through the month of
-- p_through, and returns how many it created. Each is created apart and
-- attached (SHARE UPDATE EXCLUSIVE on audit_events: appends and reads go
-- on), with its own unique keys (a partitioned table's unique index must
-- include recorded_at), the TRUNCATE guard, and the analyze and vacuum
-- settings of migration 00021. A month for which the DEFAULT partition
-- already holds rows is skipped (attaching it would fail) and reported by
-- a WARNING. It runs with the rights of its owner, the role that migrates:
-- the runtime role may EXECUTE it (store.GrantAppRole), never create tables.
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
    -- Serialize creators: two maintenance runs must not race on one month.
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

-- The retention purge of a whole month (store.Tx.PurgeAuditPartition):
-- for each project with events recorded in [p_from, p_to), a range that
-- must end at or before p_cutoff, whose events there are dense and follow
-- its purged prefix, the prefix moves to the project's last event there,
-- with that event's chain hash as the anchor, exactly as
-- aether_purge_audit_events moves it, but without deleting a row: the
-- events stay until their partition is dropped (aether_drop_audit_partition)
-- and reads from the anchor no longer cover them. Projects whose events in
-- the range do not follow their purged prefix (older events remain
-- elsewhere) are left to the prefix delete. It returns one row per project
-- whose prefix moved. SECURITY DEFINER: the runtime role may not move a
-- purged prefix itself.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION aether_purge_audit_partition(p_from timestamptz, p_to timestamptz, p_cutoff timestamptz)
RETURNS TABLE (tenant_id text, project_id text, purge_from bigint, purge_through bigint, through_hash bytea, purged bigint)
LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    r record;
BEGIN
    IF p_from IS NULL OR p_to IS NULL OR p_cutoff IS NULL OR p_to > p_cutoff OR p_from >= p_to THEN
        RAISE EXCEPTION 'aether_purge_audit_partition: a range that ends at or before the cutoff is required'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOR r IN
        SELECT e.tenant_id AS t, e.project_id AS p, min(e.sequence) AS lo, max(e.sequence) AS hi, count(*) AS n
        FROM audit_events e WHERE e.recorded_at >= p_from AND e.recorded_at < p_to
        GROUP BY e.tenant_id, e.project_id ORDER BY e.tenant_id, e.project_id
    LOOP
        UPDATE audit_project_heads h SET purged_through = r.hi, purged_hash = (
            SELECT e.chain_hash FROM audit_events e
            WHERE e.tenant_id = r.t AND e.project_id = r.p AND e.sequence = r.hi
              AND e.recorded_at >= p_from AND e.recorded_at < p_to)
        WHERE h.tenant_id = r.t AND h.project_id = r.p
          AND r.n = r.hi - r.lo + 1 AND h.purged_through >= r.lo - 1 AND h.purged_through < r.hi
        RETURNING h.tenant_id, h.project_id INTO tenant_id, project_id;
        IF FOUND THEN
            purge_from := r.lo;
            purge_through := r.hi;
            through_hash := (SELECT h.purged_hash FROM audit_project_heads h WHERE h.tenant_id = r.t AND h.project_id = r.p);
            purged := r.n;
            RETURN NEXT;
        END IF;
    END LOOP;
END
$$;
-- +goose StatementEnd

-- Drops a partition of audit_events whose every event lies within its
-- project's purged prefix (aether_purge_audit_partition or the prefix
-- delete moved it), and returns whether it did: the retention purge's
-- O(1) removal of a month, which leaves no dead tuples behind. A partition
-- that still holds an event past its project's purged prefix, the DEFAULT
-- partition and anything not a partition of audit_events are refused.
-- DETACH and DROP lock audit_events for a moment: p_lock_timeout bounds the
-- wait (an append is never stalled longer), and a run that times out tries
-- again at the next. SECURITY DEFINER: the runtime role may not drop tables.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION aether_drop_audit_partition(p_partition text, p_lock_timeout interval)
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    v_rel  regclass;
    v_live boolean;
BEGIN
    SELECT c.oid INTO v_rel FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent = 'audit_events'::regclass AND c.relname = p_partition
      AND pg_get_expr(c.relpartbound, c.oid) <> 'DEFAULT';
    IF v_rel IS NULL THEN
        RAISE EXCEPTION 'aether_drop_audit_partition: % is not a bounded partition of audit_events', p_partition
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM set_config('lock_timeout', (extract(epoch FROM p_lock_timeout) * 1000)::bigint::text || 'ms', true);
    -- Nothing is appended to it while it is checked.
    EXECUTE format('LOCK TABLE %s IN SHARE MODE', v_rel);
    EXECUTE format('SELECT EXISTS (SELECT 1 FROM %s e LEFT JOIN audit_project_heads h USING (tenant_id, project_id) '
        'WHERE h.purged_through IS NULL OR e.sequence > h.purged_through)', v_rel) INTO v_live;
    IF v_live THEN
        RETURN false;
    END IF;
    EXECUTE format('ALTER TABLE audit_events DETACH PARTITION %s', v_rel);
    EXECUTE format('DROP TABLE %s', v_rel);
    RETURN true;
END
$$;
-- +goose StatementEnd

-- Step 1: the bound of the existing table, NOT VALID (no scan).
-- +goose StatementBegin
DO $$
DECLARE
    v_bound timestamptz := (date_trunc('month', now() + interval '1 day', 'UTC') AT TIME ZONE 'UTC' + interval '1 month') AT TIME ZONE 'UTC';
BEGIN
    IF (SELECT relkind FROM pg_class WHERE oid = 'audit_events'::regclass) = 'p' THEN
        RETURN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conrelid = 'audit_events'::regclass AND conname = 'audit_events_legacy_bound') THEN
        SET LOCAL lock_timeout = '5s';
        EXECUTE format('ALTER TABLE audit_events ADD CONSTRAINT audit_events_legacy_bound CHECK (recorded_at < %L) NOT VALID', v_bound);
    END IF;
END
$$;
-- +goose StatementEnd

-- Step 2: validated while appends go on.
-- +goose StatementBegin
DO $$
BEGIN
    IF (SELECT relkind FROM pg_class WHERE oid = 'audit_events'::regclass) = 'r' THEN
        ALTER TABLE audit_events VALIDATE CONSTRAINT audit_events_legacy_bound;
    END IF;
END
$$;
-- +goose StatementEnd

-- Step 3: the swap, in one transaction.
-- +goose StatementBegin
DO $$
DECLARE
    v_bound timestamptz;
    v_empty boolean;
    v_index record;
BEGIN
    IF (SELECT relkind FROM pg_class WHERE oid = 'audit_events'::regclass) = 'p' THEN
        RETURN;
    END IF;
    SET LOCAL lock_timeout = '10s';
    LOCK TABLE audit_events IN ACCESS EXCLUSIVE MODE;
    SELECT substring(pg_get_constraintdef(oid) FROM '''([^'']+)''')::timestamptz INTO v_bound
    FROM pg_constraint WHERE conrelid = 'audit_events'::regclass AND conname = 'audit_events_legacy_bound';
    v_empty := NOT EXISTS (SELECT 1 FROM audit_events);

    ALTER TABLE audit_events RENAME TO audit_events_legacy;
    -- The indexes' names go to the partitioned table's indexes.
    FOR v_index IN SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
        WHERE i.indrelid = 'audit_events_legacy'::regclass AND c.relname LIKE 'audit\_events\_%\_idx' LOOP
        EXECUTE format('ALTER INDEX %I RENAME TO %I', v_index.relname,
            'audit_events_legacy_' || substring(v_index.relname FROM length('audit_events_') + 1));
    END LOOP;
    -- Row triggers are cloned from the partitioned table onto every
    -- partition, future ones included; the old table's would clash.
    DROP TRIGGER audit_events_no_update ON audit_events_legacy;
    DROP TRIGGER audit_events_purge_only ON audit_events_legacy;

    CREATE TABLE audit_events (LIKE audit_events_legacy INCLUDING DEFAULTS INCLUDING CONSTRAINTS)
        PARTITION BY RANGE (recorded_at);
    ALTER TABLE audit_events DROP CONSTRAINT audit_events_legacy_bound;
    IF v_empty THEN
        DROP TABLE audit_events_legacy;
    ELSE
        EXECUTE format('ALTER TABLE audit_events ATTACH PARTITION audit_events_legacy FOR VALUES FROM (MINVALUE) TO (%L)', v_bound);
    END IF;

    CREATE INDEX audit_events_action_idx ON audit_events (tenant_id, project_id, action, sequence);
    CREATE INDEX audit_events_subject_idx ON audit_events (tenant_id, project_id, subject_id, sequence);
    CREATE INDEX audit_events_resource_idx ON audit_events (tenant_id, project_id, resource_type, resource_id, sequence);
    CREATE INDEX audit_events_occurred_idx ON audit_events (tenant_id, project_id, occurred_at, sequence);
    CREATE INDEX audit_events_recorded_by_idx ON audit_events (tenant_id, project_id, recorded_by_subject, sequence);
    CREATE INDEX audit_events_trace_idx ON audit_events (tenant_id, project_id, trace_id, sequence) WHERE trace_id <> '';
    CREATE INDEX audit_events_request_idx ON audit_events (tenant_id, project_id, request_id, sequence) WHERE request_id <> '';
    CREATE INDEX audit_events_causation_idx ON audit_events (tenant_id, project_id, causation_id, sequence) WHERE causation_id <> '';

    CREATE TRIGGER audit_events_no_update
        BEFORE UPDATE ON audit_events
        FOR EACH ROW EXECUTE FUNCTION audit_events_reject_change();
    CREATE TRIGGER audit_events_purge_only
        BEFORE DELETE ON audit_events
        FOR EACH ROW EXECUTE FUNCTION audit_events_purge_only();
    CREATE TRIGGER audit_events_no_truncate
        BEFORE TRUNCATE ON audit_events
        FOR EACH STATEMENT EXECUTE FUNCTION audit_events_reject_change();

    -- The DEFAULT partition, built as the monthly ones are: its own keys
    -- first, then attached (the partitioned indexes come after them).
    CREATE TABLE audit_events_default (LIKE audit_events INCLUDING DEFAULTS INCLUDING CONSTRAINTS) WITH (
        autovacuum_analyze_scale_factor = 0, autovacuum_analyze_threshold = 50000,
        autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 50000,
        autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 200000);
    ALTER TABLE audit_events_default ADD CONSTRAINT audit_events_default_pkey PRIMARY KEY (tenant_id, project_id, sequence),
        ADD CONSTRAINT audit_events_default_tenant_id_id_key UNIQUE (tenant_id, id);
    CREATE TRIGGER audit_events_no_truncate BEFORE TRUNCATE ON audit_events_default
        FOR EACH STATEMENT EXECUTE FUNCTION audit_events_reject_change();
    ALTER TABLE audit_events ATTACH PARTITION audit_events_default DEFAULT;
END
$$;
-- +goose StatementEnd

-- The runtime role gets no table privileges on partitions (GrantAppRole
-- lists only partitioned and plain tables); it reads and appends through
-- audit_events. Only it gets to call the creator and the partition purge
-- and drop (GrantAppRole grants them).
-- +goose StatementBegin
DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION aether_create_audit_partitions(timestamptz) SET search_path = pg_catalog, %I, pg_temp',
        current_schema());
    EXECUTE format('ALTER FUNCTION aether_purge_audit_partition(timestamptz, timestamptz, timestamptz) SET search_path = pg_catalog, %I, pg_temp',
        current_schema());
    EXECUTE format('ALTER FUNCTION aether_drop_audit_partition(text, interval) SET search_path = pg_catalog, %I, pg_temp',
        current_schema());
END
$$;
-- +goose StatementEnd
REVOKE ALL ON FUNCTION aether_create_audit_partitions(timestamptz) FROM PUBLIC;
REVOKE ALL ON FUNCTION aether_purge_audit_partition(timestamptz, timestamptz, timestamptz) FROM PUBLIC;
REVOKE ALL ON FUNCTION aether_drop_audit_partition(text, interval) FROM PUBLIC;

-- The months of the next quarter, so that a new database appends into
-- monthly partitions from its first event; the periodic job keeps three
-- months ahead from then on.
SELECT aether_create_audit_partitions(now() + interval '3 months');

-- +goose Down
-- Partitioned history is not un-partitioned by a migration: the Down step
-- keeps the data and refuses.
-- +goose StatementBegin
DO $$
BEGIN
    RAISE EXCEPTION 'migration 00022 (partitioned audit_events) cannot be rolled back';
END
$$;
-- +goose StatementEnd
