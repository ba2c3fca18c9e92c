package app_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/migrations"
	"github.com/aetheriot/aether-audit/store"
	"github.com/aetheriot/aether-audit/store/storetest"
)

// monthStart is the first instant (UTC) of the month of t plus months.
func monthStart(t time.Time, months int) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month()+time.Month(months), 1, 0, 0, 0, 0, time.UTC)
}

// partitionOf names the partition that holds the row of table whose
// column equals value.
func partitionOf(t *testing.T, pool *pgxpool.Pool, table, column string, value any) string {
	t.Helper()
	var name string
	require.NoError(t, pool.QueryRow(context.Background(),
		"SELECT tableoid::regclass::text FROM "+table+" WHERE "+column+" = $1 LIMIT 1", value).Scan(&name))
	return name
}

// ageDatabase makes a new test database look as if it had run for months:
// months from..to (relative to now) of every partitioned table get
// partitions of their own (a new database has no legacy partition covering
// them, migration 00029).
func ageDatabase(t *testing.T, st *store.Store, from, to int) {
	t.Helper()
	ctx := context.Background()
	tables, err := st.PartitionedTables(ctx)
	require.NoError(t, err)
	for _, tb := range tables {
		for m := from; m <= to; m++ {
			_, err := st.CreatePartition(ctx, tb.Name, monthStart(time.Now(), m))
			require.NoError(t, err)
		}
	}
}

