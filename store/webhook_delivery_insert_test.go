package store_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/store"
)

// TestInsertWebhookDeliveries checks the fan-out's two inserts: the plain
// one stores all of its deliveries or, when one exists, none, failing with
// an error the fan-out recognizes (domain.ErrWebhookDeliveryExists) and
// retries (IsRetryable); the one that skips existing deliveries stores the
// others and names them.
func TestInsertWebhookDeliveries(t *testing.T) {
	st, now := parallelStore(t)
	ctx := context.Background()
	sub, dest := uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7())
	delivery := func(seq uint64) domain.WebhookDelivery {
		event := uuid.Must(uuid.NewV7())
		id := domain.FanoutDeliveryID(sub, event, now)
		return domain.WebhookDelivery{ID: id, TenantID: "t1", ProjectID: "p1", SubscriptionID: sub, DestinationID: dest,
			EventID: event, EventSequence: seq, EventType: "device.rebooted",
			IdempotencyKey: domain.WebhookDeliveryIdempotencyKey(id), State: domain.WebhookDeliveryPending,
			MaxAttempts: 3, CreatedAt: now, UpdatedAt: now}
	}
	stored := func(t *testing.T, ds ...domain.WebhookDelivery) []bool {
		t.Helper()
		out := make([]bool, len(ds))
		for i, d := range ds {
			_, err := st.GetWebhookDelivery(ctx, "t1", d.ID, false)
			if err != nil {
				require.ErrorIs(t, err, store.ErrNotFound)
			}
			out[i] = err == nil
		}
		return out
	}
	first, second, third := delivery(1), delivery(2), delivery(3)
	require.NoError(t, st.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
		return tx.InsertWebhookDeliveries(ctx, []domain.WebhookDelivery{first, second})
	}))
	require.Equal(t, []bool{true, true, false}, stored(t, first, second, third))

	err := st.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
		return tx.InsertWebhookDeliveries(ctx, []domain.WebhookDelivery{third, second})
	})
	require.ErrorIs(t, err, domain.ErrWebhookDeliveryExists)
	require.True(t, st.IsRetryable(err), "the fan-out's transaction runs again, skipping what exists")
	require.Equal(t, []bool{true, true, false}, stored(t, first, second, third), "none of the plain insert's deliveries")

	var inserted []uuid.UUID
	require.NoError(t, st.InTx(ctx, func(ctx context.Context, tx *store.Tx) (err error) {
		inserted, err = tx.InsertMissingWebhookDeliveries(ctx, []domain.WebhookDelivery{third, second})
		return err
	}))
	require.Equal(t, []uuid.UUID{third.ID}, inserted)
	require.Equal(t, []bool{true, true, true}, stored(t, first, second, third))
}
