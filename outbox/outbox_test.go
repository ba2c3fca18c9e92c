package outbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/client"
	"github.com/aetheriot/aether-audit/internal/aethertest"
	"github.com/aetheriot/aether-audit/outbox"
	"github.com/aetheriot/aether-audit/store/storetest"
)

func TestMain(m *testing.M) { aethertest.Main(m) }

// testBundle is an Aether server, a producer database with the outbox and
// a business table, and a client of the server.
type testBundle struct {
	srv      *aethertest.Server
	producer *pgxpool.Pool
	client   *client.Client
	token    string
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	srv := aethertest.Start(t)
	tok := srv.Token(t, "t1", []string{"*"}, "audit:read,audit:write", "device-service", time.Hour)
	c, err := client.New(srv.URL, client.Options{Token: tok, MinBackoff: 20 * time.Millisecond, MaxBackoff: time.Second, MaxAttempts: 3})
	require.NoError(t, err)
	pool, err := pgxpool.New(context.Background(), storetest.NewEmptyDatabase(t))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	require.NoError(t, outbox.Migrate(context.Background(), pool))
	require.NoError(t, outbox.Migrate(context.Background(), pool), "Migrate runs again without harm")
	_, err = pool.Exec(context.Background(), `CREATE TABLE devices (id text PRIMARY KEY, firmware text NOT NULL)`)
	require.NoError(t, err)
	return &testBundle{srv: srv, producer: pool, client: c, token: tok}
}

// runRelay runs an in-process relay until the test ends (or stop is
// called).
func (b *testBundle) runRelay(t *testing.T, c *client.Client, reg prometheus.Registerer) (stop func()) {
	t.Helper()
	r, err := outbox.NewRelay(outbox.RelayConfig{Pool: b.producer, Client: c, PollInterval: 20 * time.Millisecond,
		CountInterval: 50 * time.Millisecond, Registerer: reg})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	stop = func() {
		cancel()
		require.NoError(t, <-done)
	}
	t.Cleanup(func() {
		if ctx.Err() == nil {
			stop()
		}
	})
	return stop
}

// firmwareEvent is the event of a firmware update of dev in project p.
func firmwareEvent(p, dev, to string) client.EventInput {
	return client.EventInput{
		ProjectID: p, Action: "device.firmware.updated", OccurredAt: time.Now(),
		Subject:  client.Subject{Type: client.SubjectService, ID: "device-service"},
		Resource: client.Resource{Type: "device", ID: dev}, Outcome: client.OutcomeSuccess,
		Details: json.RawMessage(fmt.Sprintf(`{"to":%q,"size":1e3}`, to)),
	}
}

// updateFirmware is the producer's business transaction: the device's row
// and its audit event commit together, or neither does.
func (b *testBundle) updateFirmware(ctx context.Context, p, dev, to string, rollback bool) (string, error) {
	tx, err := b.producer.Begin(ctx)
	if err != nil {
		return "", err
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `INSERT INTO devices (id, firmware) VALUES ($1, $2)
		ON CONFLICT (id) DO UPDATE SET firmware = excluded.firmware`, dev, to); err != nil {
		return "", err
	}
	id, err := outbox.Record(ctx, tx, firmwareEvent(p, dev, to))
	if err != nil {
		return "", err
	}
	if rollback {
		return id, tx.Rollback(ctx)
	}
	return id, tx.Commit(ctx)
}

// events reads every event of project p, oldest first.
func (b *testBundle) events(t *testing.T, p string) []client.Event {
	t.Helper()
	var out []client.Event
	for ev, err := range b.client.Search(context.Background(), p, client.SearchOptions{PageSize: 500}) {
		require.NoError(t, err)
		out = append(out, ev)
	}
	return out
}

// outboxRows counts the rows left in the outbox: waiting and parked.
func (b *testBundle) outboxRows(t *testing.T) (waiting, parked int) {
	t.Helper()
	require.NoError(t, b.producer.QueryRow(context.Background(),
		`SELECT count(*) FILTER (WHERE parked_at IS NULL), count(*) FILTER (WHERE parked_at IS NOT NULL) FROM aether_outbox`).
		Scan(&waiting, &parked))
	return waiting, parked
}

