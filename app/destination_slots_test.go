package app

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// TestDestinationSlotsRequestWithoutAllocating: taking and releasing a
// request slot nobody waits for allocates nothing (a bound release, and
// no new freed channel while no request waits): it happens once per
// delivery.
func TestDestinationSlotsRequestWithoutAllocating(t *testing.T) {
	w := newWebhookRuntime(WebhookConfig{MaxInFlightPerDestination: 2})
	s, leave, ok := w.enter(context.Background(), uuid.New())
	require.True(t, ok)
	defer leave()
	ctx := context.Background()
	allocs := testing.AllocsPerRun(100, func() {
		release, ok := s.request(ctx)
		if !ok {
			t.Fatal("no slot")
		}
		release()
	})
	require.Zero(t, allocs)
}

// TestDestinationSlotsWakeWaitingRequests: a request waiting for a slot
// gets the one a release frees, or one a grown limit adds; one whose
// context ends gives up, and is no longer counted as waiting.
func TestDestinationSlotsWakeWaitingRequests(t *testing.T) {
	t.Parallel()
	w := newWebhookRuntime(WebhookConfig{MaxInFlightPerDestination: 1})
	s, leave, ok := w.enter(context.Background(), uuid.New())
	require.True(t, ok)
	defer leave()
	ctx := context.Background()
	first, ok := s.request(ctx)
	require.True(t, ok)

	waiting := func(n int) func() bool {
		return func() bool {
			s.mu.Lock()
			defer s.mu.Unlock()
			return s.waiting == n
		}
	}
	take := func() chan func() {
		got := make(chan func(), 1)
		go func() {
			if release, ok := s.request(ctx); ok {
				got <- release
			}
			close(got)
		}()
		return got
	}
	got := take()
	require.Eventually(t, waiting(1), 10*time.Second, time.Millisecond)
	first()
	second := <-got
	require.NotNil(t, second)

	// A grown limit wakes a waiting request.
	got = take()
	require.Eventually(t, waiting(1), 10*time.Second, time.Millisecond)
	s.setLimit(2)
	third := <-got
	require.NotNil(t, third)

	// A request whose context ends gives up.
	cctx, cancel := context.WithCancel(ctx)
	gaveUp := make(chan bool)
	go func() {
		_, ok := s.request(cctx)
		gaveUp <- !ok
	}()
	require.Eventually(t, waiting(1), 10*time.Second, time.Millisecond)
	cancel()
	require.True(t, <-gaveUp)
	require.True(t, waiting(0)())
	second()
	third()
}
