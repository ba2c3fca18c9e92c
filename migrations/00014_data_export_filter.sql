-- +goose Up

-- The filter of a filtered AUDIT export (docs/exports.md, "Filtered
-- exports"): the AuditEventFilter it was requested with, in the JSON shape
-- of that GraphQL input (sequences as decimal strings); NULL for an
-- unfiltered export. A filtered export is not a contiguous piece of the
-- chain, so it never records a checkpoint.
ALTER TABLE data_exports
    ADD COLUMN filter jsonb,
    ADD CONSTRAINT data_exports_filter CHECK (
        filter IS NULL OR (kind = 'AUDIT' AND jsonb_typeof(filter) = 'object' AND checkpoint_sequence IS NULL));

-- +goose Down
ALTER TABLE data_exports
    DROP CONSTRAINT data_exports_filter,
    DROP COLUMN filter;
