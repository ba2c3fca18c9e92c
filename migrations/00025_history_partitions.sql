-- +goose Up

-- Alarm and telemetry history, range-partitioned by the month of
-- occurred_at as migration 00024 partitions the webhook tables (the
-- existing table becomes the legacy partition, no row copied). The
-- platform's clocks set occurred_at, so the legacy bound lies after the
-- latest one found.
--
-- Alarm ids stay unique per project within a partition: a unique index of
-- a partitioned table must hold its partition key, so the key of an alarm
-- entry is now (tenant, project, occurred_at, id), the primary key. A retry
-- of the same entry (same id and time) is still skipped; the legacy
-- partition keeps its (tenant, project, id) index until it is dropped.
-- +goose StatementBegin
DO $$
DECLARE
    v_options text := 'autovacuum_analyze_scale_factor = 0, autovacuum_analyze_threshold = 50000, '
        'autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 50000, '
        'autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 200000';
    v_max timestamptz;
BEGIN
    SELECT max(occurred_at) INTO v_max FROM alarm_history;
    PERFORM aether_partition_existing('alarm_history', 'occurred_at', 'TIMESTAMPTZ', v_options, v_max,
        $create$
        CREATE TABLE alarm_history (
            tenant_id   text COLLATE "C" NOT NULL,
            project_id  text COLLATE "C" NOT NULL,
            id          uuid NOT NULL,
            occurred_at timestamptz NOT NULL,
            alarm_id    text COLLATE "C" NOT NULL,
            device_id   text COLLATE "C" NOT NULL,
            severity    text NOT NULL CONSTRAINT alarm_history_severity_check
                CHECK (severity IN ('CRITICAL', 'MAJOR', 'MINOR', 'WARNING', 'INFO')),
            state       text NOT NULL CONSTRAINT alarm_history_state_check
                CHECK (state IN ('RAISED', 'ACKNOWLEDGED', 'CLEARED')),
            message     text NOT NULL,
            details     jsonb NOT NULL DEFAULT '{}',
            CONSTRAINT alarm_history_pkey PRIMARY KEY (tenant_id, project_id, occurred_at, id)
        ) PARTITION BY RANGE (occurred_at);
        $create$);

    SELECT max(occurred_at) INTO v_max FROM telemetry_history;
    PERFORM aether_partition_existing('telemetry_history', 'occurred_at', 'TIMESTAMPTZ', v_options, v_max,
        $create$
        CREATE TABLE telemetry_history (
            tenant_id   text COLLATE "C" NOT NULL,
            project_id  text COLLATE "C" NOT NULL,
            device_id   text COLLATE "C" NOT NULL,
            metric      text COLLATE "C" NOT NULL,
            occurred_at timestamptz NOT NULL,
            value       double precision NOT NULL,
            unit        text NOT NULL DEFAULT '',
            CONSTRAINT telemetry_history_pkey PRIMARY KEY (tenant_id, project_id, occurred_at, device_id, metric)
        ) PARTITION BY RANGE (occurred_at);
        $create$);
END
$$;
-- +goose StatementEnd

-- Finished export rows are deleted some time after they expired
-- (AETHER_EXPORT_RETENTION): the expiry job finds them by this index.
CREATE INDEX data_exports_expired_idx ON data_exports (expired_at) WHERE state = 'EXPIRED';

-- Only the migrations convert tables.
DROP FUNCTION aether_partition_existing(text, text, text, text, timestamptz, text);

-- +goose Down
DROP INDEX data_exports_expired_idx;
-- +goose StatementBegin
DO $$
BEGIN
    RAISE EXCEPTION 'migration 00025 (partitioned alarm and telemetry history) cannot be reverted in place';
END
$$;
-- +goose StatementEnd
