package app

import (
	"testing"
	"time"
)

// TestRequestRunnersReuseTheirGoroutines: a runner that finished a request
// waits for the next one (a hand-off succeeds) and runs it; requests handed
// out while every runner is busy get runners of their own.
func TestRequestRunnersReuseTheirGoroutines(t *testing.T) {
	t.Parallel()
	r := newRequestRunners()
	done := make(chan struct{})
	r.run(func() { close(done) })
	<-done

	ran := make(chan struct{})
	select {
	case r.work <- func() { close(ran) }:
	case <-time.After(runnerIdle / 2):
		t.Fatal("no runner waited for the next request")
	}
	<-ran

	// Two requests at once: the second does not wait for the first.
	release := make(chan struct{})
	second := make(chan struct{})
	r.run(func() { <-release })
	r.run(func() { close(second) })
	<-second
	close(release)
}