// TestNewDatabaseHasNoLegacyPartition: a freshly migrated database has no
// <table>_legacy partition (migration 00029 drops the empty ones
// migrations 00024 and 00025 attach), each partitioned table has the
// current month's partition, and a delivery, its attempt, an alarm and a
// telemetry point of now land in their month's partitions, not in a table of
// the old shape (no partition keeps the old fan-out index).
func TestNewDatabaseHasNoLegacyPartition(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.NewPool(t)
	st := store.New(pool)
	now := time.Now().UTC()
	month := now.Format("200601")

	tables, err := st.PartitionedTables(ctx)
	require.NoError(t, err)
	var names []string
	for _, tb := range tables {
		names = append(names, tb.Name)
	}
	require.ElementsMatch(t, []string{"webhook_deliveries", "webhook_delivery_attempts", "alarm_history", "telemetry_history"}, names)
	for _, table := range names {
		var legacy int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_partition_tree($1::regclass) t
			JOIN pg_class c ON c.oid = t.relid WHERE c.relname = $2`, table, table+"_legacy").Scan(&legacy))
		require.Zero(t, legacy, "%s has no legacy partition", table)
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_class WHERE relname = $1`, table+"_legacy").Scan(&legacy))
		require.Zero(t, legacy, "%s_legacy is dropped, not only detached", table)
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM aether_partitions WHERE partition_name = $1`, table+"_legacy").Scan(&legacy))
		require.Zero(t, legacy, "%s_legacy is out of the registry", table)

		parts, err := st.Partitions(ctx, table)
		require.NoError(t, err)
		require.NotEmpty(t, parts)
		require.Equal(t, table+"_p"+month, parts[0].Name, "%s starts at the current month", table)
		require.Equal(t, monthStart(now, 0), parts[0].From)
		for i := 1; i < len(parts); i++ {
			require.Equal(t, parts[i-1].To, parts[i].From, "%s: months follow each other", table)
		}
		var attached bool
		require.NoError(t, pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_inherits WHERE inhparent = $1::regclass
			AND inhrelid = $2::regclass)`, table, table+"_p"+month).Scan(&attached))
		require.True(t, attached, "%s_p%s is attached", table, month)
	}

	rows, _ := insertHistoryRows(t, pool, now)
	for _, r := range rows {
		require.Equal(t, r.table+"_p"+month, partitionOf(t, pool, r.table, r.column, r.value))
	}

	// Only the partitioned table's indexes, cloned per partition: no
	// partition keeps the old (subscription_id, event_id) index.
	var fanout int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_partition_tree('webhook_deliveries') t
		JOIN pg_index i ON i.indrelid = t.relid
		WHERE t.isleaf AND i.indisunique AND NOT i.indisprimary`).Scan(&fanout))
	require.Zero(t, fanout, "no delivery partition has a unique index besides its primary key")
}

// TestMaintainPartitions creates the months ahead and drops exactly the
// months wholly past retention, each table with its own retention,
// recording in each project what went from it; rows retention still keeps
// stay, and so do those of the default partition that are recent.
func TestMaintainPartitions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := storetest.NewPool(t)
	st := store.New(pool)
	now := time.Now().UTC()
	ageDatabase(t, st, -6, 0)
	clock := &manualClock{now: now.Truncate(time.Microsecond)}
	a := app.New(st, app.Config{Now: clock.Now, Logger: slog.New(slog.DiscardHandler), Partitions: app.PartitionConfig{
		WebhookDeliveryRetention: 70 * 24 * time.Hour, HistoryRetention: 130 * 24 * time.Hour, MonthsAhead: 3}})
	writer := app.Identity{Subject: "svc", TenantID: "t1", ProjectIDs: []string{"p1", "p2"}, Permissions: []app.Permission{app.PermissionAuditWrite, app.PermissionAuditRead}}
	for _, p := range []string{"p1", "p2"} {
		_, err := a.RecordAuditEvent(ctx, writer, draft(p, "device.booted"), "")
		require.NoError(t, err)
	}

	// One delivery with an attempt, one alarm and one telemetry point in
	// the middle of each month -6..0 (p1), and one delivery of p2 in month -6.
	deliveries := map[int]uuid.UUID{}
	for m := -6; m <= 0; m++ {
		at := monthStart(now, m).Add(12 * 24 * time.Hour)
		if m == 0 {
			at = now.Add(-time.Minute)
		}
		_, deliveries[m] = insertHistoryRows(t, pool, at)
	}
	_, err := pool.Exec(ctx, `INSERT INTO webhook_deliveries (tenant_id, project_id, id, subscription_id, destination_id,
		event_id, event_sequence, event_type, idempotency_key, state, max_attempts, created_at, updated_at)
		VALUES ('t1', 'p2', $1, gen_random_uuid(), gen_random_uuid(), gen_random_uuid(), 1, 'a.b', 'k', 'DELIVERED', 3, $2, $2)`,
		domain.FanoutDeliveryID(uuid.New(), uuid.New(), monthStart(now, -6).Add(time.Hour)), monthStart(now, -6))
	require.NoError(t, err)
	// A telemetry point far in the past, before every partition: the
	// default partition caught it, and retention deletes it there.
	_, err = pool.Exec(ctx, `INSERT INTO telemetry_history (tenant_id, project_id, device_id, metric, occurred_at, value)
		VALUES ('t1', 'p1', 'd1', 'temp', $1, 1)`, monthStart(now, -40))
	require.NoError(t, err)
	require.Equal(t, "telemetry_history_default", partitionOf(t, pool, "telemetry_history", "occurred_at", monthStart(now, -40)))

	out, err := a.MaintainPartitions(ctx)
	require.NoError(t, err)

	// Created ahead: months 1..3 of every table.
	for _, table := range []string{"webhook_deliveries", "webhook_delivery_attempts", "alarm_history", "telemetry_history"} {
		parts, err := st.Partitions(ctx, table)
		require.NoError(t, err)
		var last time.Time
		for _, p := range parts {
			last = p.To
		}
		require.Equal(t, monthStart(now, 4), last, "%s: partitions through month +3", table)
		require.Contains(t, out.Created, table+"_p"+monthStart(now, 3).Format("200601"))
	}

	// Dropped: the months whose end lies at or before the cutoff.
	keptFrom := func(retention time.Duration) int {
		cutoff := now.Add(-retention)
		for m := -6; ; m++ {
			if monthStart(now, m+1).After(cutoff) {
				return m
			}
		}
	}
	deliveryKept, historyKept := keptFrom(70*24*time.Hour), keptFrom(130*24*time.Hour)
	require.Less(t, -6, deliveryKept)
	for m := -6; m <= 0; m++ {
		var n int
		require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM webhook_deliveries WHERE id = $1", deliveries[m]).Scan(&n))
		require.Equal(t, map[bool]int{true: 1, false: 0}[m >= deliveryKept], n, "delivery of month %d", m)
		require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM webhook_delivery_attempts WHERE delivery_id = $1", deliveries[m]).Scan(&n))
		require.Equal(t, map[bool]int{true: 1, false: 0}[m >= deliveryKept], n, "attempt of month %d", m)
		from, to := monthStart(now, m), monthStart(now, m+1)
		require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM alarm_history WHERE occurred_at >= $1 AND occurred_at < $2", from, to).Scan(&n))
		require.Equal(t, map[bool]int{true: 1, false: 0}[m >= historyKept], n, "alarm of month %d", m)
		require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM telemetry_history WHERE occurred_at >= $1 AND occurred_at < $2", from, to).Scan(&n))
		require.Equal(t, map[bool]int{true: 1, false: 0}[m >= historyKept], n, "telemetry of month %d", m)
	}
	var old int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM telemetry_history WHERE occurred_at < $1", monthStart(now, -6)).Scan(&old))
	require.Zero(t, old, "the default partition's expired rows are deleted")
	parts, err := st.Partitions(ctx, "webhook_deliveries")
	require.NoError(t, err)
	require.Equal(t, monthStart(now, deliveryKept), parts[0].From, "the oldest delivery partition left is the first one retention keeps")

	// Each project was told what went from it, in its own chain.
	reader := app.Identity{Subject: "ops", TenantID: "t1", ProjectIDs: []string{"p1", "p2"}, Permissions: []app.Permission{app.PermissionAuditRead}}
	p1 := auditEvents(t, a, reader, "p1", "retention.partitions.dropped")
	require.Len(t, p1, 3, "deliveries, alarms and telemetry of p1")
	tables := map[string]int{}
	for _, e := range p1 {
		require.Equal(t, "system:aether", e.Subject.ID)
		var d struct {
			Table      string `json:"table"`
			Partitions []struct {
				Partition string `json:"partition"`
				Rows      int64  `json:"rows"`
			} `json:"partitions"`
		}
		require.NoError(t, json.Unmarshal(e.Details, &d))
		for _, p := range d.Partitions {
			tables[d.Table] += int(p.Rows)
		}
	}
	require.Equal(t, deliveryKept+6, tables["webhook_deliveries"])
	require.Equal(t, historyKept+6, tables["alarm_history"])
	require.Equal(t, historyKept+6+1, tables["telemetry_history"], "with the default partition's row")
	p2 := auditEvents(t, a, reader, "p2", "retention.partitions.dropped")
	require.Len(t, p2, 1)
	require.Contains(t, string(p2[0].Details), `"rows":1`)

	// A second run finds nothing more to do.
	again, err := a.MaintainPartitions(ctx)
	require.NoError(t, err)
	require.Empty(t, again.Created)
	require.Empty(t, again.Dropped)
}

// upgradedDatabase returns a database created before migration 00029 and
// upgraded since: migrated up to 00028, a delivery and its attempt of
// another tenant written this month (into webhook_deliveries_legacy and
// webhook_delivery_attempts_legacy, which then cover this month), then
// migrated to the end, which keeps those two legacy partitions because they
// hold rows.
func upgradedDatabase(t *testing.T) *pgxpool.Pool {
	t.Helper()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, storetest.NewEmptyDatabase(t))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	db := stdlib.OpenDBFromPool(pool)
	t.Cleanup(func() { db.Close() })
	provider, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS)
	require.NoError(t, err)
	_, err = provider.UpTo(ctx, 28)
	require.NoError(t, err)
	id, err := uuid.NewV7()
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO webhook_deliveries (tenant_id, project_id, id, subscription_id, destination_id,
		event_id, event_sequence, event_type, idempotency_key, state, max_attempts, created_at, updated_at)
		VALUES ('t-old', 'p1', $1, gen_random_uuid(), gen_random_uuid(), gen_random_uuid(), 1, 'a.b', 'k', 'DEAD_LETTERED', 3, now(), now())`, id)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO webhook_delivery_attempts (delivery_id, number, outcome, started_at) VALUES ($1, 1, 'FAILED', now())`, id)
	require.NoError(t, err)
	require.NoError(t, store.Migrate(ctx, pool, slog.New(slog.DiscardHandler)))
	require.Equal(t, "webhook_deliveries_legacy", partitionOf(t, pool, "webhook_deliveries", "id", id))
	require.Equal(t, "webhook_delivery_attempts_legacy", partitionOf(t, pool, "webhook_delivery_attempts", "delivery_id", id))
	return pool
}

// partitionAt returns the partition of table that the registry says
// covers instant at, and the end of its range.
func partitionAt(t *testing.T, pool *pgxpool.Pool, table string, at time.Time) (string, time.Time) {
	t.Helper()
	var name string
	var to time.Time
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT partition_name, range_to FROM aether_partitions
		WHERE table_name = $1 AND range_from <= $2 AND range_to > $2`, table, at).Scan(&name, &to))
	return name, to
}

