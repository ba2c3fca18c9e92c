package store

import (
	"context"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/store/dbsqlc"
)

// RecoverableWebhookDeliveries returns up to limit deliveries of a
// destination of tenant/project whose last attempt failed at or after since
// (RETRYING and DEAD_LETTERED ones) and whose events lie after
// purgedThrough, oldest first.
func (q *queries) RecoverableWebhookDeliveries(ctx context.Context, tenantID, projectID string, destinationID uuid.UUID, since time.Time, purgedThrough uint64, limit int) ([]domain.WebhookDelivery, error) {
	rows, err := q.sqlc.RecoverableWebhookDeliveries(ctx, dbsqlc.RecoverableWebhookDeliveriesParams{
		TenantID: tenantID, ProjectID: projectID, DestinationID: destinationID, Since: since,
		PurgedThrough: clampInt64(purgedThrough), RowLimit: int64(limit)})
	if err != nil {
		return nil, fmt.Errorf("reading recoverable webhook deliveries: %w", err)
	}
	out := make([]domain.WebhookDelivery, len(rows))
	for i := range rows {
		out[i] = deliveryFromRow(&rows[i])
	}
	return out, nil
}

// OrderedWebhookQueue returns the first limit deliveries of an ordered
// subscription's queue, in the order they are sent. The queue holds its
// unfinished deliveries, and finished ones until DequeueOrderedWebhookDeliveries.
func (q *queries) OrderedWebhookQueue(ctx context.Context, tenantID string, subscriptionID uuid.UUID, limit int) ([]domain.WebhookDelivery, error) {
	rows, err := q.sqlc.OrderedWebhookQueue(ctx, dbsqlc.OrderedWebhookQueueParams{
		TenantID: tenantID, SubscriptionID: subscriptionID, RowLimit: int64(limit)})
	if err != nil {
		return nil, fmt.Errorf("reading ordered webhook queue: %w", err)
	}
	out := make([]domain.WebhookDelivery, len(rows))
	for i := range rows {
		out[i] = deliveryFromRow(&rows[i])
	}
	return out, nil
}

// RunWebhookRetriesNow makes the scheduled River jobs of kind whose
// deliveries argument is one of packed (one-delivery retry jobs, see
// jobargs.WebhookDeliveryArgs) available at once, through River's JobRetryTx,
// and returns how many it found. It reads River's own table, through its
// index of jobs by state and queue.
func (t *Tx) RunWebhookRetriesNow(ctx context.Context, queue, kind string, packed []string) (int, error) {
	if len(packed) == 0 {
		return 0, nil
	}
	rows, _ := t.tx.Query(ctx, `SELECT id FROM river_job
		WHERE state = 'scheduled' AND queue = $1 AND kind = $2 AND args->>'deliveries' = ANY($3::text[])`, queue, kind, packed)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return 0, fmt.Errorf("finding scheduled webhook retries: %w", err)
	}
	tx, err := t.tx.pgxTx(ctx)
	if err != nil {
		return 0, fmt.Errorf("running webhook retries now: %w", err)
	}
	for _, id := range ids {
		if _, err := t.jobs.JobRetryTx(ctx, tx, id); err != nil {
			return 0, fmt.Errorf("running webhook retry job %d now: %w", id, err)
		}
	}
	return len(ids), nil
}

// QueueOrderedWebhookDeliveries puts the ordered deliveries among ids (of
// the tenant) into their subscriptions' queues.
func (t *Tx) QueueOrderedWebhookDeliveries(ctx context.Context, tenantID string, ids []uuid.UUID) error {
	if len(ids) == 0 {
		return nil
	}
	if err := t.sqlc.QueueOrderedWebhookDeliveries(ctx, dbsqlc.QueueOrderedWebhookDeliveriesParams{TenantID: tenantID, Ids: ids}); err != nil {
		return fmt.Errorf("queueing ordered webhook deliveries: %w", err)
	}
	return nil
}

// DequeueOrderedWebhookDeliveries removes finished deliveries from a
// subscription's queue.
func (t *Tx) DequeueOrderedWebhookDeliveries(ctx context.Context, tenantID string, subscriptionID uuid.UUID, ids []uuid.UUID) error {
	if len(ids) == 0 {
		return nil
	}
	err := t.sqlc.DequeueOrderedWebhookDeliveries(ctx, dbsqlc.DequeueOrderedWebhookDeliveriesParams{
		TenantID: tenantID, SubscriptionID: subscriptionID, Ids: ids})
	if err != nil {
		return fmt.Errorf("dequeueing ordered webhook deliveries: %w", err)
	}
	return nil
}

