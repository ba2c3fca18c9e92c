package outbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/aetheriot/aether-audit/client"
)

// RelayConfig configures a Relay.
type RelayConfig struct {
	// Pool is the producer's database, where Migrate created the table.
	// The relay takes one connection of it for as long as it runs.
	Pool *pgxpool.Pool
	// Client sends the events (its token needs audit:write and every
	// project the outbox holds events of).
	Client *client.Client
	// BatchSize is the most events per RecordBatch (default 500, at most
	// client.MaxBatch).
	BatchSize int
	// PollInterval is how often a relay with nothing to do looks for rows
	// (Record's notification wakes it sooner), and how often a standby
	// relay tries to become the leader (default 250 ms).
	PollInterval time.Duration
	// CountInterval is how often the leader counts the backlog for the
	// metrics (default 5 s).
	CountInterval time.Duration
	// Logger receives the relay's log (default: none). Payloads are never
	// logged.
	Logger *slog.Logger
	// Registerer receives the relay's metrics (default: none).
	Registerer prometheus.Registerer
}

// Relay ships the outbox's committed rows to Aether; see the package
// documentation.
type Relay struct {
	cfg RelayConfig
	log *slog.Logger
	m   *metrics
}

// NewRelay checks cfg and returns a relay; Run starts it.
func NewRelay(cfg RelayConfig) (*Relay, error) {
	if cfg.Pool == nil || cfg.Client == nil {
		return nil, errors.New("outbox: a relay needs a Pool and a Client")
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 500
	}
	cfg.BatchSize = min(cfg.BatchSize, client.MaxBatch)
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 250 * time.Millisecond
	}
	if cfg.CountInterval <= 0 {
		cfg.CountInterval = 5 * time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Relay{cfg: cfg, log: log, m: newMetrics(cfg.Registerer)}, nil
}

// relayLock is the session advisory lock that makes one relay the leader.
const relayLock = `SELECT pg_try_advisory_lock(hashtext('aether_outbox.relay'))`

