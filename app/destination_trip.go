package app

import (
	"time"

	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/webhook"
)

// The breaker of a destination is shared by every process through its
// row, and it opens in the transaction that records the outcomes of the
// failure that makes the count: until that commits, the jobs that read
// the row before it still find the breaker closed, and each would send
// the rest of its batch (up to 100 requests) to a receiver that is down.
// So a process also trips on its own: once it sees the breaker's number
// of failed requests in a row to a destination, it sends it no more
// requests for the breaker's first backoff (the jobs past the gate
// withdraw their remaining deliveries unsent, without an attempt used;
// new jobs wait), by which time the shared breaker has opened, or, if
// another process's success kept it closed, requests resume. A success
// resets the count. Probes are not held back: the shared breaker lets
// them through, one at a time.

// observe counts one request's result at now under the breaker policy p:
// a success ends a trip and resets the count; a failure (a request
// interrupted by a shutdown is none) counts, and the one that reaches
// p.Failures trips the destination in this process until now+p.Backoff.
func (s *destinationSlots) observe(res webhook.Result, now time.Time, p domain.WebhookBreakerPolicy) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case res.Delivered:
		s.failures, s.trippedUntil = 0, time.Time{}
	case res.ErrorClass == webhook.ErrorClassCanceled:
	default:
		s.failures++
		if s.failures >= p.Failures && !s.trippedUntil.After(now) {
			s.trippedUntil = now.Add(p.Backoff)
		}
	}
}

// tripped reports whether the destination is tripped in this process at
// now, and until when. A trip that ended resets the count: the shared
// breaker decides again.
func (s *destinationSlots) tripped(now time.Time) (until time.Time, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.trippedUntil.IsZero() {
		return time.Time{}, false
	}
	if !now.Before(s.trippedUntil) {
		s.failures, s.trippedUntil = 0, time.Time{}
		return time.Time{}, false
	}
	return s.trippedUntil, true
}
