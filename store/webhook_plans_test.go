package store_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/store"
	"github.com/aetheriot/aether-audit/store/dbsqlc"
	"github.com/aetheriot/aether-audit/store/storetest"
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
	tracer := &lastStatement{match: "UPDATE webhook_deliveries"}
	cfg, err := pgxpool.ParseConfig(storetest.NewDatabase(t))
	require.NoError(t, err)
	cfg.ConnConfig.Tracer = tracer
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	st := store.New(pool)

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
	_, err = pool.Exec(ctx, "ANALYZE audit_events, webhook_deliveries")
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
		requireLookupByID(t, pool, "webhook_deliveries", dbsqlc.BatchSendWebhookDeliveries,
			[]any{tenant, deliveryIDs, destination}, byID)
	})
	t.Run("events of a batch", func(t *testing.T) {
		requireLookupByID(t, pool, "audit_events", dbsqlc.FindAuditEventsByID, []any{tenant, eventIDs}, byID)
	})
	t.Run("compare and set", func(t *testing.T) {
		now := time.Now()
		var changes []domain.WebhookDeliveryChange
		for _, id := range deliveryIDs {
			// Computed from a state the rows are not in: nothing is saved,
			// the statement runs all the same.
			d := domain.WebhookDelivery{ID: id, TenantID: tenant, ProjectID: project, DestinationID: destination,
				State: domain.WebhookDeliveryDelivering, AttemptCount: 1, MaxAttempts: 9, UpdatedAt: now}
			changes = append(changes, domain.WebhookDeliveryChange{PrevState: domain.WebhookDeliveryPending, Delivery: d,
				Attempt: domain.WebhookDeliveryAttempt{Number: 1, Outcome: domain.WebhookAttemptDelivering, StartedAt: now}})
		}
		saved, err := st.SaveWebhookDeliveriesIf(ctx, changes)
		require.NoError(t, err)
		require.Empty(t, saved)
		sql, args := tracer.get()
		requireLookupByID(t, pool, "webhook_deliveries", sql, args, byID)
	})
}

// lastStatement is a pgx tracer that keeps the last statement sent that
// contains match, with its arguments.
type lastStatement struct {
	match string
	mu    sync.Mutex
	sql   string
	args  []any
}

// TraceQueryStart implements pgx.QueryTracer.
func (l *lastStatement) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if strings.Contains(data.SQL, l.match) {
		l.mu.Lock()
		l.sql, l.args = data.SQL, data.Args
		l.mu.Unlock()
	}
	return ctx
}

// TraceQueryEnd implements pgx.QueryTracer.
func (l *lastStatement) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (l *lastStatement) get() (string, []any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sql, l.args
}

// requireLookupByID explains sql with args and requires that every scan of
// table (or of one of its partitions) is an index scan of an index whose
// key columns are one of keys.
func requireLookupByID(t *testing.T, pool *pgxpool.Pool, table, sql string, args []any, keys [][]string) {
	t.Helper()
	ctx := context.Background()
	require.NotEmpty(t, sql)
	var raw []byte
	require.NoError(t, pool.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+sql, args...).Scan(&raw))
	var plans []struct {
		Plan planNode `json:"Plan"`
	}
	require.NoError(t, json.Unmarshal(raw, &plans))
	require.Len(t, plans, 1)
	scans := 0
	var walk func(n planNode)
	walk = func(n planNode) {
		if n.Relation != "" && n.NodeType != "ModifyTable" {
			var root string
			require.NoError(t, pool.QueryRow(ctx, `SELECT COALESCE(pg_partition_root(to_regclass($1)), to_regclass($1))::text`,
				n.Relation).Scan(&root))
			if root == table {
				scans++
				require.Contains(t, []string{"Index Scan", "Index Only Scan"}, n.NodeType, "plan does not read an index:\n%s", raw)
				var cols []string
				require.NoError(t, pool.QueryRow(ctx, `SELECT array_agg(a.attname::text ORDER BY k.ord)
					FROM pg_index i, unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord), pg_attribute a
					WHERE i.indexrelid = to_regclass($1) AND k.ord <= i.indnkeyatts
					  AND a.attrelid = i.indrelid AND a.attnum = k.attnum`, n.IndexName).Scan(&cols))
				require.Contains(t, keys, cols, "plan reads %s through index %s:\n%s", table, n.IndexName, raw)
			}
		}
		for _, c := range n.Plans {
			walk(c)
		}
	}
	walk(plans[0].Plan)
	require.Positive(t, scans, "plan reads %s:\n%s", table, raw)
}
