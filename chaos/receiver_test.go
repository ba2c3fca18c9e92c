package chaos

import (
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// receivedRequest is one request a receiver got.
type receivedRequest struct {
	webhookID string
	body      string
}

// receiver is a webhook receiver on loopback that takes between minDelay
// and maxDelay to answer 204 and records every request it gets, answered or
// not.
type receiver struct {
	url                string
	minDelay, maxDelay time.Duration

	mu       sync.Mutex
	requests []receivedRequest
	open     int
	answered int
}

// newReceiver starts a receiver, closed when the test ends.
func newReceiver(t *testing.T, minDelay, maxDelay time.Duration) *receiver {
	t.Helper()
	r := &receiver{minDelay: minDelay, maxDelay: maxDelay}
	srv := httptest.NewServer(http.HandlerFunc(r.handle))
	t.Cleanup(srv.Close)
	r.url = srv.URL + "/hook"
	return r
}

func (r *receiver) handle(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return // the sender went away while sending the body
	}
	r.mu.Lock()
	r.requests = append(r.requests, receivedRequest{webhookID: req.Header.Get("webhook-id"), body: string(body)})
	r.open++
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.open--
		r.mu.Unlock()
	}()
	delay := r.minDelay
	if r.maxDelay > r.minDelay {
		delay += rand.N(r.maxDelay - r.minDelay)
	}
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-req.Context().Done():
		return
	}
	w.WriteHeader(http.StatusNoContent)
	r.mu.Lock()
	r.answered++
	r.mu.Unlock()
}

// stats returns how many requests arrived, are open now, and were answered.
func (r *receiver) stats() (received, open, answered int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.requests), r.open, r.answered
}

// received returns a copy of every request so far.
func (r *receiver) received() []receivedRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]receivedRequest(nil), r.requests...)
}
