-- +goose Up

-- Every delivery row is updated twice (DELIVERING, then its outcome) and
-- every attempt row once, soon after being inserted. An update is HOT (no
-- index entry written: four indexes on webhook_deliveries) only if the new
-- version fits in the same page. At fillfactor 80 a page of deliveries
-- (about 260 bytes a version) had room for a sixth of its rows' updates, so
-- about 40 % of them wrote every index (pg_stat_user_tables in the
-- webhook-delivery bench). At 30, a page of deliveries has room for both
-- updates of each of its rows; at 45, a page of attempts for the update of
-- each of its. The tables are about twice as large on disk.
ALTER TABLE webhook_deliveries SET (fillfactor = 30);
ALTER TABLE webhook_delivery_attempts SET (fillfactor = 45);

-- +goose Down
ALTER TABLE webhook_delivery_attempts SET (fillfactor = 80);
ALTER TABLE webhook_deliveries SET (fillfactor = 80);
