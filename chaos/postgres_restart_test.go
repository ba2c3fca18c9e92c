package chaos

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// recorder records batches of events through a server in a loop until
// stopped, counting the calls that succeeded and failed.
type recorder struct {
	ok, failed atomic.Int64
	stopOnce   sync.Once
	quit, done chan struct{}
}

func startRecorder(s *server, token string, batch int, pause time.Duration) *recorder {
	r := &recorder{quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := recordEvents(ctx, s, token, batch); err != nil {
				r.failed.Add(1)
			} else {
				r.ok.Add(1)
			}
			cancel()
			select {
			case <-r.quit:
				return
			case <-time.After(pause):
			}
		}
	}()
	return r
}

func (r *recorder) stop() {
	r.stopOnce.Do(func() { close(r.quit) })
	<-r.done
}

// TestPostgresRestartUnderLoad stops PostgreSQL (fast shutdown) while
// events are recorded, a WebSocket subscriber follows them and webhooks are
// delivered, then starts it again. The service answers /readyz with 503
// while the database is down and 200 again by itself; the subscriber, which
// resumes with afterSequence whenever its subscription ends, ends up with
// every committed event exactly once, in order; and every delivery
// completes.
func TestPostgresRestartUnderLoad(t *testing.T) {
	t.Parallel()
	pg := privateCluster(t)
	d := newDeployment(t, pg.cluster)
	rcv := newReceiver(t, 10*time.Millisecond, 50*time.Millisecond)
	s := d.serve(t, "only")
	webhookSetup(t, s, d.token, rcv.url, 1)
	sub := subscribe(t, s, d.token, 0)
	rec := startRecorder(s, d.token, 5, 50*time.Millisecond)
	t.Cleanup(rec.stop)

	await(t, time.Minute, "events are recorded, followed and delivered", func() bool {
		_, _, answered := rcv.stats()
		return rec.ok.Load() >= 10 && sub.last() >= 30 && answered >= 20
	})

	pg.stop(t)
	s.awaitReadyz(t, http.StatusServiceUnavailable, 30*time.Second)
	// It stays not ready, and recording fails, while the database is down.
	failedBefore := rec.failed.Load()
	for range 10 {
		require.Equal(t, http.StatusServiceUnavailable, s.readyz(), "/readyz while PostgreSQL is down")
		time.Sleep(100 * time.Millisecond)
	}
	await(t, 30*time.Second, "recording fails while PostgreSQL is down", func() bool { return rec.failed.Load() > failedBefore })

	pg.start(t)
	d.pool.Reset() // the test's own connections died with the server
	s.awaitReadyz(t, http.StatusOK, time.Minute)
	okAfter := rec.ok.Load()
	await(t, time.Minute, "recording succeeds again", func() bool { return rec.ok.Load() >= okAfter+10 })
	rec.stop()

	// Every committed event, read from the database, reached the
	// subscriber exactly once and in order.
	var maxSeq uint64
	var events int
	require.NoError(t, d.pool.QueryRow(context.Background(),
		`SELECT coalesce(max(sequence), 0), count(*) FROM audit_events WHERE tenant_id = $1 AND project_id = $2`,
		tenant, project).Scan(&maxSeq, &events))
	require.Equal(t, int(maxSeq), events, "the sequence is dense")
	await(t, time.Minute, "the subscriber catches up with the database", func() bool { return sub.last() >= maxSeq })
	assertSeenExactly(t, sub, 1, maxSeq)
	reconnects, lastErr := sub.reconnectCount()
	t.Logf("%d events; the subscriber resubscribed %d times (last end: %v); %d record calls failed",
		maxSeq, reconnects, lastErr, rec.failed.Load())

	// Every chaos.* event has its delivery, and every delivery completes.
	chaosEvents := count(t, d.pool, `SELECT count(*) FROM audit_events WHERE tenant_id = $1 AND project_id = $2 AND action = 'chaos.tick'`, tenant, project)
	awaitDeliveriesSettled(t, d.pool, rcv, chaosEvents, nil, 3*time.Minute)
	require.True(t, s.running())
}
