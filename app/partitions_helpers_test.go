package app_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/store"
)

// historyRow names one row insertHistoryRows wrote: its table, and a
// column and value that find it there (partitionOf).
type historyRow struct {
	table, column string
	value         any
}

// insertHistoryRows writes one row of each registered partitioned table as
// of at, for tenant t1 and project p1: a dead-lettered delivery (its id
// the UUIDv7 of at), its failed attempt, an alarm and a telemetry point.
// It returns where each row is found, and the delivery's id.
func insertHistoryRows(t *testing.T, pool *pgxpool.Pool, at time.Time) ([]historyRow, uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	delivery := domain.FanoutDeliveryID(uuid.New(), uuid.New(), at)
	_, err := pool.Exec(ctx, `INSERT INTO webhook_deliveries (tenant_id, project_id, id, subscription_id, destination_id,
		event_id, event_sequence, event_type, idempotency_key, state, max_attempts, created_at, updated_at)
		VALUES ('t1', 'p1', $1, gen_random_uuid(), gen_random_uuid(), gen_random_uuid(), 1, 'a.b', 'k', 'DEAD_LETTERED', 3, $2, $2)`, delivery, at)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO webhook_delivery_attempts (delivery_id, number, outcome, started_at) VALUES ($1, 1, 'FAILED', $2)`, delivery, at)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO alarm_history (tenant_id, project_id, id, occurred_at, alarm_id, device_id, severity, state, message)
		VALUES ('t1', 'p1', gen_random_uuid(), $1, 'a1', 'd1', 'MAJOR', 'RAISED', 'm')`, at)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO telemetry_history (tenant_id, project_id, device_id, metric, occurred_at, value)
		VALUES ('t1', 'p1', 'd1', 'temp', $1, 1)`, at)
	require.NoError(t, err)
	return []historyRow{
		{"webhook_deliveries", "id", delivery}, {"webhook_delivery_attempts", "delivery_id", delivery},
		{"alarm_history", "occurred_at", at}, {"telemetry_history", "occurred_at", at},
	}, delivery
}

// requireEventsFound checks that each event 1..head of tenant t1's project
// p1 is found by sequence (st) and as the one-event page after the event
// before it (a, as reader).
func requireEventsFound(t *testing.T, st *store.Store, a *app.App, reader app.Identity, head uint64) {
	t.Helper()
	ctx := context.Background()
	for seq := uint64(1); seq <= head; seq++ {
		e, err := st.GetAuditEventBySequence(ctx, "t1", "p1", seq)
		require.NoError(t, err)
		require.Equal(t, seq, e.Sequence)
		after, one := seq-1, 1
		page, err := a.SearchAuditEvents(ctx, reader, app.SearchAuditEventsInput{ProjectID: "p1", AfterSequence: &after, First: &one})
		require.NoError(t, err)
		require.Len(t, page.Edges, 1)
		require.Equal(t, seq, page.Edges[0].Event.Sequence)
	}
}
