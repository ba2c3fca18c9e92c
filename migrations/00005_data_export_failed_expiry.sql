-- +goose Up

-- FAILED exports expire too, a TTL after they failed.
CREATE INDEX data_exports_failed_idx ON data_exports (failed_at) WHERE state = 'FAILED';

-- +goose Down
DROP INDEX data_exports_failed_idx;
