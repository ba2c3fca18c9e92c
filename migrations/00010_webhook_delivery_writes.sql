-- +goose Up

-- Fewer index writes per delivery.
--
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

-- An attempt's start is the first update of its delivery, soon after the
-- fan-out inserted it. At fillfactor 80 a page of fresh deliveries has room
-- for the new versions of only a few of them: about a third of those updates
-- were not HOT, each writing a new entry into every index. Half-filled pages
-- make nearly all of them HOT (about 95% in the webhook-delivery
-- benchmark), for about the same growth on disk: the heap takes more room,
-- the indexes less (docs/benchmarks.md). Existing pages keep their fill.
ALTER TABLE webhook_deliveries SET (fillfactor = 50);

-- Attempt rows are now written once, at the attempt's end, and never
-- updated (the rare UNKNOWN of an attempt whose row an earlier version
-- wrote at its start aside): their pages can be full.
ALTER TABLE webhook_delivery_attempts RESET (fillfactor);

-- +goose Down
ALTER TABLE webhook_delivery_attempts SET (fillfactor = 80);
ALTER TABLE webhook_deliveries SET (fillfactor = 80);
CREATE INDEX webhook_deliveries_event_idx ON webhook_deliveries (tenant_id, event_id);
ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_subscription_id_event_id_key UNIQUE (subscription_id, event_id);
ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_event_id_subscription_id_key;
