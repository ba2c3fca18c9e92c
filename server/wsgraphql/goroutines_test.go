package wsgraphql

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/99designs/gqlgen/graphql"
	"github.com/stretchr/testify/require"
)

// wakeFeed is a test source of fast-path results driven as the live hub
// drives its subscriptions: publish hands every open source a payload and
// calls its wake function; nothing waits anywhere.
type wakeFeed struct {
	mu   sync.Mutex
	subs map[*wakeSource]struct{}
}

type wakeSource struct {
	feed    *wakeFeed
	wake    func()
	mu      sync.Mutex
	pending [][]byte
}

func (f *wakeFeed) open(_ context.Context, _ *graphql.RawParams, wake func()) (Source, bool) {
	s := &wakeSource{feed: f, wake: wake}
	f.mu.Lock()
	f.subs[s] = struct{}{}
	f.mu.Unlock()
	return s, true
}

func (f *wakeFeed) publish(payload []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for s := range f.subs {
		s.mu.Lock()
		s.pending = append(s.pending, payload)
		s.mu.Unlock()
		s.wake()
	}
}

func (f *wakeFeed) opened() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.subs)
}

func (s *wakeSource) Next(context.Context) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.pending) == 0 {
		return nil, true
	}
	p := s.pending[0]
	s.pending = s.pending[1:]
	return p, true
}

func (s *wakeSource) Close() {
	s.feed.mu.Lock()
	delete(s.feed.subs, s)
	s.feed.mu.Unlock()
}

// TestGoroutinesPerConnectionDoNotGrowWithSubscriptions: a connection is
// served by at most two goroutines (the reader, and the writer while it
// writes) however many fast-path subscriptions it runs; once its results
// are written, an idle connection keeps only its reader. The counts are
// awaited (the writer exits when it has nothing left to write), never
// slept for.
func TestGoroutinesPerConnectionDoNotGrowWithSubscriptions(t *testing.T) {
	feed := &wakeFeed{subs: map[*wakeSource]struct{}{}}
	e := newEnv(t, Config{FastPath: feed.open})
	base := runtime.NumGoroutine()

	c := dial(t, e.url, tws)
	c.init()
	awaitCond(t, "the idle connection's goroutines", func() bool { return runtime.NumGoroutine() <= base+1 })
	perConn := map[int]int{}
	subscribed := 0
	for _, n := range []int{1, 10, 100} {
		for ; subscribed < n; subscribed++ {
			c.subscribe(fmt.Sprint(subscribed), "subscription { name }")
		}
		// The writer opens the subscriptions.
		awaitCond(t, fmt.Sprintf("%d subscriptions open", n), func() bool { return feed.opened() == n })
		for round := range 3 {
			feed.publish(fmt.Appendf(nil, `{"data":{"round":%d}}`, round))
			seen := map[string]bool{}
			for range n {
				m := c.read()
				require.Equal(t, "next", m.Type, "message %+v", m)
				require.False(t, seen[m.ID], "two results of %s in round %d", m.ID, round)
				seen[m.ID] = true
				require.Equal(t, float64(round), data(t, m)["round"])
			}
		}
		// Idle again: the writer has exited, only the reader remains.
		awaitCond(t, fmt.Sprintf("goroutines with %d subscriptions to settle at most 2 over %d", n, base),
			func() bool { return runtime.NumGoroutine() <= base+2 })
		awaitCond(t, fmt.Sprintf("the writer of an idle connection with %d subscriptions to exit", n),
			func() bool { return runtime.NumGoroutine() <= base+1 })
		perConn[n] = runtime.NumGoroutine() - base
	}
	require.Equal(t, perConn[1], perConn[100], "goroutines per connection with 1, 10 and 100 subscriptions: %v", perConn)
	require.LessOrEqual(t, perConn[100], 2)
}
