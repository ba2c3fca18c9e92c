-- +goose Up

-- Who recorded each event, from its verified token (issuer, subject, token
-- id, client id), and the canonical encoding the event was sealed with.
-- Events stored before this migration are version 1: they have no recorder
-- and keep verifying exactly as before (docs/audit-chain.md). Adding columns
-- with constant defaults rewrites no rows.
ALTER TABLE audit_events
    ADD COLUMN chain_version         smallint NOT NULL DEFAULT 1 CHECK (chain_version IN (1, 2)),
    ADD COLUMN recorded_by_issuer    text COLLATE "C" NOT NULL DEFAULT '',
    ADD COLUMN recorded_by_subject   text COLLATE "C" NOT NULL DEFAULT '',
    ADD COLUMN recorded_by_token_id  text COLLATE "C" NOT NULL DEFAULT '',
    ADD COLUMN recorded_by_client_id text COLLATE "C" NOT NULL DEFAULT '';

-- The exact-match filters recordedBySubject and correlation.* (traceId,
-- requestId, causationId). Without an index, a filter that matches few
-- events of a large project reads the whole project (docs/benchmarks.md).
-- The correlation indexes are partial: most events carry no request or
-- causation id, and an empty value is never searched for.
CREATE INDEX audit_events_recorded_by_idx ON audit_events (tenant_id, project_id, recorded_by_subject, sequence);
CREATE INDEX audit_events_trace_idx ON audit_events (tenant_id, project_id, trace_id, sequence) WHERE trace_id <> '';
CREATE INDEX audit_events_request_idx ON audit_events (tenant_id, project_id, request_id, sequence) WHERE request_id <> '';
CREATE INDEX audit_events_causation_idx ON audit_events (tenant_id, project_id, causation_id, sequence) WHERE causation_id <> '';

-- +goose Down
DROP INDEX audit_events_causation_idx;
DROP INDEX audit_events_request_idx;
DROP INDEX audit_events_trace_idx;
DROP INDEX audit_events_recorded_by_idx;
ALTER TABLE audit_events
    DROP COLUMN recorded_by_client_id,
    DROP COLUMN recorded_by_token_id,
    DROP COLUMN recorded_by_subject,
    DROP COLUMN recorded_by_issuer,
    DROP COLUMN chain_version;
