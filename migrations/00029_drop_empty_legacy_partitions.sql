-- +goose Up

-- Empty legacy partitions go (issues 18 and 19). Migrations 00024 and 00025
-- turned each old table into <table>_legacy, attached for [MINVALUE, the
-- month after the upgrade), even on a new database, where it was empty:
-- there every row of that month went into a table of the old shape
-- (webhook_deliveries_legacy keeps the unique index (subscription_id,
-- event_id) of migration 00016, one more index per delivery on the
-- fan-out's path), not into a monthly partition. As migration 00022 does for
-- audit_events, an empty legacy partition is dropped: for each registered
-- table whose <table>_legacy is attached and empty, the legacy
-- partition is detached and dropped, its row of aether_partitions deleted,
-- and every month it covered from the current one (UTC) up to its bound gets
-- its own partition through aether_create_partition (the months after the
-- bound exist already). The months before the current one are left to the
-- DEFAULT partition, as on a table that never had a legacy partition.
--
-- A legacy partition that holds rows stays as it is: an upgraded database
-- keeps them in place until retention drops the partition whole
-- (docs/operations.md, "Partitions"). A first look without a lock skips
-- those, so that an upgraded, busy database is not locked for nothing. An
-- empty-looking one is locked: the registry's advisory lock first (the order
-- aether_create_partition and aether_drop_partitions take), then the table
-- and its partitions ACCESS EXCLUSIVE, each wait bounded by lock_timeout, so
-- that a busy database fails the migration (goose rolls it back; the next
-- start tries again) rather than hold writes queued behind it. Emptiness is
-- checked again under the lock. It runs as the migrating owner, in goose's
-- transaction; the partitions it creates are those the maintenance job would
-- create, so the runtime role's rights do not change.
-- +goose StatementBegin
DO $$
DECLARE
    t         record;
    v_schema  text;
    v_legacy  text;
    v_from    timestamptz := date_trunc('month', now(), 'UTC');
    v_to      timestamptz;
    v_month   timestamptz;
    v_rows    boolean;
BEGIN
    SET LOCAL lock_timeout = '5s';
    -- By name: webhook_deliveries before webhook_delivery_attempts, the
    -- order in which the service writes them.
    FOR t IN SELECT p.table_name, p.bound_kind FROM aether_partitioned_tables p ORDER BY p.table_name LOOP
        v_legacy := t.table_name || '_legacy';
        SELECT n.nspname INTO v_schema FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE c.oid = t.table_name::regclass;
        IF NOT EXISTS (SELECT 1 FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
                       WHERE i.inhparent = t.table_name::regclass AND c.relname = v_legacy) THEN
            CONTINUE;
        END IF;
        EXECUTE format('SELECT EXISTS (SELECT 1 FROM %I.%I)', v_schema, v_legacy) INTO v_rows;
        IF v_rows THEN
            CONTINUE;
        END IF;

        PERFORM pg_advisory_xact_lock(hashtext('aether_partitions'), hashtext(t.table_name));
        EXECUTE format('LOCK TABLE %I.%I IN ACCESS EXCLUSIVE MODE', v_schema, t.table_name);
        EXECUTE format('SELECT EXISTS (SELECT 1 FROM %I.%I)', v_schema, v_legacy) INTO v_rows;
        IF v_rows THEN
            CONTINUE;
        END IF;
        SELECT x.range_to INTO v_to FROM aether_partitions x WHERE x.partition_name = v_legacy;
        IF NOT FOUND THEN
            CONTINUE;
        END IF;
        -- While the legacy partition was attached, PostgreSQL kept its
        -- range out of the DEFAULT partition: the months created below
        -- cannot find rows of theirs there.
        EXECUTE format('ALTER TABLE %I.%I DETACH PARTITION %I.%I', v_schema, t.table_name, v_schema, v_legacy);
        EXECUTE format('DROP TABLE %I.%I', v_schema, v_legacy);
        DELETE FROM aether_partitions x WHERE x.partition_name = v_legacy;
        v_month := v_from;
        WHILE v_month < v_to LOOP
            PERFORM aether_create_partition(t.table_name, v_month);
            v_month := (v_month AT TIME ZONE 'UTC' + interval '1 month') AT TIME ZONE 'UTC';
        END LOOP;
    END LOOP;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- Nothing to restore: the partitions dropped were empty, and the monthly
-- partitions that took their months are the ones a new table gets.
