package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aetheriot/aether-audit/client"
	"github.com/aetheriot/aether-audit/outbox"
)

const (
	// producerDatabase is the producer's own database of the outbox
	// scenario, beside aether_bench on the same server.
	producerDatabase = "aether_bench_producer"
	// outboxProducers are the concurrent producer transactions.
	outboxProducers = 8
	// outboxEventsPerTx are the events of one producer transaction in the
	// events/s row (a bulk business change): with one event per
	// transaction, the producer database's commit rate bounds the row,
	// not the outbox.
	outboxEventsPerTx = 25
	// outboxLagRate is the event rate of the lag row, events/s.
	outboxLagRate = 500
	// outboxMaxLagP99 is the lag row's target for ours.
	outboxMaxLagP99 = 500 * time.Millisecond
)

// runOutbox measures the transactional outbox end to end, with the relay
// (outbox.Relay, in process) shipping to our server:
//
//   - events/s: ours commits batchSize events as outboxProducers concurrent
//     producers in transactions of outboxEventsPerTx outbox.Record, and
//     counts the events the relay shipped (recorded in Aether, deleted from
//     the outbox) meanwhile (produceAndShip); the baseline is the
//     ingest-batch row's own side, recordAuditEvents of batchSize events
//     per request;
//   - lag: at outboxLagRate events/s, one event per producer transaction,
//     the time from outbox.Record to the event's recordedAt in Aether;
//     the baseline calls recordAuditEvent directly at the same rate
//     (the time from the call to recordedAt).
func runOutbox(ctx context.Context, e *env, opts options) ([]result, error) {
	b, err := newOutboxBench(ctx, e)
	if err != nil {
		return nil, err
	}
	defer b.close()

	// events/s, against the ingest-batch side.
	oursProject := "outbox-" + e.runID
	baseProject := oursProject + "-ingest"
	bodies := make([][]byte, batchBodies)
	for i := range bodies {
		drafts := demoDrafts(uint64(i+1), baseProject, batchSize)
		inputs := make([]map[string]any, len(drafts))
		for j := range drafts {
			inputs[j] = eventInput(&drafts[j])
		}
		if bodies[i], err = graphQLBody(recordBatchMutation, map[string]any{"input": map[string]any{"events": inputs}}); err != nil {
			return nil, err
		}
	}
	ours := newSide("ours", 1, func(ctx context.Context, w *worker) (int, error) {
		return b.produceAndShip(ctx, oursProject, batchSize)
	})
	base := newSide("baseline", batchClients, func(ctx context.Context, w *worker) (int, error) {
		_, err := e.graphQL(ctx, bodies[w.n%len(bodies)], &w.buf)
		return batchSize, err
	})
	o, bm, err := compare(ctx, "outbox", opts.duration, ours, base)
	if err != nil {
		return nil, err
	}
	throughputNote := fmt.Sprintf("ours: each operation, %d producers commit %d events with outbox.Record (transactions of %d events) "+
		"in the producer's database, then wait until at most %d rows are left, while outbox.Relay (in process, batches of up to 1,000, "+
		"woken by NOTIFY) records them with recordAuditEvents and deletes them: events/s counts the events Aether confirmed "+
		"(the last operation's rows ship during the next baseline slice); baseline: the ingest-batch row's side, "+
		"recordAuditEvents of %d events per request over HTTP, interleaved", outboxProducers, batchSize, outboxEventsPerTx, batchSize, batchSize)
	rows := []result{newResult("outbox", o, bm, throughputNote, throughput("events/s", o, bm, 0.5),
		latency("p50 batch ms", 0.50, o, bm, 0), latency("p99 batch ms", 0.99, o, bm, 0))}

	// Lag at a fixed rate.
	lagOurs, err := b.lagRun(ctx, "outbox-lag-"+e.runID, opts.duration, true)
	if err != nil {
		return rows, err
	}
	lagBase, err := b.lagRun(ctx, "outbox-lag-direct-"+e.runID, opts.duration, false)
	if err != nil {
		return rows, err
	}
	ms := func(d time.Duration) float64 { return round(float64(d.Microseconds())/1000, 3) }
	p50o, p50b := ms(lagOurs.percentile(0.5)), ms(lagBase.percentile(0.5))
	p99o, p99b := ms(lagOurs.percentile(0.99)), ms(lagBase.percentile(0.99))
	pass := lagOurs.percentile(0.99) <= outboxMaxLagP99
	lagNote := fmt.Sprintf("%d events/s for %s per side, one event per producer transaction (%d producers on a shared schedule); "+
		"ours: lag from outbox.Record to the event's recordedAt in Aether, through outbox.Relay; baseline: client.Record "+
		"(recordAuditEvent) called directly at the same rate, lag from the call to recordedAt", outboxLagRate, opts.duration, outboxProducers)
	rows = append(rows, result{Scenario: "outbox-lag", OursOps: lagOurs.ops, BaselineOps: lagBase.ops,
		Seconds: round(opts.duration.Seconds(), 1), Note: lagNote, Metrics: []metric{
			{Name: "p50 lag ms", Ours: p50o, Baseline: p50b, Ratio: ratio(p50o, p50b)},
			{Name: "p99 lag ms", Ours: p99o, Baseline: p99b, Ratio: ratio(p99o, p99b),
				Target: fmt.Sprintf("ours <= %d", outboxMaxLagP99.Milliseconds()), Pass: &pass},
		}})
	return rows, nil
}

