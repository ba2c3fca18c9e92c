-- +goose Up

-- Replays (replayWebhookEvents) deliver events again as new deliveries of
-- the same subscription: replay_of is the id of the replay's own audit event
-- (webhook.events.replayed), NULL for the fan-out's deliveries. The fan-out
-- stays exactly-once: its deliveries are unique per (subscription, event)
-- among the deliveries that are not replays.
ALTER TABLE webhook_deliveries ADD COLUMN replay_of uuid;
ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_subscription_id_event_id_key;
CREATE UNIQUE INDEX webhook_deliveries_fanout_key ON webhook_deliveries (subscription_id, event_id)
    WHERE replay_of IS NULL;

-- A delivery of a subscription with ordering SEQUENCE is sent by the
-- subscription's ordered job, one after the other (never changes).
ALTER TABLE webhook_deliveries ADD COLUMN ordered boolean NOT NULL DEFAULT false;

-- SKIPPED ends a dead letter that skipWebhookDelivery passed over. The list
-- also names PAUSED and CANCELLED (issue 18's destination lifecycle, migration
-- 00015), so that whichever of the two migrations runs last keeps every state.
ALTER TABLE webhook_deliveries DROP CONSTRAINT IF EXISTS webhook_deliveries_state_check;
ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_state_check CHECK (state IN ('PENDING',
    'DELIVERING', 'DELIVERED', 'RETRYING', 'DEAD_LETTERED', 'PAUSED', 'CANCELLED', 'SKIPPED'));

-- ordering: UNORDERED (every delivery on its own) or SEQUENCE (one after
-- the other in the order of the project sequence). For SEQUENCE only:
-- fanned_out_through is the project sequence through which the fan-out has
-- created the subscription's deliveries (they are created in order, with no
-- gap); paused_by_delivery_id the dead letter that holds the subscription;
-- ordered_awake_until says that an ordered job is queued or running for it
-- (the fan-out then enqueues none).
ALTER TABLE webhook_subscriptions
    ADD COLUMN ordering text NOT NULL DEFAULT 'UNORDERED' CHECK (ordering IN ('UNORDERED', 'SEQUENCE')),
    ADD COLUMN fanned_out_through bigint,
    ADD COLUMN paused_by_delivery_id uuid,
    ADD COLUMN ordered_awake_until timestamptz;

-- The unfinished deliveries of SEQUENCE subscriptions, in the order they are
-- sent: a row is inserted with its delivery and deleted by the ordered job
-- once it sees the delivery finished (DELIVERED, SKIPPED, CANCELLED). A
-- table of its own, so that no index of webhook_deliveries names a column
-- an attempt changes (their updates stay HOT, migration 00004).
CREATE TABLE webhook_ordered_queue (
    tenant_id       text COLLATE "C" NOT NULL,
    subscription_id uuid NOT NULL,
    event_sequence  bigint NOT NULL,
    delivery_id     uuid NOT NULL,
    PRIMARY KEY (subscription_id, event_sequence, delivery_id)
);

-- +goose Down
DROP TABLE webhook_ordered_queue;
ALTER TABLE webhook_subscriptions DROP COLUMN ordered_awake_until, DROP COLUMN paused_by_delivery_id,
    DROP COLUMN fanned_out_through, DROP COLUMN ordering;
ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_state_check;
ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_state_check CHECK (state IN ('PENDING',
    'DELIVERING', 'DELIVERED', 'RETRYING', 'DEAD_LETTERED', 'PAUSED', 'CANCELLED'));
ALTER TABLE webhook_deliveries DROP COLUMN ordered;
DROP INDEX webhook_deliveries_fanout_key;
ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_subscription_id_event_id_key UNIQUE (subscription_id, event_id);
ALTER TABLE webhook_deliveries DROP COLUMN replay_of;
