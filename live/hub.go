// Package live is the live audit hub: it turns committed audit events into
// resumable per-subscriber streams. Each process runs one Hub with one
// LISTEN connection. Commands notify (pg_notify on store.AuditEventsChannel,
// in their transaction) with a small payload naming the tenant, project and newest sequence; the hub
// then reads the new rows once per project into a shared window, from which
// every subscriber of the project pulls at its own pace by sequence. A
// subscriber that falls behind the window catches up from the store by
// sequence, so nothing is lost and nobody waits for anybody: the hub never
// blocks on a subscriber. Notifications are only hints: after a reconnect of
// the LISTEN connection, and every PollInterval, every active project is
// brought up to date from the store.
package live

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/store"
)

// Store is what the hub reads; *store.Store implements it.
type Store interface {
	AuditHead(ctx context.Context, tenantID, projectID string) (domain.ChainHead, error)
	SearchAuditEvents(ctx context.Context, tenantID, projectID string, f domain.AuditEventFilter, page domain.AuditEventPage) ([]domain.AuditEvent, error)
}

// Config configures a Hub. Zero fields take defaults.
type Config struct {
	Logger *slog.Logger
	// Window is how many recent events each active project keeps in memory
	// for its subscribers; default 1024.
	Window int
	// PollInterval is how often active projects are checked against the
	// store in case a notification was lost; default 5 s.
	PollInterval time.Duration
	// FetchBatch is how many events one store read fetches; default 500.
	FetchBatch int
	// MaxCatchUpReads bounds the store reads of subscriptions that fell
	// behind the window, run at once in this process; default a quarter of
	// the pool's connections (at least 1). Without the bound, thousands of
	// lagging subscribers would take every pooled connection and stall the
	// commands that record events and the job workers.
	MaxCatchUpReads int
	// Observer receives the hub's measurements; nil ignores them.
	Observer Observer
}

// Observer receives measurements of the hub (metrics).
type Observer interface {
	// FanoutLag is called once per read of new events with the time from
	// the newest one's recording (its commit) to its fan-out.
	FanoutLag(lag time.Duration)
}

// Hub fans committed audit events out to subscribers. Create it with New
// and run it with Run.
type Hub struct {
	pool  *pgxpool.Pool
	store Store
	cfg   Config

	mu        sync.Mutex
	feeds     map[feedKey]*feed
	listening bool // the LISTEN connection is up
	// exportWatches are the watchers of each data export.
	exportWatches map[exportKey]map[chan struct{}]struct{}
	// appendWatches are signalled on every append of any project
	// (WatchAppends).
	appendWatches map[chan struct{}]struct{}
	// subscribers counts open subscriptions.
	subscribers atomic.Int64
	// catchUp holds a token per store read of a lagging subscription.
	catchUp chan struct{}
}

type exportKey struct {
	tenantID string
	exportID uuid.UUID
}

type feedKey struct{ tenantID, projectID string }

// New returns a hub reading from store and listening through a dedicated
// connection configured like pool's.
func New(pool *pgxpool.Pool, store Store, cfg Config) *Hub {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Window <= 0 {
		cfg.Window = 1024
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 5 * time.Second
	}
	if cfg.FetchBatch <= 0 {
		cfg.FetchBatch = 500
	}
	if cfg.MaxCatchUpReads <= 0 {
		cfg.MaxCatchUpReads = max(1, int(pool.Config().MaxConns)/4)
	}
	return &Hub{pool: pool, store: store, cfg: cfg, feeds: map[feedKey]*feed{},
		exportWatches: map[exportKey]map[chan struct{}]struct{}{},
		appendWatches: map[chan struct{}]struct{}{},
		catchUp:       make(chan struct{}, cfg.MaxCatchUpReads)}
}