func TestRelayShipsCommittedEventsInOrder(t *testing.T) {
	b := setup(t)
	ctx := context.Background()

	var ids []string
	for i := range 20 {
		id, err := b.updateFirmware(ctx, "plant-1", fmt.Sprint("dev-", i%3), fmt.Sprint("1.", i), false)
		require.NoError(t, err)
		ids = append(ids, id)
	}
	// A business transaction that rolls back leaves no event.
	rolledBack, err := b.updateFirmware(ctx, "plant-1", "dev-x", "9.9", true)
	require.NoError(t, err)

	reg := prometheus.NewRegistry()
	b.runRelay(t, b.client, reg)
	aethertest.Await(t, 30*time.Second, "the outbox drains", func() bool {
		waiting, _ := b.outboxRows(t)
		return waiting == 0
	})
	evs := b.events(t, "plant-1")
	require.Len(t, evs, 20)
	for i, ev := range evs {
		require.Equal(t, uint64(i+1), ev.Sequence)
		require.Equal(t, ids[i], ev.ID, "commit order")
		require.NotEqual(t, rolledBack, ev.ID)
	}
	require.JSONEq(t, `{"to":"1.0","size":1e3}`, string(evs[0].Details))
	require.Contains(t, string(evs[0].Details), "1e3", "details keep their numbers as written")

	// Later commits arrive too, woken by the notification.
	id, err := b.updateFirmware(ctx, "plant-1", "dev-1", "2.0", false)
	require.NoError(t, err)
	aethertest.Await(t, 10*time.Second, "the new event arrives", func() bool {
		_, err := b.client.Get(ctx, "plant-1", id)
		return err == nil
	})
	aethertest.Await(t, 10*time.Second, "metrics count it", func() bool {
		return metric(t, reg, "aether_outbox_shipped_total") == 21
	})
	require.Equal(t, 1.0, metric(t, reg, "aether_outbox_relay_leader"))
	require.Equal(t, 21.0, metric(t, reg, "aether_outbox_lag_seconds"), "one lag per event")
}

// metric reads a counter's or gauge's value, or a histogram's sample
// count, from the registry (0 when absent).
func metric(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name || len(mf.GetMetric()) == 0 {
			continue
		}
		m := mf.GetMetric()[0]
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		}
	}
	return 0
}

func TestPoisonRowIsParked(t *testing.T) {
	b := setup(t)
	ctx := context.Background()

	first, err := b.updateFirmware(ctx, "p", "dev-1", "1.0", false)
	require.NoError(t, err)
	tx, err := b.producer.Begin(ctx)
	require.NoError(t, err)
	bad := firmwareEvent("p", "dev-2", "1.1")
	bad.Action = "Firmware Updated" // Aether refuses it: BAD_USER_INPUT
	poison, err := outbox.Record(ctx, tx, bad)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	// A producer writing the table with plain SQL, with a member the input
	// does not have.
	_, err = b.producer.Exec(ctx, `INSERT INTO aether_outbox (event) VALUES ('{"projectId":"p","action":"device.x.y","colour":"red"}')`)
	require.NoError(t, err)
	last, err := b.updateFirmware(ctx, "p", "dev-3", "1.2", false)
	require.NoError(t, err)

	reg := prometheus.NewRegistry()
	b.runRelay(t, b.client, reg)
	aethertest.Await(t, 30*time.Second, "the good rows ship past the poison", func() bool {
		waiting, parked := b.outboxRows(t)
		return waiting == 0 && parked == 2
	})
	evs := b.events(t, "p")
	require.Len(t, evs, 2)
	require.Equal(t, []string{first, last}, []string{evs[0].ID, evs[1].ID})

	var lastError string
	require.NoError(t, b.producer.QueryRow(ctx, `SELECT last_error FROM aether_outbox WHERE id = $1`, poison).Scan(&lastError))
	require.Contains(t, lastError, "BAD_USER_INPUT")
	require.Contains(t, lastError, "action")
	aethertest.Await(t, 10*time.Second, "the parked gauge counts both", func() bool {
		return metric(t, reg, "aether_outbox_parked") == 2
	})
	require.Equal(t, 2.0, metric(t, reg, "aether_outbox_parked_total"))

	// Fixed and released by an operator, the row ships.
	_, err = b.producer.Exec(ctx, `UPDATE aether_outbox SET parked_at = NULL, last_error = NULL,
		event = json_build_object('projectId','p','action','device.firmware.updated','occurredAt',now(),
			'subject',json_build_object('type','SERVICE','id','ops'),'resource',json_build_object('type','device','id','dev-2'),
			'outcome','SUCCESS') WHERE id = $1`, poison)
	require.NoError(t, err)
	aethertest.Await(t, 10*time.Second, "the fixed row ships", func() bool {
		_, err := b.client.Get(ctx, "p", poison)
		return err == nil
	})
}

// countingClient is a client whose HTTP requests are counted.
func (b *testBundle) countingClient(t *testing.T, n *atomic.Int64) *client.Client {
	t.Helper()
	c, err := client.New(b.srv.URL, client.Options{Token: b.token, MaxAttempts: 3,
		HTTPClient: &http.Client{Transport: countingTransport{n}}})
	require.NoError(t, err)
	return c
}