// LockOrderedWebhookSubscriptions locks the tenant's subscriptions among ids
// for the rest of the transaction, in id order, and returns their ordered
// fan-out state.
func (t *Tx) LockOrderedWebhookSubscriptions(ctx context.Context, tenantID string, ids []uuid.UUID) ([]domain.WebhookOrderedFanout, error) {
	rows, err := t.sqlc.LockOrderedWebhookSubscriptions(ctx, dbsqlc.LockOrderedWebhookSubscriptionsParams{TenantID: tenantID, Ids: ids})
	if err != nil {
		return nil, fmt.Errorf("locking ordered webhook subscriptions: %w", err)
	}
	out := make([]domain.WebhookOrderedFanout, len(rows))
	for i, r := range rows {
		out[i] = domain.WebhookOrderedFanout{SubscriptionID: r.ID, AwakeUntil: r.OrderedAwakeUntil}
		if r.FannedOutThrough != nil {
			out[i].FannedOutThrough = uint64(*r.FannedOutThrough)
		}
	}
	return out, nil
}

// SetWebhookSubscriptionFannedOut records that an ordered subscription's
// deliveries exist through project sequence through.
func (t *Tx) SetWebhookSubscriptionFannedOut(ctx context.Context, tenantID string, id uuid.UUID, through uint64) error {
	err := t.sqlc.SetWebhookSubscriptionFannedOut(ctx, dbsqlc.SetWebhookSubscriptionFannedOutParams{
		TenantID: tenantID, ID: id, FannedOutThrough: clampInt64(through)})
	if err != nil {
		return fmt.Errorf("recording ordered fan-out: %w", err)
	}
	return nil
}

// SetWebhookSubscriptionAwake records until when an ordered job is queued
// or running for the subscription (nil: none is).
func (t *Tx) SetWebhookSubscriptionAwake(ctx context.Context, tenantID string, id uuid.UUID, until *time.Time) error {
	err := t.sqlc.SetWebhookSubscriptionAwake(ctx, dbsqlc.SetWebhookSubscriptionAwakeParams{TenantID: tenantID, ID: id, AwakeUntil: until})
	if err != nil {
		return fmt.Errorf("recording ordered job: %w", err)
	}
	return nil
}

// SetWebhookSubscriptionPausedBy records the dead letter that holds an
// ordered subscription (nil: none).
func (t *Tx) SetWebhookSubscriptionPausedBy(ctx context.Context, tenantID string, id uuid.UUID, deliveryID *uuid.UUID) error {
	err := t.sqlc.SetWebhookSubscriptionPausedBy(ctx, dbsqlc.SetWebhookSubscriptionPausedByParams{
		TenantID: tenantID, ID: id, PausedByDeliveryID: deliveryID})
	if err != nil {
		return fmt.Errorf("recording paused subscription: %w", err)
	}
	return nil
}

// orderedLockClass is the first key of the advisory locks of ordered
// subscriptions (two-key advisory locks do not meet one-key ones).
const orderedLockClass int32 = 0x6f726472 // "ordr"

// TryLockWebhookSubscription takes the advisory lock of a subscription on a
// connection of its own, without waiting: ok is false when another session
// holds it. Only the holder sends an ordered subscription's deliveries.
// The lock lasts until unlock, or until its connection ends (the process
// died): PostgreSQL then releases it at once. check fails when that
// connection is gone. Distinct subscriptions may share a lock (a 32-bit
// hash): they then wait for each other, nothing worse.
func (s *Store) TryLockWebhookSubscription(ctx context.Context, id uuid.UUID) (check func(context.Context) error, unlock func(), ok bool, err error) {
	h := fnv.New32a()
	h.Write(id[:])
	key := int32(h.Sum32())
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, nil, false, fmt.Errorf("locking webhook subscription: %w", err)
	}
	if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1::int, $2::int)", orderedLockClass, key).Scan(&ok); err != nil {
		conn.Release()
		return nil, nil, false, fmt.Errorf("locking webhook subscription: %w", err)
	}
	if !ok {
		conn.Release()
		return nil, nil, false, nil
	}
	check = func(ctx context.Context) error {
		if _, err := conn.Exec(ctx, "SELECT 1"); err != nil {
			return fmt.Errorf("webhook subscription lock lost: %w", err)
		}
		return nil
	}
	unlock = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := conn.Exec(ctx, "SELECT pg_advisory_unlock($1::int, $2::int)", orderedLockClass, key); err != nil {
			// Closing the connection releases the lock.
			_ = conn.Hijack().Close(ctx)
			return
		}
		conn.Release()
	}
	return check, unlock, true, nil
}
