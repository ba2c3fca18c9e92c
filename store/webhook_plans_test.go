package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/store/dbsqlc"
)

// TestWebhookLookupsByIDDoNotNeedFreshStatistics fills audit_events and
// webhook_deliveries with a tenant the statistics do not know (analyzed
// when only another tenant existed; autovacuum never runs in tests), then
// explains the statements of a webhook send by id exactly as the store
// sends them: the batch's reads of deliveries and events by id, and the
// compare and set of SaveWebhookDeliveriesIf. Each must read the table by
// the id (an index whose keys are id, or tenant_id and id), never through
// an index of the tenant alone: with the 1-row estimate of an unknown tenant
// the planner preferred one tenant-only range to a lookup per id, and
// read the tenant's every row on each call (the trickle rows' PostgreSQL
// CPU, docs/benchmarks.md).
func TestWebhookLookupsByIDDoNotNeedFreshStatistics(t *testing.T) {
	ctx := context.Background()
	tracer := &lastQuery{match: "UPDATE webhook_deliveries"}
	pool, st := tracedStore(t, tracer, 0)

	const tenant, project = "t-new", "p-new"
	destination := uuid.Must(uuid.NewV7())
	base := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	// ids are UUIDv7-shaped (time first), as the service's.
	fill := func(tenant, project string, n int) {
		t.Helper()
		_, err := pool.Exec(ctx, `INSERT INTO audit_events (tenant_id, project_id, sequence, id, action, occurred_at, recorded_at,
			subject_type, subject_id, resource_type, resource_id, outcome, details, input_fingerprint, chain_hash,
			chain_version, recorded_by_subject)
		SELECT $1, $2, g, (lpad(to_hex(1780000000000 + g), 12, '0') || '7' || substr(md5($1 || g), 1, 19))::uuid,
			'doc.k', $4::timestamptz + g * interval '100 ms', $4::timestamptz + g * interval '100 ms', 'USER', 'u', 'doc', 'd',
			'SUCCESS', '{}', '\x00', '\x00', 2, 'seed'
		FROM generate_series(1, $3::int) g`, tenant, project, n, base)
		require.NoError(t, err)
		_, err = pool.Exec(ctx, `INSERT INTO webhook_deliveries (tenant_id, project_id, id, subscription_id, destination_id,
			event_id, event_sequence, event_type, idempotency_key, state, attempt_count, max_attempts, created_at, updated_at)
		SELECT e.tenant_id, e.project_id, (lpad(to_hex(1780000000000 + e.sequence), 12, '0') || '7' || substr(md5($1 || 'd' || e.sequence), 1, 19))::uuid,
			$3, $3, e.id, e.sequence, e.action, 'msg_' || e.sequence, 'DELIVERED', 1, 9, e.recorded_at, e.recorded_at
		FROM audit_events e WHERE e.tenant_id = $1 AND e.project_id = $2`, tenant, project, destination)
		require.NoError(t, err)
	}
	fill("t-old", "p-old", 5_000)
	_, err := pool.Exec(ctx, "ANALYZE audit_events, webhook_deliveries")
	require.NoError(t, err)
	fill(tenant, project, 20_000)

	rows, err := pool.Query(ctx, `SELECT id, event_id FROM webhook_deliveries WHERE tenant_id = $1 ORDER BY event_sequence DESC LIMIT 3`, tenant)
	require.NoError(t, err)
	type pair struct{ ID, EventID uuid.UUID }
	pairs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[pair])
	require.NoError(t, err)
	require.Len(t, pairs, 3)
	var deliveryIDs, eventIDs []uuid.UUID
	for _, p := range pairs {
		deliveryIDs, eventIDs = append(deliveryIDs, p.ID), append(eventIDs, p.EventID)
	}

	byID := [][]string{{"id"}, {"tenant_id", "id"}}
	t.Run("deliveries of a batch", func(t *testing.T) {
		requireIndexScans(t, pool, "webhook_deliveries", dbsqlc.BatchSendWebhookDeliveries,
			append([]any{tenant, deliveryIDs, destination}, bounds(deliveryIDs...)...), true, byID)
	})
	t.Run("events of a batch", func(t *testing.T) {
		requireIndexScans(t, pool, "audit_events", dbsqlc.FindAuditEventsByID, []any{tenant, eventIDs, nil, nil}, true, byID)
	})
	t.Run("events of a batch recorded between", func(t *testing.T) {
		requireIndexScans(t, pool, "audit_events", dbsqlc.FindAuditEventsByID,
			[]any{tenant, eventIDs, base, base.Add(time.Hour)}, true, byID)
	})
	// Each shape of SaveWebhookDeliveriesIf's statement: attempts started
	// at one instant, succeeded at one instant, and any other mix (a
	// failure among successes). Computed from a state the rows are not in:
	// nothing is saved, the statement runs all the same.
	now := time.Now()
	change := func(id uuid.UUID, prev domain.WebhookDeliveryState, state domain.WebhookDeliveryState, outcome domain.WebhookAttemptOutcome) domain.WebhookDeliveryChange {
		d := domain.WebhookDelivery{ID: id, TenantID: tenant, ProjectID: project, DestinationID: destination,
			State: state, AttemptCount: 1, MaxAttempts: 9, UpdatedAt: now}
		a := domain.WebhookDeliveryAttempt{Number: 1, Outcome: outcome, StartedAt: now}
		if outcome != domain.WebhookAttemptDelivering {
			a.FinishedAt = &now
			code := 200
			a.StatusCode = &code
		}
		if state == domain.WebhookDeliveryDelivered {
			d.DeliveredAt = &now
		}
		if state == domain.WebhookDeliveryRetrying {
			d.NextAttemptAt, d.LastError, a.Error = &now, "HTTP 500", "HTTP 500"
		}
		return domain.WebhookDeliveryChange{PrevState: prev, PrevAttempts: 1, Delivery: d, Attempt: a}
	}
	for _, tc := range []struct {
		name  string
		shape func(i int, id uuid.UUID) domain.WebhookDeliveryChange
		want  string
	}{
		{"started", func(_ int, id uuid.UUID) domain.WebhookDeliveryChange {
			c := change(id, domain.WebhookDeliveryPending, domain.WebhookDeliveryDelivering, domain.WebhookAttemptDelivering)
			c.PrevAttempts = 0
			return c
		}, "updated_at = $5"},
		{"succeeded", func(_ int, id uuid.UUID) domain.WebhookDeliveryChange {
			return change(id, domain.WebhookDeliveryDelivering, domain.WebhookDeliveryDelivered, domain.WebhookAttemptSucceeded)
		}, "attempt_started_at = c.started_at"},
		{"mixed", func(i int, id uuid.UUID) domain.WebhookDeliveryChange {
			if i == 0 {
				return change(id, domain.WebhookDeliveryDelivering, domain.WebhookDeliveryRetrying, domain.WebhookAttemptFailed)
			}
			return change(id, domain.WebhookDeliveryDelivering, domain.WebhookDeliveryDelivered, domain.WebhookAttemptSucceeded)
		}, "INSERT INTO webhook_delivery_attempts"},
	} {
		t.Run("compare and set, "+tc.name, func(t *testing.T) {
			var changes []domain.WebhookDeliveryChange
			for i, id := range deliveryIDs {
				changes = append(changes, tc.shape(i, id))
			}
			saved, err := st.SaveWebhookDeliveriesIf(ctx, changes)
			require.NoError(t, err)
			require.Empty(t, saved)
			sent := tracer.get()
			require.NotEmpty(t, sent, "the compare and set was sent")
			last := sent[len(sent)-1]
			require.Contains(t, last.sql, tc.want, "the statement of this shape")
			requireIndexScans(t, pool, "webhook_deliveries", last.sql, last.args, true, byID)
		})
	}
}
