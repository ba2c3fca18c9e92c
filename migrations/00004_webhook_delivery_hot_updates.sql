-- +goose Up

-- A delivery's row changes state on every attempt. With no index on state
-- (or on any column an attempt changes) and room left in each page, those
-- updates are HOT: no index entry is written. Dead letters are found through
-- the project index, filtered by state.
DROP INDEX webhook_deliveries_state_idx;
ALTER TABLE webhook_deliveries SET (fillfactor = 80);
ALTER TABLE webhook_delivery_attempts SET (fillfactor = 80);

-- +goose Down
ALTER TABLE webhook_delivery_attempts RESET (fillfactor);
ALTER TABLE webhook_deliveries RESET (fillfactor);
CREATE INDEX webhook_deliveries_state_idx ON webhook_deliveries (tenant_id, project_id, state, id);