// outboxBench is the producer's side of the outbox scenario: its database,
// the relay and a client of our server.
type outboxBench struct {
	producer *pgxpool.Pool
	client   *client.Client
	stop     context.CancelFunc
	done     chan error
	// seq numbers the business rows.
	seq atomic.Int64
}

// newOutboxBench prepares the producer database (outbox table emptied) and
// starts the relay.
func newOutboxBench(ctx context.Context, e *env) (_ *outboxBench, err error) {
	if err := createDatabaseIfMissing(ctx, e.benchURL, producerDatabase); err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(withDatabase(e.benchURL, producerDatabase))
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = outboxProducers + 2
	b := &outboxBench{done: make(chan error, 1)}
	if b.producer, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			b.producer.Close()
		}
	}()
	if err := outbox.Migrate(ctx, b.producer); err != nil {
		return nil, err
	}
	if _, err := b.producer.Exec(ctx, `CREATE TABLE IF NOT EXISTS bench_devices (id bigint PRIMARY KEY, firmware text NOT NULL);
		TRUNCATE aether_outbox, bench_devices`); err != nil {
		return nil, err
	}
	base := strings.TrimSuffix(e.graphqlURL, "/graphql")
	if b.client, err = client.New(base, client.Options{Token: strings.TrimPrefix(e.authHeader, "Bearer "), HTTPClient: e.client}); err != nil {
		return nil, err
	}
	relay, err := outbox.NewRelay(outbox.RelayConfig{Pool: b.producer, Client: b.client, BatchSize: client.MaxBatch,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		return nil, err
	}
	relayCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	b.stop = stop
	go func() { b.done <- relay.Run(relayCtx) }()
	return b, nil
}

// close stops the relay and closes the producer's pool.
func (b *outboxBench) close() {
	b.stop()
	<-b.done
	b.producer.Close()
}

// businessTx is one producer transaction of k events, each with a
// business row when withRows; it returns the last event's id.
func (b *outboxBench) businessTx(ctx context.Context, project string, k int, withRows bool) (string, error) {
	var id string
	err := pgx.BeginFunc(ctx, b.producer, func(tx pgx.Tx) error {
		for range k {
			n := b.seq.Add(1)
			if withRows {
				if _, err := tx.Exec(ctx, `INSERT INTO bench_devices (id, firmware) VALUES ($1, '1.0')`, n); err != nil {
					return err
				}
			}
			var err error
			if id, err = outbox.Record(ctx, tx, benchEvent(project, n)); err != nil {
				return err
			}
		}
		return nil
	})
	return id, err
}