// boundaryDatabases are the databases the month-boundary tests run on: a
// new one, whose current month is a monthly partition, and an upgraded one,
// whose current month is still its legacy partition (migration 00024).
var boundaryDatabases = []struct {
	name string
	pool func(*testing.T) *pgxpool.Pool
}{
	{"new", nil},
	{"legacy", upgradedDatabase},
}

// onBoundaryDatabases runs test, in parallel, on each of boundaryDatabases
// (a nil pool: a new database).
func onBoundaryDatabases(t *testing.T, test func(*testing.T, *pgxpool.Pool)) {
	for _, db := range boundaryDatabases {
		t.Run(db.name, func(t *testing.T) {
			t.Parallel()
			var pool *pgxpool.Pool
			if db.pool != nil {
				pool = db.pool(t)
			}
			test(t, pool)
		})
	}
}

// TestWebhookDeliveriesAcrossMonthBoundary records events on both sides of
// the bound between the delivery partition of the current month (a monthly
// one, or an upgraded database's legacy one) and the next: each delivery
// and its attempts land in the partition of its event's month, and the
// lists (paged), lookups, dead letters, redrive, recovery, replay and the
// fan-out's exactly-once work across both.
func TestWebhookDeliveriesAcrossMonthBoundary(t *testing.T) {
	t.Parallel()
	onBoundaryDatabases(t, testWebhookDeliveriesAcrossMonthBoundary)
}