// countingTransport counts requests.
type countingTransport struct{ n *atomic.Int64 }

func (c countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return http.DefaultTransport.RoundTrip(r)
}

func TestTwoRelaysOneTable(t *testing.T) {
	b := setup(t)
	ctx := context.Background()

	var sentA, sentB atomic.Int64
	regA, regB := prometheus.NewRegistry(), prometheus.NewRegistry()
	stopA := b.runRelay(t, b.countingClient(t, &sentA), regA)
	aethertest.Await(t, 10*time.Second, "relay A leads", func() bool {
		return metric(t, regA, "aether_outbox_relay_leader") == 1
	})
	b.runRelay(t, b.countingClient(t, &sentB), regB)

	var ids []string
	for i := range 30 {
		id, err := b.updateFirmware(ctx, "p", fmt.Sprint("dev-", i), "1.0", false)
		require.NoError(t, err)
		ids = append(ids, id)
	}
	aethertest.Await(t, 30*time.Second, "the outbox drains", func() bool {
		waiting, _ := b.outboxRows(t)
		return waiting == 0
	})
	require.Zero(t, sentB.Load(), "the standby sends nothing")
	require.Positive(t, sentA.Load())
	require.Equal(t, 0.0, metric(t, regB, "aether_outbox_relay_leader"))

	// The leader stops; the standby takes over.
	stopA()
	for i := range 10 {
		id, err := b.updateFirmware(ctx, "p", fmt.Sprint("dev-b", i), "1.0", false)
		require.NoError(t, err)
		ids = append(ids, id)
	}
	aethertest.Await(t, 30*time.Second, "relay B ships", func() bool {
		waiting, _ := b.outboxRows(t)
		return waiting == 0
	})
	require.Positive(t, sentB.Load())
	evs := b.events(t, "p")
	require.Len(t, evs, 40)
	for i, ev := range evs {
		require.Equal(t, ids[i], ev.ID)
	}
}

func TestRecordChecksTheEvent(t *testing.T) {
	pool, err := pgxpool.New(context.Background(), storetest.NewEmptyDatabase(t))
	require.NoError(t, err)
	defer pool.Close()
	ctx := context.Background()
	require.NoError(t, outbox.Migrate(ctx, pool))
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := outbox.Record(ctx, tx, client.EventInput{Action: "device.x.y"})
		require.ErrorContains(t, err, "ProjectID")
		ev := firmwareEvent("p", "d", "1")
		ev.ID = "not-a-uuid"
		_, err = outbox.Record(ctx, tx, ev)
		require.ErrorContains(t, err, "UUID")
		ev.ID = "0190a0b4-0000-7000-8000-000000000001"
		id, err := outbox.Record(ctx, tx, ev)
		require.NoError(t, err)
		require.Equal(t, ev.ID, id, "a given id is kept")
		return nil
	})
	require.NoError(t, err)
}

// TestRelayWaitsForOpenWriters: a row committed while an older transaction
// that wrote to the outbox is still open waits for it, so the older
// transaction's event comes first.
func TestRelayWaitsForOpenWriters(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	b.runRelay(t, b.client, reg)

	older, err := b.producer.Begin(ctx)
	require.NoError(t, err)
	defer older.Rollback(ctx)
	first, err := outbox.Record(ctx, older, firmwareEvent("p", "dev-1", "1.0"))
	require.NoError(t, err)
	second, err := b.updateFirmware(ctx, "p", "dev-2", "1.0", false)
	require.NoError(t, err)

	// The relay counts the one visible row on two turns of its loop, each
	// followed by a read of the outbox: it holds the row back.
	var ages []float64
	aethertest.Await(t, 10*time.Second, "two turns of the relay's loop with the row visible", func() bool {
		if metric(t, reg, "aether_outbox_backlog") == 1 {
			if age := metric(t, reg, "aether_outbox_oldest_age_seconds"); len(ages) == 0 || age != ages[len(ages)-1] {
				ages = append(ages, age)
			}
		}
		return len(ages) >= 3
	})
	_, err = b.client.Get(ctx, "p", second)
	require.Equal(t, client.CodeNotFound, client.ErrorCode(err), "the later transaction's event waits")

	require.NoError(t, older.Commit(ctx))
	aethertest.Await(t, 10*time.Second, "both arrive", func() bool {
		waiting, _ := b.outboxRows(t)
		return waiting == 0
	})
	evs := b.events(t, "p")
	require.Len(t, evs, 2)
	require.Equal(t, []string{first, second}, []string{evs[0].ID, evs[1].ID})
}
