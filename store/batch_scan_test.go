package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/store"
	"github.com/aetheriot/aether-audit/store/dbsqlc"
	"github.com/aetheriot/aether-audit/store/storetest"
)

// TestBatchReadScannersMatchTheRowScanners: a delivery job's batch read
// scans its rows (deliveries and events by id) into the same values as the
// per-row scanners, with rows that alternate NULL and set values in every
// nullable column (so that nothing of one row shows through in the next),
// and with about ten allocations fewer per delivery and event.
func TestBatchReadScannersMatchTheRowScanners(t *testing.T) {
	ctx := context.Background()
	pool := storetest.NewPool(t)
	const tenant, project, n = "t-scan", "p-scan", 60
	destination := uuid.Must(uuid.NewV7())
	base := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	_, err := pool.Exec(ctx, `INSERT INTO audit_events (tenant_id, project_id, sequence, id, action, occurred_at, recorded_at,
			subject_type, subject_id, subject_display_name, resource_type, resource_id, outcome,
			governance_risk, governance_reason, trace_id, evidence_digests, details, input_fingerprint, chain_hash,
			chain_version, recorded_by_issuer, recorded_by_subject)
		SELECT $1, $2, g, gen_random_uuid(), 'doc.' || (g % 4), $4::timestamptz + g * interval '1 s', $4::timestamptz + g * interval '1 s',
			'USER', 'u' || (g % 3), CASE WHEN g % 2 = 0 THEN 'Ann' ELSE '' END, 'doc', 'd' || g, 'SUCCESS',
			CASE WHEN g % 3 = 0 THEN 'HIGH' END, CASE WHEN g % 3 = 0 THEN 'why ' || g ELSE '' END,
			CASE WHEN g % 2 = 1 THEN 'trace-' || g ELSE '' END,
			CASE WHEN g % 2 = 0 THEN jsonb_build_array(jsonb_build_object('algorithm', 'sha256', 'value', md5(g::text), 'label', 'l' || g))
				ELSE '[]'::jsonb END,
			jsonb_build_object('n', g), sha256(g::text::bytea), sha256(('c' || g)::bytea), 2, 'iss', 'seed' || (g % 2)
		FROM generate_series(1, $3::int) g`, tenant, project, n, base)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO webhook_deliveries (tenant_id, project_id, id, subscription_id, destination_id,
			event_id, event_sequence, event_type, idempotency_key, state, attempt_count, max_attempts, created_at, updated_at,
			next_attempt_at, delivered_at, last_error, replay_of, attempt_started_at, attempt_status_code, attempt_latency_us,
			attempt_response_body)
		SELECT e.tenant_id, e.project_id, gen_random_uuid(), $3, $3, e.id, e.sequence, e.action, 'msg_' || e.sequence,
			CASE WHEN e.sequence % 2 = 0 THEN 'DELIVERED' ELSE 'RETRYING' END, 1, 9, e.recorded_at, e.recorded_at,
			CASE WHEN e.sequence % 2 = 1 THEN e.recorded_at + interval '1 min' END,
			CASE WHEN e.sequence % 2 = 0 THEN e.recorded_at END,
			CASE WHEN e.sequence % 2 = 1 THEN 'HTTP 500' ELSE '' END,
			CASE WHEN e.sequence % 3 = 0 THEN gen_random_uuid() END,
			CASE WHEN e.sequence % 2 = 0 THEN e.recorded_at END, CASE WHEN e.sequence % 2 = 0 THEN 200 END,
			CASE WHEN e.sequence % 2 = 0 THEN 1500 END, CASE WHEN e.sequence % 2 = 0 THEN 'ok ' || e.sequence ELSE '' END
		FROM audit_events e WHERE e.tenant_id = $1 AND e.project_id = $2`, tenant, project, destination)
	require.NoError(t, err)

	rows, err := pool.Query(ctx, `SELECT id, event_id FROM webhook_deliveries WHERE tenant_id = $1`, tenant)
	require.NoError(t, err)
	type pair struct{ ID, EventID uuid.UUID }
	pairs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[pair])
	require.NoError(t, err)
	require.Len(t, pairs, n)
	var deliveryIDs, eventIDs []uuid.UUID
	for _, p := range pairs {
		deliveryIDs, eventIDs = append(deliveryIDs, p.ID), append(eventIDs, p.EventID)
	}

	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	deliveries := func(ids []uuid.UUID, batch bool) int {
		lo, hi := store.IDBounds(ids)
		rows, _ := conn.Query(ctx, dbsqlc.BatchSendWebhookDeliveries, tenant, ids, destination, lo, hi)
		got, err := store.CollectDeliveries(rows, batch)
		require.NoError(t, err)
		return len(got)
	}
	events := func(ids []uuid.UUID, batch bool) int {
		rows, _ := conn.Query(ctx, dbsqlc.FindAuditEventsByID, tenant, ids, nil, nil)
		got, err := store.CollectEvents(rows, batch)
		require.NoError(t, err)
		return len(got)
	}

	lo, hi := store.IDBounds(deliveryIDs)
	rows, _ = conn.Query(ctx, dbsqlc.BatchSendWebhookDeliveries, tenant, deliveryIDs, destination, lo, hi)
	wantDeliveries, err := store.CollectDeliveries(rows, false)
	require.NoError(t, err)
	rows, _ = conn.Query(ctx, dbsqlc.BatchSendWebhookDeliveries, tenant, deliveryIDs, destination, lo, hi)
	gotDeliveries, err := store.CollectDeliveries(rows, true)
	require.NoError(t, err)
	require.Len(t, gotDeliveries, n)
	require.Equal(t, wantDeliveries, gotDeliveries)

	rows, _ = conn.Query(ctx, dbsqlc.FindAuditEventsByID, tenant, eventIDs, nil, nil)
	wantEvents, err := store.CollectEvents(rows, false)
	require.NoError(t, err)
	rows, _ = conn.Query(ctx, dbsqlc.FindAuditEventsByID, tenant, eventIDs, nil, nil)
	gotEvents, err := store.CollectEvents(rows, true)
	require.NoError(t, err)
	require.Len(t, gotEvents, n)
	require.Equal(t, wantEvents, gotEvents)

	perRow := func(collect func([]uuid.UUID, bool) int, ids []uuid.UUID, batch bool) float64 {
		one := testing.AllocsPerRun(10, func() { collect(ids[:1], batch) })
		all := testing.AllocsPerRun(10, func() { collect(ids, batch) })
		return (all - one) / float64(len(ids)-1)
	}
	dRow, dBatch := perRow(deliveries, deliveryIDs, false), perRow(deliveries, deliveryIDs, true)
	eRow, eBatch := perRow(events, eventIDs, false), perRow(events, eventIDs, true)
	t.Logf("allocations per row: deliveries %.1f -> %.1f, events %.1f -> %.1f", dRow, dBatch, eRow, eBatch)
	require.LessOrEqual(t, dBatch+eBatch, dRow+eRow-8, "the batch read allocates less per delivery and event")
}