// Run ships rows until ctx ends, then returns nil. Losing the database
// connection ends the leadership; Run reconnects with back-off and stands
// by until it leads again.
func (r *Relay) Run(ctx context.Context) error {
	failures := 0
	for {
		start := time.Now()
		err := r.session(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if time.Since(start) > time.Minute {
			failures = 0
		}
		failures++
		r.log.Warn("outbox relay: database session ended; reconnecting", "error", err)
		if sleep(ctx, backoff(failures)) != nil {
			return nil
		}
	}
}

// session holds one connection: it stands by until it takes the lock, then
// ships until the connection fails or ctx ends.
func (r *Relay) session(ctx context.Context) error {
	pc, err := r.cfg.Pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// The connection holds the session lock: it must never go back to the
	// pool, and closing it releases the lock.
	conn := pc.Hijack()
	defer conn.Close(context.Background())
	for {
		var leader bool
		if err := conn.QueryRow(ctx, relayLock).Scan(&leader); err != nil {
			return err
		}
		if leader {
			break
		}
		if err := sleep(ctx, r.cfg.PollInterval); err != nil {
			return err
		}
	}
	r.m.leader.Set(1)
	defer r.m.leader.Set(0)
	r.log.Info("outbox relay: leading")
	if _, err := conn.Exec(ctx, "LISTEN "+NotifyChannel); err != nil {
		return err
	}
	s := &shipper{relay: r, conn: conn, limit: r.cfg.BatchSize}
	var counted time.Time
	for {
		if time.Since(counted) >= r.cfg.CountInterval {
			if err := s.count(ctx); err != nil {
				return err
			}
			counted = time.Now()
		}
		shipped, err := s.shipOnce(ctx)
		if err != nil {
			return err
		}
		if shipped {
			continue
		}
		wait, cancel := context.WithTimeout(ctx, r.cfg.PollInterval)
		_, err = conn.WaitForNotification(wait)
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil && conn.IsClosed() {
			return fmt.Errorf("waiting for rows: %w", err)
		}
	}
}

// shipper is the leader's shipping state.
type shipper struct {
	relay *Relay
	conn  *pgx.Conn
	// limit is the batch size now: BatchSize, or less while isolating an
	// event refused without naming its position.
	limit    int
	failures int
}

// row is an outbox row on its way.
type row struct {
	position int64
	id       string
	event    string
}

// horizonSQL gives the shipping horizon: the smallest transaction id of
// the transactions that are writing to the outbox now (they hold its
// RowExclusiveLock until they end; pg_locks gives their 32-bit xids, which
// are widened to xid8 around the snapshot's xmax: a running xid is less than
// 2^31 from it, behind it or, for a writer that began after the snapshot
// (pg_locks is read live), at or after it), or the snapshot's xmax when no
// writer is older. So
// the relay waits only for transactions that write to the outbox, not for
// every transaction of the server (as the snapshot's xmin would).
//
// It is a statement of its own, read before fetchSQL's: pg_locks shows the
// locks as they are when it is read, not as of the statement's snapshot, so
// in one statement a writer that commits between the snapshot and the read
// of pg_locks would be neither seen as a writer nor visible, and a later
// transaction's row could ship ahead of its row. Read first, the horizon
// stays below every writer that had written by then, whatever commits
// before fetchSQL's (later) snapshot.
const horizonSQL = `WITH cur AS (SELECT pg_snapshot_xmax(pg_current_snapshot())::text::numeric AS xmax),
writers AS (
  SELECT l.transactionid::text::numeric AS xid FROM pg_locks l
  WHERE l.locktype = 'transactionid' AND l.granted AND l.pid IS DISTINCT FROM pg_backend_pid()
    AND l.virtualtransaction IN (SELECT r.virtualtransaction FROM pg_locks r
      WHERE r.locktype = 'relation' AND r.relation = 'aether_outbox'::regclass
        AND r.mode = 'RowExclusiveLock' AND r.granted))
SELECT least(max(cur.xmax), coalesce(min(cur.xmax + w.d - CASE WHEN w.d >= 2147483648 THEN 4294967296 ELSE 0 END),
         max(cur.xmax)))::text
FROM cur LEFT JOIN (SELECT mod(writers.xid - mod(cur.xmax, 4294967296) + 4294967296, 4294967296) AS d
  FROM writers, cur) w ON true`

// fetchSQL reads the next rows in shipping order, below the horizon
// (horizonSQL): a row never ships ahead of a row that a transaction with a
// smaller id had written and not committed yet.
const fetchSQL = `SELECT position, id::text, event::text FROM aether_outbox
WHERE parked_at IS NULL AND txid < $2::text::xid8
ORDER BY txid, position LIMIT $1`

// deleteSQL removes confirmed rows and returns each one's lag.
const deleteSQL = `DELETE FROM aether_outbox WHERE position = ANY($1)
RETURNING extract(epoch FROM clock_timestamp() - created_at)::float8`

// parkSQL sets a refused row aside.
const parkSQL = `UPDATE aether_outbox SET parked_at = clock_timestamp(), last_error = $2 WHERE position = $1`

// shipOnce sends the next batch, if any, and reports whether there was
// one. A failed send is retried after a back-off (it reports true, so the
// loop comes back at once); an error is returned only for the database.
func (s *shipper) shipOnce(ctx context.Context) (bool, error) {
	rows, err := s.fetch(ctx)
	if err != nil || len(rows) == 0 {
		return false, err
	}
	events := make([]client.EventInput, 0, len(rows))
	for _, rw := range rows {
		ev, err := decodeEvent(rw)
		if err != nil {
			// Not an event: park it and read again without it.
			return true, s.park(ctx, rw, err.Error())
		}
		events = append(events, ev)
	}
	_, err = s.relay.cfg.Client.RecordBatchReceipts(ctx, events)
	if err == nil {
		s.failures, s.limit = 0, s.relay.cfg.BatchSize
		return true, s.delete(ctx, rows)
	}
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	var ae *client.Error
	if errors.As(err, &ae) && (ae.Code == client.CodeBadUserInput || ae.Code == client.CodeIdempotencyConflict) {
		if i, ok := refusedIndex(ae.Field); ok && i < len(rows) {
			return true, s.park(ctx, rows[i], ae.Error())
		}
		if len(rows) == 1 {
			return true, s.park(ctx, rows[0], ae.Error())
		}
		// The refusal names no event: halve the batch until it does.
		s.limit = max(1, len(rows)/2)
		return true, nil
	}
	s.failures++
	s.relay.m.sendErrors.Inc()
	s.relay.log.Warn("outbox relay: sending failed; retrying", "events", len(rows), "error", err)
	return true, sleep(ctx, backoff(s.failures))
}

// fetch reads the next batch.
func (s *shipper) fetch(ctx context.Context) ([]row, error) {
	var horizon string
	if err := s.conn.QueryRow(ctx, horizonSQL).Scan(&horizon); err != nil {
		return nil, fmt.Errorf("reading the outbox's horizon: %w", err)
	}
	rs, err := s.conn.Query(ctx, fetchSQL, s.limit, horizon)
	if err != nil {
		return nil, fmt.Errorf("reading the outbox: %w", err)
	}
	out, err := pgx.CollectRows(rs, func(r pgx.CollectableRow) (row, error) {
		var rw row
		err := r.Scan(&rw.position, &rw.id, &rw.event)
		return rw, err
	})
	if err != nil {
		return nil, fmt.Errorf("reading the outbox: %w", err)
	}
	return out, nil
}

// delete removes the rows Aether confirmed.
func (s *shipper) delete(ctx context.Context, rows []row) error {
	positions := make([]int64, len(rows))
	for i, rw := range rows {
		positions[i] = rw.position
	}
	rs, err := s.conn.Query(ctx, deleteSQL, positions)
	if err != nil {
		return fmt.Errorf("deleting shipped rows: %w", err)
	}
	lags, err := pgx.CollectRows(rs, pgx.RowTo[float64])
	if err != nil {
		return fmt.Errorf("deleting shipped rows: %w", err)
	}
	for _, l := range lags {
		s.relay.m.lag.Observe(l)
	}
	s.relay.m.shipped.Add(float64(len(lags)))
	return nil
}

// park sets a row Aether refused aside with the reason.
func (s *shipper) park(ctx context.Context, rw row, reason string) error {
	if _, err := s.conn.Exec(ctx, parkSQL, rw.position, reason); err != nil {
		return fmt.Errorf("parking a row: %w", err)
	}
	s.relay.m.parkedAll.Inc()
	s.relay.log.Error("outbox relay: Aether refused an event; parked it", "id", rw.id, "reason", reason)
	return nil
}

// countSQL measures the backlog.
const countSQL = `SELECT count(*) FILTER (WHERE parked_at IS NULL), count(*) FILTER (WHERE parked_at IS NOT NULL),
coalesce(extract(epoch FROM clock_timestamp() - min(created_at) FILTER (WHERE parked_at IS NULL)), 0)::float8
FROM aether_outbox`

// count updates the backlog metrics.
func (s *shipper) count(ctx context.Context) error {
	var waiting, parked int64
	var age float64
	if err := s.conn.QueryRow(ctx, countSQL).Scan(&waiting, &parked, &age); err != nil {
		return fmt.Errorf("counting the outbox: %w", err)
	}
	s.relay.m.backlog.Set(float64(waiting))
	s.relay.m.parked.Set(float64(parked))
	s.relay.m.oldestAge.Set(age)
	return nil
}

// decodeEvent reads a row's event strictly: a member the input does not
// have, or an id other than the row's, makes it no event.
func decodeEvent(rw row) (client.EventInput, error) {
	var ev client.EventInput
	dec := json.NewDecoder(bytes.NewReader([]byte(rw.event)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ev); err != nil {
		return ev, fmt.Errorf("the row's event is not a RecordAuditEventInput: %v", err)
	}
	if ev.ID != "" && !strings.EqualFold(ev.ID, rw.id) {
		return ev, fmt.Errorf("the row's event has id %s, the row %s", ev.ID, rw.id)
	}
	ev.ID = rw.id
	return ev, nil
}

// refusedIndex reads i from a field "events[i]..." of a batch refusal.
func refusedIndex(field string) (int, bool) {
	rest, ok := strings.CutPrefix(field, "events[")
	if !ok {
		return 0, false
	}
	end := strings.IndexByte(rest, ']')
	if end < 0 {
		return 0, false
	}
	i, err := strconv.Atoi(rest[:end])
	return i, err == nil && i >= 0
}

// backoff is the wait after n consecutive failures: 100 ms doubling to
// 30 s, with jitter.
func backoff(n int) time.Duration {
	d := 100 * time.Millisecond
	for i := 1; i < n && d < 30*time.Second; i++ {
		d *= 2
	}
	d = min(d, 30*time.Second)
	return d/2 + rand.N(d/2+1)
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
