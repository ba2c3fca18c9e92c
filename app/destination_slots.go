package app

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/aetheriot/aether-audit/domain"
)

// webhookRuntime is the App's webhook configuration with defaults applied
// and the per-destination concurrency limits of this process.
type webhookRuntime struct {
	WebhookConfig
	mu    sync.Mutex
	slots map[uuid.UUID]*destinationSlots
	// runners run the delivery jobs' requests (sendAll).
	runners *requestRunners
}

// destinationSlots are one destination's limits in this process: jobs
// bounds the delivery jobs working on it at once (so that a slow receiver
// holds at most that many workers), requests the requests in flight to it.
// A job holds its place in jobs from start to end, but a request slot only
// while its request is under way, so that the slots are not idle while
// jobs read and write the database.
type destinationSlots struct {
	jobs chan struct{}
	refs int

	// inFlight counts the requests under way, limit bounds them (the
	// destination's maxInFlight, else the service's); waiting counts the
	// requests waiting for a slot, and freed is closed, and replaced,
	// whenever one ends or the limit grows while some wait.
	mu       sync.Mutex
	inFlight int
	limit    int
	waiting  int
	freed    chan struct{}
	// releaseSlot is release, bound once: request hands it out without
	// allocating a method value per request.
	releaseSlot func()

	// failures counts the failed requests in a row this process saw to
	// the destination, and trippedUntil is when its trip ends (see
	// destination_trip.go); both under mu.
	failures     int
	trippedUntil time.Time
}

func newWebhookRuntime(cfg WebhookConfig) webhookRuntime {
	if len(cfg.RetrySchedule) == 0 {
		cfg.RetrySchedule = domain.DefaultRetrySchedule
	}
	if cfg.MaxInFlightPerDestination <= 0 {
		cfg.MaxInFlightPerDestination = 8
	}
	cfg.Breaker = cfg.Breaker.WithDefaults()
	return webhookRuntime{WebhookConfig: cfg, slots: map[uuid.UUID]*destinationSlots{}, runners: newRequestRunners()}
}

// ErrDestinationBusy is returned by DeliverWebhooks when the destination
// already has its maximum of jobs under way in this process; the worker
// tries again a little later without using an attempt.
var ErrDestinationBusy = fmt.Errorf("webhook destination has too many deliveries under way")

// enter takes a place among the destination's running jobs, waiting up to
// destinationWait; ok is false when none freed in time. leave must be
// called once, after the job's last request.
func (w *webhookRuntime) enter(ctx context.Context, destinationID uuid.UUID) (s *destinationSlots, leave func(), ok bool) {
	w.mu.Lock()
	s = w.slots[destinationID]
	if s == nil {
		s = &destinationSlots{
			jobs:  make(chan struct{}, w.MaxInFlightPerDestination),
			limit: w.MaxInFlightPerDestination,
			freed: make(chan struct{}),
		}
		s.releaseSlot = s.release
		w.slots[destinationID] = s
	}
	s.refs++
	w.mu.Unlock()
	done := func() {
		w.mu.Lock()
		if s.refs--; s.refs == 0 {
			delete(w.slots, destinationID)
		}
		w.mu.Unlock()
	}
	select {
	case s.jobs <- struct{}{}:
	default:
		t := time.NewTimer(destinationWait)
		defer t.Stop()
		select {
		case s.jobs <- struct{}{}:
		case <-t.C:
			done()
			return nil, nil, false
		case <-ctx.Done():
			done()
			return nil, nil, false
		}
	}
	return s, func() { <-s.jobs; done() }, true
}

// request takes one of the destination's request slots, waiting for one
// as long as ctx allows (the requests ahead are bounded by the sender's
// timeout); release must be called once the request is over.
func (s *destinationSlots) request(ctx context.Context) (release func(), ok bool) {
	s.mu.Lock()
	for s.inFlight >= s.limit {
		freed := s.freed
		s.waiting++
		s.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			s.mu.Lock()
			s.waiting--
			s.mu.Unlock()
			return nil, false
		}
		s.mu.Lock()
		s.waiting--
	}
	s.inFlight++
	s.mu.Unlock()
	return s.releaseSlot, true
}

// release ends a request taken with request, waking the requests waiting
// for a slot, if any.
func (s *destinationSlots) release() {
	s.mu.Lock()
	s.inFlight--
	if s.waiting > 0 {
		s.signal()
	}
	s.mu.Unlock()
}

// setLimit sets the destination's in-flight limit in this process (its
// maxInFlight, read by each job); requests under way are not interrupted.
func (s *destinationSlots) setLimit(n int) {
	s.mu.Lock()
	if n > s.limit && s.waiting > 0 {
		s.signal()
	}
	s.limit = n
	s.mu.Unlock()
}

// signal wakes the requests waiting for a slot; s.mu is held.
func (s *destinationSlots) signal() {
	close(s.freed)
	s.freed = make(chan struct{})
}
