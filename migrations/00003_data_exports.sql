-- +goose Up

-- Bounded history exports. The bytes live in object storage; this row holds
-- the lifecycle and, once READY, the immutable object reference, digest and
-- length.
CREATE TABLE data_exports (
    tenant_id      text COLLATE "C" NOT NULL,
    project_id     text COLLATE "C" NOT NULL,
    id             uuid NOT NULL PRIMARY KEY,
    kind           text NOT NULL CHECK (kind IN ('AUDIT', 'ALARM', 'TELEMETRY')),
    format         text NOT NULL CHECK (format IN ('NDJSON', 'CSV')),
    compression    text NOT NULL CHECK (compression IN ('NONE', 'GZIP')),
    range_from     timestamptz NOT NULL,
    range_to       timestamptz NOT NULL CHECK (range_to > range_from),
    state          text NOT NULL CHECK (state IN ('QUEUED', 'RUNNING', 'READY', 'FAILED', 'EXPIRED')),
    requested_by   text NOT NULL,
    requested_at   timestamptz NOT NULL,
    started_at     timestamptz,
    progress_rows  bigint NOT NULL DEFAULT 0,
    progress_bytes bigint NOT NULL DEFAULT 0,
    object_ref     text NOT NULL DEFAULT '' CHECK (length(object_ref) <= 512),
    content_digest text NOT NULL DEFAULT '',
    byte_length    bigint NOT NULL DEFAULT 0,
    row_count      bigint NOT NULL DEFAULT 0,
    ready_at       timestamptz,
    expires_at     timestamptz,
    failed_at      timestamptz,
    failure_reason text NOT NULL DEFAULT '',
    expired_at     timestamptz,
    updated_at     timestamptz NOT NULL,
    CHECK (state <> 'READY' OR (object_ref <> '' AND content_digest <> '' AND expires_at IS NOT NULL))
);

CREATE INDEX data_exports_project_idx ON data_exports (tenant_id, project_id, id);
CREATE INDEX data_exports_active_idx ON data_exports (tenant_id) WHERE state IN ('QUEUED', 'RUNNING');
CREATE INDEX data_exports_expiry_idx ON data_exports (expires_at) WHERE state = 'READY';

-- Alarm history, appended in batches by the platform's alarm service.
CREATE TABLE alarm_history (
    tenant_id   text COLLATE "C" NOT NULL,
    project_id  text COLLATE "C" NOT NULL,
    id          uuid NOT NULL,
    occurred_at timestamptz NOT NULL,
    alarm_id    text COLLATE "C" NOT NULL,
    device_id   text COLLATE "C" NOT NULL,
    severity    text NOT NULL CHECK (severity IN ('CRITICAL', 'MAJOR', 'MINOR', 'WARNING', 'INFO')),
    state       text NOT NULL CHECK (state IN ('RAISED', 'ACKNOWLEDGED', 'CLEARED')),
    message     text NOT NULL,
    details     jsonb NOT NULL DEFAULT '{}',
    PRIMARY KEY (tenant_id, project_id, occurred_at, id),
    UNIQUE (tenant_id, id)
);

-- Telemetry history, appended in batches by the platform's telemetry service.
CREATE TABLE telemetry_history (
    tenant_id   text COLLATE "C" NOT NULL,
    project_id  text COLLATE "C" NOT NULL,
    device_id   text COLLATE "C" NOT NULL,
    metric      text COLLATE "C" NOT NULL,
    occurred_at timestamptz NOT NULL,
    value       double precision NOT NULL,
    unit        text NOT NULL DEFAULT '',
    PRIMARY KEY (tenant_id, project_id, occurred_at, device_id, metric)
);

-- +goose Down
DROP TABLE telemetry_history;
DROP TABLE alarm_history;
DROP TABLE data_exports;
