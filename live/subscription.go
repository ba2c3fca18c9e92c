package live

import (
	"context"
	"sync"

	"github.com/aetheriot/aether-audit/domain"
)

// Subscription is one subscriber's position in a project's events. It is
// pulled with Next (which waits), or with Pull after OnReady (which does
// not: the hub calls back when events may be at hand, and the subscriber
// needs no goroutine of its own); a subscriber that pulls slowly only
// delays itself.
type Subscription struct {
	feed   *feed
	filter domain.AuditEventFilter
	signal chan struct{}
	// onReady, if set, is called by the feed (under its lock, so set it
	// under the lock too) whenever events may be at hand.
	onReady func()

	// Owned by the goroutine calling Next.
	cursor  uint64               // newest sequence passed on (or skipped by the filter)
	pending []*domain.AuditEvent // matching events read but not yet returned
	next    int                  // index of the next pending event

	closeOnce sync.Once
	closed    chan struct{} // closed by Close
}

// notify tells the subscriber that events may be at hand; the feed calls
// it under f.mu.
func (s *Subscription) notify() {
	if s.onReady != nil {
		s.onReady()
	}
	select {
	case s.signal <- struct{}{}:
	default:
	}
}

// Cursor returns the newest sequence the subscription has passed: the
// afterSequence a client resumes from. Call it from the goroutine that
// calls Next.
func (s *Subscription) Cursor() uint64 { return s.cursor }

// Next returns the next matching event, in sequence order, waiting until one
// is committed or ctx ends. It never returns an event twice and never skips
// one: events it cannot find in the shared window are read from the store.
func (s *Subscription) Next(ctx context.Context) (*domain.AuditEvent, error) {
	for {
		if s.next < len(s.pending) {
			e := s.pending[s.next]
			s.pending[s.next] = nil
			s.next++
			return e, nil
		}
		s.pending, s.next = s.pending[:0], 0
		if s.isClosed() {
			return nil, ErrClosed
		}
		progressed, err := s.advance(ctx)
		if err != nil {
			return nil, err
		}
		if progressed {
			continue
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-s.closed:
			return nil, ErrClosed
		case <-s.signal:
		}
	}
}

// TryNext returns the next matching event if it is at hand (read already,
// or in the shared window) without waiting or reading the store; ok is
// false otherwise, and once the subscription is closed. It keeps Next's
// order: the two may be mixed freely, from the goroutine calling Next.
func (s *Subscription) TryNext() (e *domain.AuditEvent, ok bool) {
	for {
		if s.next < len(s.pending) {
			e := s.pending[s.next]
			s.pending[s.next] = nil
			s.next++
			return e, true
		}
		s.pending, s.next = s.pending[:0], 0
		if s.isClosed() {
			return nil, false
		}
		if progressed, _ := s.advanceInWindow(); !progressed {
			return nil, false
		}
	}
}

// OnReady registers f to be called whenever matching events may have
// become available (after each read of new events by the hub), so that a
// subscriber can Pull without a goroutine waiting in Next. f is called from
// the hub's goroutine with the project's lock held: it must return at once
// and must not call back into the subscription (schedule the Pull
// elsewhere). Call OnReady once, before pulling: f is not called for
// events at hand before it was registered, so pull once after registering.
func (s *Subscription) OnReady(f func()) {
	s.feed.mu.Lock()
	s.onReady = f
	s.feed.mu.Unlock()
}

// Pull returns the next matching event, in sequence order, if one is
// committed: from what was read already, from the shared window, or, when
// the subscription has fallen behind the window, from the store (a read
// bounded like Next's, one of at most MaxCatchUpReads at once). It never
// waits for an event to be committed: ok is false when none is at hand,
// and then the OnReady callback is called once there may be. Pull keeps
// Next's guarantees (no event twice, none skipped) and may be mixed with
// Next and TryNext, from one goroutine at a time. After Close it returns
// ErrClosed.
func (s *Subscription) Pull(ctx context.Context) (e *domain.AuditEvent, ok bool, err error) {
	for {
		if s.next < len(s.pending) {
			e := s.pending[s.next]
			s.pending[s.next] = nil
			s.next++
			return e, true, nil
		}
		s.pending, s.next = s.pending[:0], 0
		if s.isClosed() {
			return nil, false, ErrClosed
		}
		progressed, err := s.advance(ctx)
		if err != nil {
			return nil, false, err
		}
		if !progressed {
			if cap(s.pending) > maxIdlePending {
				s.pending = nil // an idle subscriber holds no large buffer
			}
			return nil, false, nil
		}
	}
}

// maxIdlePending is the capacity of pending an idle subscription may keep.
const maxIdlePending = 16

// advanceInWindow is advance served from the shared window only; behind
// reports that the cursor is behind the window (the store must be read).
func (s *Subscription) advanceInWindow() (progressed, behind bool) {
	f := s.feed
	f.mu.RLock()
	defer f.mu.RUnlock()
	if !f.ready || s.cursor >= f.head {
		return false, false
	}
	if n := len(f.window); n == 0 || f.window[0].Sequence > s.cursor+1 {
		return false, true
	}
	start := int(s.cursor + 1 - f.window[0].Sequence)
	for _, e := range f.window[start:] {
		if s.filter.Matches(e) {
			s.pending = append(s.pending, e)
		}
	}
	s.cursor = f.head
	return true, false
}

// advance moves the cursor forward through what is known committed, filling
// pending with the matching events; it reports whether it moved.
func (s *Subscription) advance(ctx context.Context) (bool, error) {
	if progressed, behind := s.advanceInWindow(); !behind {
		return progressed, nil
	}
	f := s.feed
	f.mu.RLock()
	head := f.head
	f.mu.RUnlock()

	// Behind the window: catch up from the store, one page at a time, as
	// one of at most MaxCatchUpReads such reads of the process.
	select {
	case f.hub.catchUp <- struct{}{}:
	case <-ctx.Done():
		return false, ctx.Err()
	case <-s.closed:
		return false, ErrClosed
	}
	after := s.cursor
	limit := f.hub.cfg.FetchBatch
	events, err := f.hub.store.SearchAuditEvents(ctx, f.key.tenantID, f.key.projectID, s.filter,
		domain.AuditEventPage{Order: domain.OldestFirst, After: &after, Limit: limit})
	<-f.hub.catchUp
	if err != nil {
		return false, err
	}
	for i := range events {
		s.pending = append(s.pending, &events[i])
	}
	if len(events) == limit {
		s.cursor = events[len(events)-1].Sequence
	} else {
		// Every event up to head was committed before the read: none
		// matching remains below it.
		s.cursor = max(s.cursor, head)
		if len(events) > 0 {
			s.cursor = max(s.cursor, events[len(events)-1].Sequence)
		}
	}
	return true, nil
}

func (s *Subscription) isClosed() bool {
	select {
	case <-s.closed:
		return true
	default:
		return false
	}
}

// Close ends the subscription; a pending Next returns ErrClosed.
func (s *Subscription) Close() {
	s.closeOnce.Do(func() {
		close(s.closed)
		s.feed.hub.subscribers.Add(-1)
		s.feed.remove(s)
		s.feed.hub.release(s.feed)
	})
}