func testWebhookDeliveriesAcrossMonthBoundary(t *testing.T, pool *pgxpool.Pool) {
	ctx := context.Background()
	schedule := domain.RetrySchedule{time.Minute}
	b := setupWebhooks(t, webhookOpts{schedule: schedule, pool: pool})
	broken := true
	b.receiver.setRespond(failOn(&broken, "/hook"))
	dest := b.createDestination(t, "/hook")
	sub := b.subscribe(t, dest.Destination.ID.String(), "device.*")

	this, bound := partitionAt(t, b.pool, "webhook_deliveries", time.Now())
	thisAttempts, attemptsBound := partitionAt(t, b.pool, "webhook_delivery_attempts", time.Now())
	require.Equal(t, bound, attemptsBound, "a delivery and its attempts share a month")
	b.clock.Set(bound.Add(-time.Millisecond))
	before := b.record(t, "device.before")
	b.clock.Set(bound)
	after := b.record(t, "device.after")
	require.Equal(t, 2, b.fanOut(t))
	for range schedule.MaxAttempts() {
		b.deliver(t)
		for _, d := range b.deliveries(t, app.WebhookDeliveriesInput{}) {
			if d.NextAttemptAt != nil {
				b.clock.Set(*d.NextAttemptAt)
			}
		}
	}

	dead := b.deliveries(t, app.WebhookDeliveriesInput{State: domain.WebhookDeliveryDeadLettered})
	require.Len(t, dead, 2, "both dead letters listed, from both partitions")
	require.Equal(t, after.ID, dead[0].EventID, "newest first")
	require.Equal(t, before.ID, dead[1].EventID)
	next := "webhook_deliveries_p" + bound.Format("200601")
	require.Equal(t, this, partitionOf(t, b.pool, "webhook_deliveries", "id", dead[1].ID))
	require.Equal(t, next, partitionOf(t, b.pool, "webhook_deliveries", "id", dead[0].ID))
	require.Equal(t, thisAttempts, partitionOf(t, b.pool, "webhook_delivery_attempts", "delivery_id", dead[1].ID))
	require.Equal(t, "webhook_delivery_attempts_p"+bound.Format("200601"), partitionOf(t, b.pool, "webhook_delivery_attempts", "delivery_id", dead[0].ID))

	// Paged one at a time, the keyset crosses the bound.
	one := 1
	page, err := b.app.WebhookDeliveries(ctx, b.admin, app.WebhookDeliveriesInput{ProjectID: "p1", First: &one})
	require.NoError(t, err)
	require.True(t, page.HasNextPage)
	require.Len(t, page.Items, 1)
	second := b.deliveries(t, app.WebhookDeliveriesInput{First: &one, After: app.IDCursor(page.Items[0].ID)})
	require.Len(t, second, 1)
	require.Equal(t, before.ID, second[0].EventID)

	// Redrive the one after the bound, recover the destination's others
	// (the one before it).
	broken = false
	_, err = b.app.RedriveWebhookDelivery(ctx, b.admin, dead[0].ID.String(), true)
	require.NoError(t, err)
	recovered, err := b.app.RecoverWebhookDeliveries(ctx, b.admin, app.RecoverWebhookDeliveriesInput{
		DestinationID: dest.Destination.ID.String(), Since: bound.Add(-time.Hour), Confirm: true})
	require.NoError(t, err)
	require.Equal(t, 1, recovered, "the dead letter before the bound")
	b.deliver(t)
	for _, d := range dead {
		got := b.delivery(t, d.ID.String())
		require.Equal(t, domain.WebhookDeliveryDelivered, got.State)
		require.Len(t, got.Attempts, schedule.MaxAttempts()+1, "every attempt, from the delivery's partition")
	}

	out, err := b.app.ReplayWebhookEvents(ctx, b.admin, app.ReplayWebhookEventsInput{SubscriptionID: sub.ID.String(),
		FromSequence: before.Sequence, ToSequence: after.Sequence, Confirm: true})
	require.NoError(t, err)
	require.Equal(t, 2, out.Count)
	b.deliver(t)
	all := b.deliveries(t, app.WebhookDeliveriesInput{SubscriptionID: sub.ID.String()})
	require.Len(t, all, 4)
	for _, d := range all {
		require.Equal(t, domain.WebhookDeliveryDelivered, d.State)
	}
	require.Zero(t, b.fanOut(t), "the fan-out stays exactly once across the bound")
}

