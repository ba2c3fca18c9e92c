package live_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/live"
	"github.com/aetheriot/aether-audit/store"
	"github.com/aetheriot/aether-audit/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

// testBundle: an app to record with, and hubs over the same database.
type testBundle struct {
	pool   *pgxpool.Pool
	app    *app.App
	writer app.Identity
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	pool := storetest.NewPool(t)
	return &testBundle{
		pool:   pool,
		app:    app.New(store.New(pool), app.Config{}),
		writer: app.Identity{TenantID: "t1", ProjectIDs: []string{"*"}, Permissions: []app.Permission{app.PermissionAuditWrite}},
	}
}

// startHub runs a hub (as one process would) until the test ends and waits
// until it listens.
func (b *testBundle) startHub(t *testing.T, cfg live.Config) *live.Hub {
	t.Helper()
	h := live.New(b.pool, store.New(b.pool), cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); h.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	require.Eventually(t, h.Listening, 10*time.Second, 5*time.Millisecond)
	return h
}

func (b *testBundle) record(t *testing.T, project string, n int) {
	t.Helper()
	drafts := make([]domain.AuditEventDraft, n)
	for i := range drafts {
		drafts[i] = domain.AuditEventDraft{
			ProjectID: project, Action: "device.updated", OccurredAt: time.Now(),
			Subject:  domain.Subject{Type: domain.SubjectService, ID: "svc"},
			Resource: domain.Resource{Type: "device", ID: fmt.Sprintf("d%d", i%3)},
			Outcome:  domain.OutcomeSuccess, Details: json.RawMessage(`{}`),
		}
	}
	_, err := b.app.RecordAuditEvents(context.Background(), b.writer, app.RecordAuditEventsInput{Events: drafts})
	require.NoError(t, err)
}

// collect reads n events from s, failing after a deadline.
func collect(t *testing.T, s app.AuditEventStream, n int) []uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var seqs []uint64
	for len(seqs) < n {
		e, err := s.Next(ctx)
		require.NoError(t, err, "after %v", seqs)
		seqs = append(seqs, e.Sequence)
	}
	return seqs
}

func dense(from, to uint64) []uint64 {
	var out []uint64
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}

func TestSubscribeFromNowAndReplay(t *testing.T) {
	b := setup(t)
	h := b.startHub(t, live.Config{})
	b.record(t, "p1", 3)

	fromNow, err := h.Subscribe(context.Background(), "t1", "p1", nil, domain.AuditEventFilter{})
	require.NoError(t, err)
	defer fromNow.Close()
	after := uint64(1)
	replay, err := h.Subscribe(context.Background(), "t1", "p1", &after, domain.AuditEventFilter{})
	require.NoError(t, err)
	defer replay.Close()

	b.record(t, "p1", 2)
	b.record(t, "p2", 1) // another project: not delivered
	require.Equal(t, []uint64{4, 5}, collect(t, fromNow, 2))
	require.Equal(t, []uint64{2, 3, 4, 5}, collect(t, replay, 4))

	// Another tenant's project of the same name is another project.
	other, err := h.Subscribe(context.Background(), "t2", "p1", new(uint64), domain.AuditEventFilter{})
	require.NoError(t, err)
	defer other.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err = other.Next(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded, "nothing of tenant t1")
}

// TestResumeWhileRecording: subscribers resuming from various sequences
// while writers record concurrently each see a dense, ordered stream.
func TestResumeWhileRecording(t *testing.T) {
	b := setup(t)
	h := b.startHub(t, live.Config{Window: 16, FetchBatch: 7})
	b.record(t, "p1", 20)

	const total = 20 + 8*15
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for range 15 {
				b.record(t, "p1", 1+w%2)
			}
		})
	}
	results := make([][]uint64, 4)
	starts := []uint64{0, 5, 19, 40}
	var readers sync.WaitGroup
	for i, start := range starts {
		readers.Go(func() {
			s, err := h.Subscribe(context.Background(), "t1", "p1", &start, domain.AuditEventFilter{})
			if err != nil {
				t.Error(err)
				return
			}
			defer s.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			for {
				e, err := s.Next(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				results[i] = append(results[i], e.Sequence)
				if e.Sequence >= total+8*15/2 { // all writes done: 20 + 8*15 + the doubled half
					return
				}
			}
		})
	}
	wg.Wait()
	readers.Wait()
	last := uint64(20 + 8*15 + 4*15)
	for i, start := range starts {
		require.Equal(t, dense(start+1, last), results[i], "subscriber after %d", start)
	}
}