// benchEvent is the event of business row n.
func benchEvent(project string, n int64) client.EventInput {
	return client.EventInput{
		ProjectID: project, Action: "device.firmware.updated", OccurredAt: time.Now(),
		Subject:  client.Subject{Type: client.SubjectService, ID: "device-service"},
		Resource: client.Resource{Type: "device", ID: fmt.Sprint("dev-", n)}, Outcome: client.OutcomeSuccess,
		Details: json.RawMessage(`{"from":"1.0.3","to":"1.1.0"}`),
	}
}

// produceAndShip commits n events (a multiple of outboxEventsPerTx) from
// outboxProducers producers, outboxEventsPerTx per transaction, then waits
// until at most n rows wait in the outbox, and returns how many events the
// relay shipped (recorded in Aether and deleted) meanwhile. So the relay
// ships one call's events while the next call produces, as with producers
// that never stop, and the count is exactly what Aether confirmed.
func (b *outboxBench) produceAndShip(ctx context.Context, project string, n int) (int, error) {
	before, err := b.backlog(ctx)
	if err != nil {
		return 0, err
	}
	var next atomic.Int64
	errs := make(chan error, outboxProducers)
	var wg sync.WaitGroup
	for range outboxProducers {
		wg.Go(func() {
			for next.Add(outboxEventsPerTx) <= int64(n) {
				if _, err := b.businessTx(ctx, project, outboxEventsPerTx, false); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	for {
		left, err := b.backlog(ctx)
		if err != nil {
			return 0, err
		}
		if left <= n {
			return n + before - left, nil
		}
		if err := sleepCtx(ctx, 2*time.Millisecond); err != nil {
			return 0, err
		}
	}
}

// backlog counts the rows in the outbox.
func (b *outboxBench) backlog(ctx context.Context) (int, error) {
	var n int
	err := b.producer.QueryRow(ctx, `SELECT count(*) FROM aether_outbox`).Scan(&n)
	return n, err
}

// lagRun records events at outboxLagRate for d into project, through the
// outbox or directly, and returns each event's lag to its recordedAt.
func (b *outboxBench) lagRun(ctx context.Context, project string, d time.Duration, viaOutbox bool) (measurement, error) {
	total := int(d.Seconds() * outboxLagRate)
	interval := time.Second / outboxLagRate
	start := time.Now().Add(50 * time.Millisecond)
	var (
		mu      sync.Mutex
		sentAt  = make(map[string]time.Time, total)
		next    atomic.Int64
		firstEr error
	)
	var wg sync.WaitGroup
	for range outboxProducers {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(total) || ctx.Err() != nil {
					return
				}
				if err := sleepCtx(ctx, time.Until(start.Add(time.Duration(i)*interval))); err != nil {
					return
				}
				t0 := time.Now()
				var id string
				var err error
				if viaOutbox {
					id, err = b.businessTx(ctx, project, 1, true)
				} else {
					var ev client.Event
					ev, err = b.client.Record(ctx, benchEvent(project, i))
					id = ev.ID
				}
				mu.Lock()
				if err != nil && firstEr == nil {
					firstEr = err
				}
				sentAt[id] = t0
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if firstEr != nil {
		return measurement{}, firstEr
	}
	// Wait for the outbox to drain, then read every event back.
	m := measurement{elapsed: d}
	deadline := time.Now().Add(time.Minute)
	for {
		got := 0
		m.latencies = m.latencies[:0]
		for ev, err := range b.client.Search(ctx, project, client.SearchOptions{PageSize: 500}) {
			if err != nil {
				return m, err
			}
			if t0, ok := sentAt[ev.ID]; ok {
				m.latencies = append(m.latencies, ev.RecordedAt.Sub(t0))
				got++
			}
		}
		if got == total {
			m.ops, m.units = int64(got), int64(got)
			return m, nil
		}
		if time.Now().After(deadline) {
			return m, fmt.Errorf("outbox-lag: %d of %d events arrived within a minute", got, total)
		}
		if err := sleepCtx(ctx, 200*time.Millisecond); err != nil {
			return m, err
		}
	}
}