// Run listens for notifications until ctx ends, reconnecting with backoff
// and catching every active project up after each (re)connection, and
// polls active projects every PollInterval. It returns when ctx ends.
func (h *Hub) Run(ctx context.Context) {
	go h.poll(ctx)
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := h.listen(ctx)
		h.setListening(false)
		if ctx.Err() != nil {
			return
		}
		h.cfg.Logger.Warn("live hub lost its LISTEN connection; reconnecting", "err", err, "backoff", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

// Listening reports whether the LISTEN connection is up.
func (h *Hub) Listening() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.listening
}

func (h *Hub) setListening(v bool) {
	h.mu.Lock()
	h.listening = v
	h.mu.Unlock()
}

// listen holds one LISTEN connection until it fails or ctx ends.
func (h *Hub) listen(ctx context.Context) error {
	conn, err := pgx.ConnectConfig(ctx, h.pool.Config().ConnConfig.Copy())
	if err != nil {
		return fmt.Errorf("connecting: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+store.AuditEventsChannel+"; LISTEN "+store.DataExportsChannel); err != nil {
		return fmt.Errorf("listening: %w", err)
	}
	h.setListening(true)
	// Whatever was committed while we were not listening is caught up now.
	h.wakeAll()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if n.Channel == store.DataExportsChannel {
			var note store.DataExportNotification
			if err := json.Unmarshal([]byte(n.Payload), &note); err == nil {
				h.signalExport(exportKey{note.TenantID, note.ExportID})
			}
			continue
		}
		var note store.AuditEventsNotification
		if err := json.Unmarshal([]byte(n.Payload), &note); err != nil {
			h.cfg.Logger.Warn("live hub ignored a malformed notification", "err", err)
			continue
		}
		h.mu.Lock()
		f := h.feeds[feedKey{note.TenantID, note.ProjectID}]
		for ch := range h.appendWatches {
			signal(ch)
		}
		h.mu.Unlock()
		if f != nil {
			f.wake()
		}
	}
}

// poll wakes every active project each PollInterval, so that a lost
// notification delays delivery by at most that long.
func (h *Hub) poll(ctx context.Context) {
	t := time.NewTicker(h.cfg.PollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			h.wakeAll()
		}
	}
}

func (h *Hub) wakeAll() {
	h.mu.Lock()
	feeds := make([]*feed, 0, len(h.feeds))
	for _, f := range h.feeds {
		feeds = append(feeds, f)
	}
	for _, watchers := range h.exportWatches {
		for ch := range watchers {
			signal(ch)
		}
	}
	for ch := range h.appendWatches {
		signal(ch)
	}
	h.mu.Unlock()
	for _, f := range feeds {
		f.wake()
	}
}

// ErrClosed is returned by Next once the subscription is closed.
var ErrClosed = errors.New("live: subscription closed")

// Subscribe starts a subscription to tenant/project's events that pass
// filter, after sequence after, or, when after is nil, after the newest
// event committed now. The caller must Close it. It implements
// app.LiveFeed; the stream is a *Subscription.
func (h *Hub) Subscribe(ctx context.Context, tenantID, projectID string, after *uint64, filter domain.AuditEventFilter) (app.AuditEventStream, error) {
	cursor := uint64(0)
	if after != nil {
		cursor = *after
	} else {
		head, err := h.store.AuditHead(ctx, tenantID, projectID)
		if err != nil {
			return nil, err
		}
		cursor = head.Sequence
	}
	key := feedKey{tenantID, projectID}
	h.mu.Lock()
	f := h.feeds[key]
	if f == nil {
		f = newFeed(h, key)
		h.feeds[key] = f
		go f.run()
	}
	s := &Subscription{feed: f, cursor: cursor, filter: filter, signal: make(chan struct{}, 1), closed: make(chan struct{})}
	f.add(s)
	h.mu.Unlock()
	h.subscribers.Add(1)
	return s, nil
}

// Subscribers returns the number of open subscriptions of the hub.
func (h *Hub) Subscribers() int { return int(h.subscribers.Load()) }

// release drops a feed without subscribers.
func (h *Hub) release(f *feed) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if f.empty() && h.feeds[f.key] == f {
		delete(h.feeds, f.key)
		f.stop()
	}
}

var _ app.LiveFeed = (*Hub)(nil)

// WatchDataExport implements app.DataExportWatcher: the channel receives a
// value after each notified change of the export, after a reconnect and at
// every poll (coalesced: one pending value at most).
func (h *Hub) WatchDataExport(tenantID string, exportID uuid.UUID) (<-chan struct{}, func()) {
	key := exportKey{tenantID, exportID}
	ch := make(chan struct{}, 1)
	h.mu.Lock()
	if h.exportWatches[key] == nil {
		h.exportWatches[key] = map[chan struct{}]struct{}{}
	}
	h.exportWatches[key][ch] = struct{}{}
	h.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			h.mu.Lock()
			delete(h.exportWatches[key], ch)
			if len(h.exportWatches[key]) == 0 {
				delete(h.exportWatches, key)
			}
			h.mu.Unlock()
		})
	}
}

func (h *Hub) signalExport(key exportKey) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.exportWatches[key] {
		signal(ch)
	}
}

// signal sends on a coalescing channel without blocking.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// WatchAppends returns a channel that receives a value after each notified
// append of any project, after a reconnect and at every poll (coalesced:
// one pending value at most), and the function that stops the watch. The
// audit stream worker waits on it to follow the live head.
func (h *Hub) WatchAppends() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	h.mu.Lock()
	h.appendWatches[ch] = struct{}{}
	h.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			h.mu.Lock()
			delete(h.appendWatches, ch)
			h.mu.Unlock()
		})
	}
}
