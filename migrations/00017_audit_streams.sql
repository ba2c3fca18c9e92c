-- +goose Up

-- Audit streams (docs/streams.md): continuous delivery of a tenant's
-- events to a sink (S3, HTTPS, SPLUNK_HEC, DATADOG_LOGS). project_ids lists
-- the projects streamed, NULL for every project of the tenant
-- (all_projects). The sink's credential (the HTTPS signing secret, the
-- Splunk token, the Datadog API key) is sealed under the master key; S3
-- sinks have none (the service's AWS credentials chain). filter is the
-- AuditEventFilter as JSON, NULL for every event. from_sequence is where
-- each project's cursor starts (the first event streamed), NULL for the
-- first retained event.
CREATE TABLE audit_streams (
    id             uuid PRIMARY KEY,
    tenant_id      text COLLATE "C" NOT NULL,
    project_ids    text[] COLLATE "C",
    sink_type      text NOT NULL CHECK (sink_type IN ('S3', 'HTTPS', 'SPLUNK_HEC', 'DATADOG_LOGS')),
    sink_url       text NOT NULL,
    sealed_secret  bytea,
    filter         jsonb,
    from_sequence  bigint CHECK (from_sequence >= 1),
    paused         boolean NOT NULL DEFAULT false,
    created_at     timestamptz NOT NULL,
    created_by     text NOT NULL,
    updated_at     timestamptz NOT NULL,
    CHECK (project_ids IS NULL OR cardinality(project_ids) >= 1)
);

CREATE INDEX audit_streams_tenant ON audit_streams (tenant_id, id);

-- One cursor per stream and project: acked_sequence is the last sequence
-- the sink acknowledged (0 before the first); the stream resumes after it.
-- It only moves forward. lease_owner and lease_until let one worker of one
-- process at a time deliver the project's events; an expired lease (a
-- process that died) is taken over. last_error describes the latest failed
-- delivery, cleared by the next acknowledged one.
CREATE TABLE audit_stream_cursors (
    stream_id        uuid NOT NULL REFERENCES audit_streams (id) ON DELETE CASCADE,
    project_id       text COLLATE "C" NOT NULL,
    tenant_id        text COLLATE "C" NOT NULL,
    acked_sequence   bigint NOT NULL CHECK (acked_sequence >= 0),
    last_delivery_at timestamptz,
    last_error       text,
    last_error_at    timestamptz,
    failures         integer NOT NULL DEFAULT 0,
    retry_at         timestamptz,
    lease_owner      uuid,
    lease_until      timestamptz,
    PRIMARY KEY (stream_id, project_id)
);

CREATE INDEX audit_stream_cursors_project ON audit_stream_cursors (tenant_id, project_id);

-- +goose Down
DROP TABLE audit_stream_cursors;
DROP TABLE audit_streams;
