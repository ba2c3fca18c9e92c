package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aetheriot/aether-audit/webhook"
)

const testBody = `{"type":"device.firmware.updated","timestamp":"2026-11-30T12:23:35.781225Z","data":{"id":"0193a6f0-4c2e-7d3a-9b1e-5f8c2d7e6a01","projectId":"plant-1","sequence":"1","action":"device.firmware.updated"}}`

// testReceiver is a receiver whose accepted messages are collected.
type testReceiver struct {
	*receiver
	mu       sync.Mutex
	accepted []Message
	full     bool
}

func newTestReceiver(t *testing.T, secret string, now time.Time) *testReceiver {
	t.Helper()
	key, err := parseSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	tr := &testReceiver{}
	tr.receiver = &receiver{
		key: key, seen: newSeenIDs(100), log: slog.New(slog.DiscardHandler),
		now: func() time.Time { return now },
		accept: func(m Message) bool {
			tr.mu.Lock()
			defer tr.mu.Unlock()
			if tr.full {
				return false
			}
			tr.accepted = append(tr.accepted, m)
			return true
		},
	}
	return tr
}

func (tr *testReceiver) count() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return len(tr.accepted)
}

func newSecret(t *testing.T) (string, []byte) {
	t.Helper()
	enc, raw, err := webhook.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	return enc, raw
}

// signedRequest builds a request as Aether Audit sends it, signed with
// webhook.Sign, the sender's own signer.
func signedRequest(id string, ts time.Time, body string, keys ...[]byte) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/hook", bytes.NewReader([]byte(body)))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("webhook-id", id)
	r.Header.Set("webhook-timestamp", strconv.FormatInt(ts.Unix(), 10))
	r.Header.Set("webhook-signature", webhook.Sign(id, ts, []byte(body), keys))
	return r
}

func serve(h http.Handler, r *http.Request) int {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Code
}

func TestReceiverAcceptsSignedRequest(t *testing.T) {
	now := time.Now()
	secret, key := newSecret(t)
	tr := newTestReceiver(t, secret, now)

	if code := serve(tr, signedRequest("msg_1", now, testBody, key)); code != http.StatusNoContent {
		t.Fatalf("status %d, want 204", code)
	}
	if tr.count() != 1 {
		t.Fatalf("%d messages accepted, want 1", tr.count())
	}
	m := tr.accepted[0]
	if m.WebhookID != "msg_1" || m.Payload.Type != "device.firmware.updated" || m.Payload.Data.Sequence != "1" {
		t.Fatalf("unexpected message %+v", m)
	}
}

func TestReceiverRejects(t *testing.T) {
	now := time.Now()
	secret, key := newSecret(t)
	_, otherKey := newSecret(t)

	tampered := signedRequest("msg_1", now, testBody, key)
	tampered.Body = io.NopCloser(bytes.NewReader(bytes.Replace([]byte(testBody), []byte(`"sequence":"1"`), []byte(`"sequence":"2"`), 1)))

	swappedID := signedRequest("msg_1", now, testBody, key)
	swappedID.Header.Set("webhook-id", "msg_2")

	unsigned := signedRequest("msg_1", now, testBody, key)
	unsigned.Header.Del("webhook-signature")

	cases := map[string]*http.Request{
		"tampered body":          tampered,
		"other webhook-id":       swappedID,
		"timestamp 6 min old":    signedRequest("msg_1", now.Add(-6*time.Minute), testBody, key),
		"timestamp 6 min future": signedRequest("msg_1", now.Add(6*time.Minute), testBody, key),
		"wrong secret":           signedRequest("msg_1", now, testBody, otherKey),
		"no signature":           unsigned,
	}
	for name, r := range cases {
		t.Run(name, func(t *testing.T) {
			tr := newTestReceiver(t, secret, now)
			if code := serve(tr, r); code != http.StatusUnauthorized {
				t.Fatalf("status %d, want 401", code)
			}
			if tr.count() != 0 {
				t.Fatal("a refused request was processed")
			}
		})
	}
}

func TestReceiverToleratesClockSkewWithinFiveMinutes(t *testing.T) {
	now := time.Now()
	secret, key := newSecret(t)
	tr := newTestReceiver(t, secret, now)
	for i, ts := range []time.Time{now.Add(-4 * time.Minute), now.Add(4 * time.Minute)} {
		if code := serve(tr, signedRequest("msg_"+strconv.Itoa(i), ts, testBody, key)); code != http.StatusNoContent {
			t.Fatalf("timestamp %v: status %d, want 204", ts.Sub(now), code)
		}
	}
}

