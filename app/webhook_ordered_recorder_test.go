package app

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestOrderedRecorderGroupsInOrderAndBoundsTheLag records a round's
// outcomes while a slow database holds each transaction: the transactions
// cover the outcomes in order without gap or overlap, each takes what
// became known meanwhile, and the sender waits once more than
// orderedRecordLag outcomes are not recorded.
func TestOrderedRecorderGroupsInOrderAndBoundsTheLag(t *testing.T) {
	t.Parallel()
	const n = 3*orderedRecordLag + 7
	var (
		mu     sync.Mutex
		parts  [][2]int
		gate   = make(chan struct{})
		inside = make(chan struct{}, 1)
	)
	r := newOrderedRecorder(func(from, to int) error {
		inside <- struct{}{}
		<-gate
		mu.Lock()
		parts = append(parts, [2]int{from, to})
		mu.Unlock()
		return nil
	})
	require.True(t, r.advance(1))
	<-inside // the first transaction [0, 1) is under way and held

	// The sender goes on while the first transaction is held, up to the lag.
	for i := 2; i <= orderedRecordLag; i++ {
		require.True(t, r.advance(i))
	}
	blocked := make(chan bool)
	go func() { blocked <- r.advance(orderedRecordLag + 1) }()
	select {
	case <-blocked:
		t.Fatal("advance did not wait with more than orderedRecordLag outcomes unrecorded")
	case <-time.After(50 * time.Millisecond):
	}
	gate <- struct{}{} // release [0, 1)
	<-inside           // the next transaction takes everything known since
	go func() {
		for range inside {
			gate <- struct{}{}
		}
	}()
	gate <- struct{}{} // release it
	require.True(t, <-blocked)
	for i := orderedRecordLag + 2; i <= n; i++ {
		require.True(t, r.advance(i))
	}
	require.NoError(t, r.wait(n))
	close(inside)

	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, [2]int{0, 1}, parts[0])
	require.Equal(t, 1, parts[1][0])
	require.Greater(t, parts[1][1], orderedRecordLag, "the second transaction took what became known while the first ran")
	next := 0
	for _, p := range parts {
		require.Equal(t, next, p[0], "parts follow each other: %v", parts)
		require.Greater(t, p[1], p[0])
		next = p[1]
	}
	require.Equal(t, n, next)
}

// TestOrderedRecorderStopsAtAnError tells the sender to stop once a
// transaction failed, records nothing after it, and returns the error.
func TestOrderedRecorderStopsAtAnError(t *testing.T) {
	t.Parallel()
	boom := errors.New("database unavailable")
	calls := make(chan [2]int, 10)
	r := newOrderedRecorder(func(from, to int) error {
		calls <- [2]int{from, to}
		return boom
	})
	r.advance(1)
	require.Equal(t, [2]int{0, 1}, <-calls)
	require.Eventually(t, func() bool { return !r.advance(2) }, 5*time.Second, time.Millisecond)
	require.ErrorIs(t, r.wait(5), boom)
	close(calls)
	require.Empty(t, calls, "nothing recorded after the error")
}
