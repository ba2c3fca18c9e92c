// Command webhook-receiver receives Aether Audit webhooks. It is a starting
// point for a real receiver, written with the standard library only, and
// shows each step a receiver must take:
//
//  1. Read the exact body bytes (the signature covers them).
//  2. Verify the Standard Webhooks signature: HMAC-SHA256 over
//     "<webhook-id>.<webhook-timestamp>.<body>" with the base64-decoded key
//     of the whsec_ secret, compared in constant time against every
//     "v1,<base64>" entry of webhook-signature. Any match passes, so the
//     request still verifies while the sender signs with an old and a new
//     secret during a rotation.
//  3. Refuse timestamps more than 5 minutes away from the local clock, which
//     bounds replays of a captured request.
//  4. Deduplicate on webhook-id. Aether Audit delivers at least once: a retry
//     or a redrive carries the same webhook-id as the first attempt.
//  5. Answer 2xx quickly and do the work elsewhere. Aether Audit gives up on
//     a request after 15 s and counts anything but 2xx as a failure.
//
// Configuration, from the environment:
//
//	WEBHOOK_SECRET  the destination's signing secret, whsec_... (required)
//	ADDR            listen address (default 127.0.0.1:9000)
//
// The duplicate filter here is in memory and bounded (the most recent 10,000
// ids, oldest evicted first): it forgets on restart and is not shared
// between replicas. A production receiver records webhook-id in its own
// database, in the same transaction as the effect of the event.
package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	// tolerance is how far webhook-timestamp may be from the local clock.
	tolerance = 5 * time.Minute
	// maxBody bounds the request body. An audit event is at most a few
	// tens of KiB.
	maxBody = 1 << 20
	// seenCapacity bounds the duplicate filter.
	seenCapacity = 10_000
)

// errSignature is any verification failure. The receiver does not tell the
// caller which check failed.
var errSignature = errors.New("invalid webhook signature")

// parseSecret decodes "whsec_<base64>" into the raw HMAC key.
func parseSecret(s string) ([]byte, error) {
	enc, ok := strings.CutPrefix(strings.TrimSpace(s), "whsec_")
	if !ok {
		return nil, errors.New("secret must start with whsec_")
	}
	key, err := base64.StdEncoding.DecodeString(enc)
	if err != nil || len(key) == 0 {
		return nil, errors.New("secret is not whsec_ followed by base64")
	}
	return key, nil
}

// verify checks the Standard Webhooks headers of a request against body.
func verify(key []byte, h http.Header, body []byte, now time.Time) error {
	id := h.Get("webhook-id")
	ts := h.Get("webhook-timestamp")
	sigs := h.Get("webhook-signature")
	if id == "" || ts == "" || sigs == "" {
		return errSignature
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return errSignature
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return errSignature
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	want := mac.Sum(nil)
	for _, entry := range strings.Fields(sigs) {
		version, sig, ok := strings.Cut(entry, ",")
		if !ok || version != "v1" {
			continue // other schemes (v1a, ...) are not ours
		}
		got, err := base64.StdEncoding.DecodeString(sig)
		if err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return errSignature
}

// seenIDs remembers the most recent webhook-ids, evicting the oldest once
// full.
type seenIDs struct {
	mu    sync.Mutex
	set   map[string]struct{}
	order []string // ring buffer of the ids in set
	next  int
}

func newSeenIDs(capacity int) *seenIDs {
	return &seenIDs{set: make(map[string]struct{}, capacity), order: make([]string, capacity)}
}

// add records id and reports whether it was new.
func (s *seenIDs) add(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.set[id]; dup {
		return false
	}
	if old := s.order[s.next]; old != "" {
		delete(s.set, old)
	}
	s.order[s.next] = id
	s.next = (s.next + 1) % len(s.order)
	s.set[id] = struct{}{}
	return true
}

// forget removes id, so that a retry of a message we failed to take is
// processed.
func (s *seenIDs) forget(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.set, id)
}

// Payload is the body of every Aether Audit webhook. Data is the audit event
// in the API's JSON shape; only the fields logged here are decoded.
type Payload struct {
	Type      string    `json:"type"`
	Timestamp time.Time `json:"timestamp"`
	Data      struct {
		ID        string `json:"id"`
		ProjectID string `json:"projectId"`
		Sequence  string `json:"sequence"`
	} `json:"data"`
}

// Message is a verified, first-seen webhook.
type Message struct {
	WebhookID string
	Payload   Payload
}

// receiver is the HTTP handler.
type receiver struct {
	key  []byte
	seen *seenIDs
	log  *slog.Logger
	now  func() time.Time
	// accept hands a message to the work queue. It must not block; false
	// means the queue is full and the sender should retry later.
	accept func(Message) bool
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	body, err := readBody(w, r)
	if err != nil {
		http.Error(w, "cannot read body", http.StatusBadRequest)
		return
	}
	if err := verify(rc.key, r.Header, body, rc.now()); err != nil {
		rc.log.Warn("webhook refused", "webhook_id", r.Header.Get("webhook-id"), "err", err)
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	id := r.Header.Get("webhook-id")
	var p Payload
	if err := json.Unmarshal(body, &p); err != nil {
		// Signed by the sender but unreadable to us: a bug on one side.
		// Not 2xx, so the delivery stays visible as failed.
		rc.log.Error("webhook payload unreadable", "webhook_id", id, "err", err)
		http.Error(w, "unreadable payload", http.StatusUnprocessableEntity)
		return
	}
	if !rc.seen.add(id) {
		rc.log.Info("webhook duplicate", "webhook_id", id, "type", p.Type)
		w.WriteHeader(http.StatusOK)
		return
	}
	if !rc.accept(Message{WebhookID: id, Payload: p}) {
		rc.seen.forget(id)
		w.Header().Set("Retry-After", "30")
		http.Error(w, "busy", http.StatusServiceUnavailable)
		return
	}
	rc.log.Info("webhook accepted", "webhook_id", id, "type", p.Type,
		"event_id", p.Data.ID, "project", p.Data.ProjectID, "sequence", p.Data.Sequence)
	w.WriteHeader(http.StatusNoContent)
}

func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	return io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
}

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	key, err := parseSecret(os.Getenv("WEBHOOK_SECRET"))
	if err != nil {
		log.Error("WEBHOOK_SECRET", "err", err)
		os.Exit(2)
	}
	addr := os.Getenv("ADDR")
	if addr == "" {
		addr = "127.0.0.1:9000"
	}

	// The work queue. Replace the worker's body with what your integration
	// does with an event; keep the handler itself fast.
	queue := make(chan Message, 1024)
	var workers sync.WaitGroup
	workers.Go(func() {
		for m := range queue {
			log.Info("processing", "webhook_id", m.WebhookID, "type", m.Payload.Type, "event_id", m.Payload.Data.ID)
		}
	})

	srv := &http.Server{
		Addr: addr,
		Handler: &receiver{
			key: key, seen: newSeenIDs(seenCapacity), log: log, now: time.Now,
			accept: func(m Message) bool {
				select {
				case queue <- m:
					return true
				default:
					return false
				}
			},
		},
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      10 * time.Second,
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown) // waits for handlers in flight
	}()
	log.Info("listening", "addr", addr)
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		log.Error("serve", "err", err)
		os.Exit(1)
	}
	<-stopped
	close(queue) // no handler sends any more
	workers.Wait()
}