func TestReceiverDeduplicatesOnWebhookID(t *testing.T) {
	now := time.Now()
	secret, key := newSecret(t)
	tr := newTestReceiver(t, secret, now)

	if code := serve(tr, signedRequest("msg_1", now, testBody, key)); code != http.StatusNoContent {
		t.Fatalf("first: status %d", code)
	}
	// A retry: same webhook-id, a later attempt time, so a new signature.
	if code := serve(tr, signedRequest("msg_1", now.Add(time.Minute), testBody, key)); code != http.StatusOK {
		t.Fatalf("duplicate: status %d, want 200", code)
	}
	if tr.count() != 1 {
		t.Fatalf("processed %d times, want once", tr.count())
	}
	// Another message is processed.
	if code := serve(tr, signedRequest("msg_2", now, testBody, key)); code != http.StatusNoContent {
		t.Fatalf("second message: status %d", code)
	}
	if tr.count() != 2 {
		t.Fatalf("%d messages, want 2", tr.count())
	}
}

func TestReceiverAcceptsAnySignatureDuringRotation(t *testing.T) {
	now := time.Now()
	oldSecret, oldKey := newSecret(t)
	newSec, newKey := newSecret(t)
	for name, secret := range map[string]string{"old": oldSecret, "new": newSec} {
		t.Run(name, func(t *testing.T) {
			tr := newTestReceiver(t, secret, now)
			r := signedRequest("msg_1", now, testBody, oldKey, newKey)
			if code := serve(tr, r); code != http.StatusNoContent {
				t.Fatalf("status %d, want 204 (signature %q)", code, r.Header.Get("webhook-signature"))
			}
		})
	}
}

func TestReceiverBusyLetsTheRetryThrough(t *testing.T) {
	now := time.Now()
	secret, key := newSecret(t)
	tr := newTestReceiver(t, secret, now)
	tr.full = true
	if code := serve(tr, signedRequest("msg_1", now, testBody, key)); code != http.StatusServiceUnavailable {
		t.Fatalf("status %d, want 503", code)
	}
	tr.full = false
	if code := serve(tr, signedRequest("msg_1", now.Add(30*time.Second), testBody, key)); code != http.StatusNoContent {
		t.Fatalf("retry: status %d, want 204", code)
	}
	if tr.count() != 1 {
		t.Fatalf("%d messages, want 1", tr.count())
	}
}

// TestVerifyStandardWebhooksVector checks verify against the test vector of
// the Standard Webhooks reference libraries.
func TestVerifyStandardWebhooksVector(t *testing.T) {
	key, err := parseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek")
	h.Set("webhook-timestamp", "1614265330")
	h.Set("webhook-signature", "v1a,ignored v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
	if err := verify(key, h, []byte(`{"test": 2432232314}`), time.Unix(1614265330, 0)); err != nil {
		t.Fatal(err)
	}
}

// TestReceiverBehindTheSender sends through webhook.Sender, the client
// Aether Audit delivers with (relaxed to reach a loopback http server).
func TestReceiverBehindTheSender(t *testing.T) {
	secret, key := newSecret(t)
	tr := newTestReceiver(t, secret, time.Now())
	tr.now = time.Now
	srv := httptest.NewServer(tr)
	defer srv.Close()

	sender := webhook.NewSender(webhook.SenderConfig{
		AllowHTTP:     true,
		AllowPrefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
	})
	defer sender.CloseIdleConnections()
	req := webhook.Request{URL: srv.URL + "/hook", ID: "msg_0193a6f04c2e7d3a9b1e5f8c2d7e6a01", Body: []byte(testBody), Keys: [][]byte{key}}
	for i := range 2 {
		res := sender.Send(context.Background(), req)
		if !res.Delivered {
			t.Fatalf("send %d: not delivered: %d %s %s", i+1, res.StatusCode, res.ErrorClass, res.Error)
		}
	}
	if tr.count() != 1 {
		t.Fatalf("%d messages, want 1", tr.count())
	}
}

func TestSeenIDsEvictsOldest(t *testing.T) {
	s := newSeenIDs(2)
	for _, id := range []string{"a", "b", "c"} {
		if !s.add(id) {
			t.Fatalf("%s reported as seen", id)
		}
	}
	if s.add("c") || s.add("b") {
		t.Fatal("recent ids forgotten")
	}
	if !s.add("a") {
		t.Fatal("oldest id kept past capacity")
	}
}
