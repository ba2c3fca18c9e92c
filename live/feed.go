package live

import (
	"context"
	"sync"
	"time"

	"github.com/aetheriot/aether-audit/domain"
)

// feed is one active project: a window of its newest events, read once from
// the store for all its subscribers.
type feed struct {
	hub *Hub
	key feedKey

	// mu guards the fields below; subscribers read under RLock, so that
	// thousands of them catching up at once do not queue behind each other.
	mu     sync.RWMutex
	window []*domain.AuditEvent // consecutive sequences, oldest first; shared, never modified
	head   uint64               // newest sequence read from the store
	ready  bool                 // head has been read at least once
	subs   map[*Subscription]struct{}

	wakeCh chan struct{}
	done   chan struct{}
	once   sync.Once
}

func newFeed(h *Hub, key feedKey) *feed {
	return &feed{hub: h, key: key, subs: map[*Subscription]struct{}{}, wakeCh: make(chan struct{}, 1), done: make(chan struct{})}
}

func (f *feed) add(s *Subscription) {
	f.mu.Lock()
	f.subs[s] = struct{}{}
	f.mu.Unlock()
	f.wake()
}

func (f *feed) remove(s *Subscription) {
	f.mu.Lock()
	delete(f.subs, s)
	f.mu.Unlock()
}

func (f *feed) empty() bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return len(f.subs) == 0
}

func (f *feed) wake() {
	select {
	case f.wakeCh <- struct{}{}:
	default:
	}
}

func (f *feed) stop() { f.once.Do(func() { close(f.done) }) }

// run reads new events whenever woken, until stopped.
func (f *feed) run() {
	for {
		select {
		case <-f.done:
			return
		case <-f.wakeCh:
		}
		if err := f.fetch(); err != nil {
			f.hub.cfg.Logger.Warn("live hub could not read new events", "tenant", f.key.tenantID, "project", f.key.projectID, "err", err)
			// Try again shortly; subscribers keep their cursors.
			select {
			case <-f.done:
				return
			case <-time.After(200 * time.Millisecond):
				f.wake()
			}
		}
	}
}

// fetch appends every committed event after head to the window and signals
// the subscribers.
func (f *feed) fetch() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f.mu.Lock()
	if !f.ready {
		f.mu.Unlock()
		head, err := f.hub.store.AuditHead(ctx, f.key.tenantID, f.key.projectID)
		if err != nil {
			return err
		}
		f.mu.Lock()
		if !f.ready {
			f.head, f.ready = head.Sequence, true
		}
	}
	after := f.head
	f.mu.Unlock()
	for {
		events, err := f.hub.store.SearchAuditEvents(ctx, f.key.tenantID, f.key.projectID, domain.AuditEventFilter{},
			domain.AuditEventPage{Order: domain.OldestFirst, After: &after, Limit: f.hub.cfg.FetchBatch})
		if err != nil {
			return err
		}
		if len(events) > 0 {
			f.mu.Lock()
			for i := range events {
				f.window = append(f.window, &events[i])
			}
			if over := len(f.window) - f.hub.cfg.Window; over > 0 {
				// Keep the newest events; drop references to the old ones.
				n := copy(f.window, f.window[over:])
				clear(f.window[n:])
				f.window = f.window[:n]
			}
			f.head = events[len(events)-1].Sequence
			after = f.head
			f.mu.Unlock()
			if obs := f.hub.cfg.Observer; obs != nil {
				obs.FanoutLag(time.Since(events[len(events)-1].RecordedAt))
			}
		}
		if len(events) < f.hub.cfg.FetchBatch {
			// One signal per subscriber per fetch, however many pages it
			// read; it also tells new subscribers the head is known.
			f.mu.RLock()
			for s := range f.subs {
				s.notify()
			}
			f.mu.RUnlock()
			return nil
		}
	}
}
