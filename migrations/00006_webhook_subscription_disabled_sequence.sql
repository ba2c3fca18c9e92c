-- +goose Up

-- The project sequence of a subscription's disable event: the events before
-- it are still delivered when their fan-out runs after the disable.
ALTER TABLE webhook_subscriptions ADD COLUMN disabled_sequence bigint;

-- +goose Down
ALTER TABLE webhook_subscriptions DROP COLUMN disabled_sequence;
