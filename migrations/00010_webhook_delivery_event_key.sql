-- +goose Up

-- Every delivery inserted writes each index of webhook_deliveries, and so
-- does every update of a delivery that does not fit in its page (about a
-- third of them under load). The unique key of the fan-out, one delivery
-- per (subscription, event), serves lookups by event as well when the event
-- comes first, so the separate index on (tenant_id, event_id) goes: one
-- index fewer per write. ON CONFLICT (subscription_id, event_id) infers the
-- new key (the same columns).
CREATE UNIQUE INDEX webhook_deliveries_event_id_subscription_id_key
    ON webhook_deliveries (event_id, subscription_id);
ALTER TABLE webhook_deliveries
    ADD CONSTRAINT webhook_deliveries_event_id_subscription_id_key
    UNIQUE USING INDEX webhook_deliveries_event_id_subscription_id_key;
ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_subscription_id_event_id_key;
DROP INDEX webhook_deliveries_event_idx;

-- +goose Down
CREATE INDEX webhook_deliveries_event_idx ON webhook_deliveries (tenant_id, event_id);
ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_subscription_id_event_id_key UNIQUE (subscription_id, event_id);
ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_event_id_subscription_id_key;
