-- +goose Up

-- Plans that do not depend on fresh statistics (issue 19; docs/architecture.md,
-- "Query plans without fresh statistics").
--
-- Every audit_events query shape has exactly one index that serves both its
-- conditions and its order, so that the planner never needs an estimate of
-- the project's size to pick it: the primary key for the pages, the
-- verification ranges and the sequence exports; (tenant, project, filter
-- column, sequence) for the filtered pages; and this index for the exports
-- by time, ORDER BY occurred_at, sequence. Its old shape ended at occurred_at,
-- so the time export needed a Sort whichever index it read, and a project
-- the statistics did not know yet (estimated at one row) got any of the
-- project's indexes plus a sort of the whole range.
DROP INDEX IF EXISTS audit_events_occurred_idx;
CREATE INDEX audit_events_occurred_idx ON audit_events (tenant_id, project_id, occurred_at, sequence);

-- Analyze and vacuum the history tables by rows changed, not by a fraction
-- of the table: with the default scale factors, auto-analyze waits for 10%
-- of a table to change, which at 50M events is 5M rows of a new project
-- that the planner knows nothing of. A partitioned table carries no storage
-- parameters of its own: the settings go on each of its partitions (new
-- partitions take them where they are created).
-- +goose StatementBegin
DO $$
DECLARE
    t text;
    leaf regclass;
BEGIN
    FOREACH t IN ARRAY ARRAY['audit_events', 'webhook_deliveries', 'webhook_delivery_attempts',
        'alarm_history', 'telemetry_history']
    LOOP
        IF to_regclass(t) IS NULL THEN
            CONTINUE;
        END IF;
        FOR leaf IN SELECT relid FROM pg_partition_tree(t::regclass) WHERE isleaf LOOP
            EXECUTE format('ALTER TABLE %s SET (autovacuum_analyze_scale_factor = 0, autovacuum_analyze_threshold = 50000, '
                'autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 50000, '
                'autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 200000)', leaf);
        END LOOP;
    END LOOP;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DO $$
DECLARE
    t text;
    leaf regclass;
BEGIN
    FOREACH t IN ARRAY ARRAY['audit_events', 'webhook_deliveries', 'webhook_delivery_attempts',
        'alarm_history', 'telemetry_history']
    LOOP
        IF to_regclass(t) IS NULL THEN
            CONTINUE;
        END IF;
        FOR leaf IN SELECT relid FROM pg_partition_tree(t::regclass) WHERE isleaf LOOP
            EXECUTE format('ALTER TABLE %s RESET (autovacuum_analyze_scale_factor, autovacuum_analyze_threshold, '
                'autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold, '
                'autovacuum_vacuum_insert_scale_factor, autovacuum_vacuum_insert_threshold)', leaf);
        END LOOP;
    END LOOP;
END
$$;
-- +goose StatementEnd
DROP INDEX IF EXISTS audit_events_occurred_idx;
CREATE INDEX audit_events_occurred_idx ON audit_events (tenant_id, project_id, occurred_at);