// TestLISTENConnectionKilled: the LISTEN backend is terminated while events
// are recorded; the subscriber still gets every event, in order.
func TestLISTENConnectionKilled(t *testing.T) {
	b := setup(t)
	h := b.startHub(t, live.Config{PollInterval: time.Hour})
	s, err := h.Subscribe(context.Background(), "t1", "p1", nil, domain.AuditEventFilter{})
	require.NoError(t, err)
	defer s.Close()

	b.record(t, "p1", 3)
	require.Equal(t, []uint64{1, 2, 3}, collect(t, s, 3))

	var killed int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND query LIKE 'LISTEN%'`).Scan(&killed))
	require.Equal(t, 1, killed)
	b.record(t, "p1", 4) // committed while the hub may not be listening
	require.Eventually(t, h.Listening, 10*time.Second, 5*time.Millisecond)
	b.record(t, "p1", 2)
	require.Equal(t, dense(4, 9), collect(t, s, 6))
}

// TestSlowSubscriberDoesNotDelayOthers: one subscriber stops reading while
// many events are recorded; another keeps up, and the slow one later
// catches up from the store without losing anything.
func TestSlowSubscriberDoesNotDelayOthers(t *testing.T) {
	b := setup(t)
	h := b.startHub(t, live.Config{Window: 8})
	slow, err := h.Subscribe(context.Background(), "t1", "p1", nil, domain.AuditEventFilter{})
	require.NoError(t, err)
	defer slow.Close()
	fast, err := h.Subscribe(context.Background(), "t1", "p1", nil, domain.AuditEventFilter{})
	require.NoError(t, err)
	defer fast.Close()

	for range 5 {
		b.record(t, "p1", 40)
	}
	require.Equal(t, dense(1, 200), collect(t, fast, 200))
	require.Equal(t, dense(1, 200), collect(t, slow, 200), "caught up from the store past the window")
}

// TestTwoHubs: an event recorded through one process reaches a subscriber
// of another process's hub.
func TestTwoHubs(t *testing.T) {
	b := setup(t)
	_ = b.startHub(t, live.Config{})
	h2 := b.startHub(t, live.Config{PollInterval: time.Hour})
	s, err := h2.Subscribe(context.Background(), "t1", "p1", nil, domain.AuditEventFilter{})
	require.NoError(t, err)
	defer s.Close()
	other := app.New(store.New(b.pool), app.Config{}) // another process's app
	_, err = other.RecordAuditEvent(context.Background(), b.writer, domain.AuditEventDraft{
		ProjectID: "p1", Action: "device.updated", OccurredAt: time.Now(),
		Subject: domain.Subject{Type: domain.SubjectService, ID: "svc"}, Resource: domain.Resource{Type: "device", ID: "d"},
		Outcome: domain.OutcomeSuccess,
	}, "")
	require.NoError(t, err)
	require.Equal(t, []uint64{1}, collect(t, s, 1))
}

func TestFilterAndClose(t *testing.T) {
	b := setup(t)
	h := b.startHub(t, live.Config{})
	pattern, err := domain.ParseActionPattern("f", "device.*")
	require.NoError(t, err)
	s, err := h.Subscribe(context.Background(), "t1", "p1", new(uint64), domain.AuditEventFilter{Action: &pattern, ResourceID: "d1"})
	require.NoError(t, err)
	b.record(t, "p1", 9) // resources d0 d1 d2 d0 d1 d2 ...
	require.Equal(t, []uint64{2, 5, 8}, collect(t, s, 3))

	done := make(chan error, 1)
	go func() {
		_, err := s.Next(context.Background())
		done <- err
	}()
	s.Close()
	select {
	case err := <-done:
		require.ErrorIs(t, err, live.ErrClosed)
	case <-time.After(10 * time.Second):
		t.Fatal("Next did not return after Close")
	}
}

// concurrencyStore is the real store, counting the catch-up reads (those
// with a subject filter, which the feed's own reads have not) in flight at
// once.
type concurrencyStore struct {
	*store.Store
	mu            sync.Mutex
	inFlight, max int
}

func (s *concurrencyStore) SearchAuditEvents(ctx context.Context, tenantID, projectID string, f domain.AuditEventFilter, page domain.AuditEventPage) ([]domain.AuditEvent, error) {
	if f.SubjectID == "" {
		return s.Store.SearchAuditEvents(ctx, tenantID, projectID, f, page)
	}
	s.mu.Lock()
	s.inFlight++
	s.max = max(s.max, s.inFlight)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inFlight--
		s.mu.Unlock()
	}()
	return s.Store.SearchAuditEvents(ctx, tenantID, projectID, f, page)
}

// TestLaggingSubscribersCatchUpWithBoundedStoreReads: many subscriptions behind
// the window catch up with at most MaxCatchUpReads store reads at once, so
// that they cannot take every pooled connection from the commands that
// record; each still gets every event, in order.
func TestLaggingSubscribersCatchUpWithBoundedStoreReads(t *testing.T) {
	b := setup(t)
	for range 4 {
		b.record(t, "p1", 50)
	}
	st := &concurrencyStore{Store: store.New(b.pool)}
	h := live.New(b.pool, st, live.Config{Window: 4, FetchBatch: 3, MaxCatchUpReads: 2})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); h.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	require.Eventually(t, h.Listening, 10*time.Second, 5*time.Millisecond)

	const subscribers = 30
	zero := uint64(0)
	results := make(chan []uint64, subscribers)
	for range subscribers {
		s, err := h.Subscribe(context.Background(), "t1", "p1", &zero, domain.AuditEventFilter{SubjectID: "svc"})
		require.NoError(t, err)
		t.Cleanup(s.Close)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var seqs []uint64
			for len(seqs) < 210 {
				e, err := s.Next(ctx)
				if err != nil {
					break
				}
				seqs = append(seqs, e.Sequence)
			}
			results <- seqs
		}()
	}
	// Recording goes on while they catch up.
	b.record(t, "p1", 10)
	for range subscribers {
		require.Equal(t, dense(1, 210), <-results)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	require.LessOrEqual(t, st.max, 2, "catch-up reads at once")
	require.Positive(t, st.max)
}

// TestTryNext: TryNext hands out what is at hand without waiting or
// reading the store, and mixed with Next keeps the stream dense and
// ordered, also for a subscriber behind the window.
func TestTryNext(t *testing.T) {
	b := setup(t)
	h := b.startHub(t, live.Config{Window: 4})
	after := uint64(0)
	stream, err := h.Subscribe(context.Background(), "t1", "p1", &after, domain.AuditEventFilter{})
	require.NoError(t, err)
	defer stream.Close()
	s := stream.(*live.Subscription)
	_, ok := s.TryNext()
	require.False(t, ok, "nothing recorded")

	b.record(t, "p1", 10) // the window keeps 7..10: 1..6 come from the store
	var seqs []uint64
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for len(seqs) < 10 {
		e, err := s.Next(ctx)
		require.NoError(t, err)
		seqs = append(seqs, e.Sequence)
		for e, ok := s.TryNext(); ok; e, ok = s.TryNext() {
			seqs = append(seqs, e.Sequence)
		}
	}
	require.Equal(t, dense(1, 10), seqs)
	_, ok = s.TryNext()
	require.False(t, ok, "nothing more at hand")

	b.record(t, "p1", 2)
	require.Equal(t, []uint64{11, 12}, collect(t, s, 2))
	s.Close()
	_, ok = s.TryNext()
	require.False(t, ok, "closed")
}

// TestPullWithOnReady: a subscriber driven by OnReady and Pull, with no
// goroutine waiting in Next, gets every event once and in order, also
// those behind the window (read from the store), and is called back when
// new events are at hand.
func TestPullWithOnReady(t *testing.T) {
	b := setup(t)
	h := b.startHub(t, live.Config{Window: 4})
	after := uint64(0)
	stream, err := h.Subscribe(context.Background(), "t1", "p1", &after, domain.AuditEventFilter{})
	require.NoError(t, err)
	defer stream.Close()
	s := stream.(*live.Subscription)
	ready := make(chan struct{}, 1)
	s.OnReady(func() {
		select {
		case ready <- struct{}{}:
		default:
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pullAll := func() []uint64 {
		var seqs []uint64
		for {
			e, ok, err := s.Pull(ctx)
			require.NoError(t, err)
			if !ok {
				return seqs
			}
			seqs = append(seqs, e.Sequence)
		}
	}
	await := func(n int) []uint64 {
		var seqs []uint64
		for len(seqs) < n {
			select {
			case <-ready:
			case <-ctx.Done():
				t.Fatalf("no callback; have %v", seqs)
			}
			seqs = append(seqs, pullAll()...)
		}
		return seqs
	}
	require.Empty(t, pullAll(), "nothing recorded")

	b.record(t, "p1", 10) // the window keeps 7..10: 1..6 come from the store
	require.Equal(t, dense(1, 10), await(10))
	b.record(t, "p1", 3)
	require.Equal(t, dense(11, 13), await(3))
	s.Close()
	_, ok, err := s.Pull(ctx)
	require.False(t, ok)
	require.ErrorIs(t, err, live.ErrClosed)
}