// TestOrderedDeliveryAcrossMonthBoundary: a SEQUENCE subscription's
// deliveries on both sides of a partition bound (after a monthly or a
// legacy partition) are sent one after the other in sequence order, a retry
// before the bound holding those after it.
func TestOrderedDeliveryAcrossMonthBoundary(t *testing.T) {
	t.Parallel()
	onBoundaryDatabases(t, testOrderedDeliveryAcrossMonthBoundary)
}

func testOrderedDeliveryAcrossMonthBoundary(t *testing.T, pool *pgxpool.Pool) {
	b := setupOrderedOn(t, webhookOpts{schedule: domain.RetrySchedule{time.Hour}, pool: pool})
	this, bound := partitionAt(t, b.pool, "webhook_deliveries", time.Now())
	b.fail("device.e2", true)
	b.clock.Set(bound.Add(-2 * time.Millisecond))
	b.record(t, "device.e1")
	b.record(t, "device.e2")
	b.clock.Set(bound)
	b.record(t, "device.e3")
	b.record(t, "device.e4")
	require.Equal(t, 4, b.fanOut(t))
	require.Equal(t, this, partitionOf(t, b.pool, "webhook_deliveries", "id", b.byAction(t, "device.e2").ID))
	require.Equal(t, "webhook_deliveries_p"+bound.Format("200601"), partitionOf(t, b.pool, "webhook_deliveries", "id", b.byAction(t, "device.e3").ID))

	b.deliverOrdered(t)
	require.Equal(t, []string{"device.e1", "device.e2"}, b.sent(), "the retry before the bound holds the deliveries after it")
	b.fail("device.e2", false)
	b.clock.Set(*b.byAction(t, "device.e2").NextAttemptAt)
	b.deliverOrdered(t)
	require.Equal(t, []string{"device.e1", "device.e2", "device.e2", "device.e3", "device.e4"}, b.sent())
	for _, a := range []string{"device.e1", "device.e2", "device.e3", "device.e4"} {
		require.Equal(t, domain.WebhookDeliveryDelivered, b.byAction(t, a).State, a)
	}
}
