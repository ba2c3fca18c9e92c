-- +goose Up

-- Deliveries and attempts are written on every webhook, and each foreign
-- key costs PostgreSQL a lookup and a FOR KEY SHARE row lock per inserted
-- row (three per delivery). The application already guarantees what they
-- checked, and no webhook row is ever deleted:
--   * a delivery is inserted only by the fan-out, from the subscription
--     (and its destination) it has just read in the same transaction;
--     subscriptions and destinations are never deleted, only disabled;
--   * an attempt is inserted only in the statement that moves its delivery
--     (joined on the delivery rows that statement updated), or for a
--     delivery read and locked in the same transaction.
ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_subscription_id_fkey;
ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_destination_id_fkey;
ALTER TABLE webhook_delivery_attempts DROP CONSTRAINT webhook_delivery_attempts_delivery_id_fkey;

-- +goose Down
ALTER TABLE webhook_delivery_attempts
    ADD CONSTRAINT webhook_delivery_attempts_delivery_id_fkey FOREIGN KEY (delivery_id) REFERENCES webhook_deliveries (id);
ALTER TABLE webhook_deliveries
    ADD CONSTRAINT webhook_deliveries_destination_id_fkey FOREIGN KEY (destination_id) REFERENCES webhook_destinations (id);
ALTER TABLE webhook_deliveries
    ADD CONSTRAINT webhook_deliveries_subscription_id_fkey FOREIGN KEY (subscription_id) REFERENCES webhook_subscriptions (id);
