-- +goose Up

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
