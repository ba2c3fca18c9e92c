package chaos

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// subscriber follows auditEventRecorded of the project over GraphQL
// WebSockets (graphql-transport-ws) and, whenever the connection or the
// subscription ends, subscribes again with afterSequence set to the last
// sequence it saw, as a client of the documented resume contract does.
type subscriber struct {
	base, token string

	mu         sync.Mutex
	seqs       []uint64
	reconnects int
	lastErr    error

	cancel context.CancelFunc
	done   chan struct{}
}

// subscribe starts a subscriber replaying every event after afterSequence;
// it stops when the test ends.
func subscribe(t *testing.T, s *server, token string, afterSequence uint64) *subscriber {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	sub := &subscriber{base: s.base, token: token, cancel: cancel, done: make(chan struct{})}
	go sub.run(ctx, afterSequence)
	t.Cleanup(sub.stop)
	return sub
}

func (sub *subscriber) stop() {
	sub.cancel()
	<-sub.done
}

func (sub *subscriber) run(ctx context.Context, after uint64) {
	defer close(sub.done)
	for ctx.Err() == nil {
		err := sub.follow(ctx, after)
		sub.mu.Lock()
		sub.lastErr = err
		sub.reconnects++
		if n := len(sub.seqs); n > 0 {
			after = sub.seqs[n-1]
		}
		sub.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// wsMessage is a graphql-transport-ws message.
type wsMessage struct {
	ID      string          `json:"id,omitempty"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// follow runs one connection with one subscription until it ends.
func (sub *subscriber) follow(ctx context.Context, after uint64) error {
	dialer := websocket.Dialer{Subprotocols: []string{"graphql-transport-ws"}, HandshakeTimeout: 5 * time.Second}
	url := "ws" + strings.TrimPrefix(sub.base, "http") + "/graphql"
	conn, _, err := dialer.DialContext(ctx, url, http.Header{"Authorization": {"Bearer " + sub.token}})
	if err != nil {
		return err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	init, _ := json.Marshal(map[string]any{"Authorization": "Bearer " + sub.token})
	if err := conn.WriteJSON(wsMessage{Type: "connection_init", Payload: init}); err != nil {
		return err
	}
	payload, _ := json.Marshal(map[string]any{
		"query":     `subscription($p: ID!, $a: Uint64) { auditEventRecorded(projectId: $p, afterSequence: $a) { sequence } }`,
		"variables": map[string]any{"p": project, "a": strconv.FormatUint(after, 10)},
	})
	for {
		var msg wsMessage
		if err := conn.ReadJSON(&msg); err != nil {
			return err
		}
		switch msg.Type {
		case "connection_ack":
			if err := conn.WriteJSON(wsMessage{ID: "1", Type: "subscribe", Payload: payload}); err != nil {
				return err
			}
		case "ping":
			if err := conn.WriteJSON(wsMessage{Type: "pong"}); err != nil {
				return err
			}
		case "next":
			var p struct {
				Data struct {
					AuditEventRecorded struct {
						Sequence string `json:"sequence"`
					} `json:"auditEventRecorded"`
				} `json:"data"`
				Errors json.RawMessage `json:"errors"`
			}
			if err := json.Unmarshal(msg.Payload, &p); err != nil {
				return err
			}
			if len(p.Errors) > 0 {
				return &wsError{string(p.Errors)}
			}
			seq, err := strconv.ParseUint(p.Data.AuditEventRecorded.Sequence, 10, 64)
			if err != nil {
				return err
			}
			sub.mu.Lock()
			sub.seqs = append(sub.seqs, seq)
			sub.mu.Unlock()
		case "error", "complete":
			return &wsError{msg.Type + ": " + string(msg.Payload)}
		}
	}
}

// wsError is a subscription that ended with an error or completed.
type wsError struct{ msg string }

func (e *wsError) Error() string { return e.msg }

// seen returns a copy of the sequences received so far, in arrival order.
func (sub *subscriber) seen() []uint64 {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	return append([]uint64(nil), sub.seqs...)
}

// last returns the last sequence received, 0 when none.
func (sub *subscriber) last() uint64 {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	if len(sub.seqs) == 0 {
		return 0
	}
	return sub.seqs[len(sub.seqs)-1]
}

// reconnectCount returns how often the subscription was started again.
func (sub *subscriber) reconnectCount() (int, error) {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	return sub.reconnects, sub.lastErr
}

// assertSeenExactly fails unless the subscriber received exactly the
// sequences first..last, each once and in order.
func assertSeenExactly(t *testing.T, sub *subscriber, first, last uint64) {
	t.Helper()
	got := sub.seen()
	want := make([]uint64, 0, last-first+1)
	for s := first; s <= last; s++ {
		want = append(want, s)
	}
	if len(got) != len(want) {
		t.Fatalf("subscriber saw %d events, want %d (sequences %d..%d); got %v", len(got), len(want), first, last, got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("subscriber's event %d is sequence %d, want %d; got %v", i, got[i], want[i], got)
		}
	}
}
