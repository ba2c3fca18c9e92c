package webhook

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

// BenchmarkSend is one signed delivery attempt of a payload of the
// webhook-delivery benchmark's size to a local TLS receiver over a kept-
// alive connection: the sender's per-request cost (allocs/op is the stable
// figure on a shared machine).
func BenchmarkSend(b *testing.B) {
	srv := newServer(&testing.T{}, "127.0.0.1:0", true, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	s := NewSender(SenderConfig{AllowPrefixes: loopbackPrefixes, RootCAs: srv.pool()})
	defer s.CloseIdleConnections()
	_, key, err := NewSecret()
	if err != nil {
		b.Fatal(err)
	}
	r := Request{
		URL: srv.URL + "/hook", ID: "msg_2Lh9KTrj0XJrXDZyWSvS8Cp1lLm",
		Body: []byte(`{"type":"bench.x","data":{` + strings.Repeat(`"k":"v",`, 110) + `"z":1}}`),
		Keys: [][]byte{key},
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		r.Timestamp = time.Now()
		if res := s.Send(ctx, r); !res.Delivered {
			b.Fatalf("not delivered: %+v", res)
		}
	}
}

// BenchmarkSign signs a payload of the webhook-delivery benchmark's size
// with one key.
func BenchmarkSign(b *testing.B) {
	_, key, err := NewSecret()
	if err != nil {
		b.Fatal(err)
	}
	body := []byte(`{"type":"bench.x","data":{` + strings.Repeat(`"k":"v",`, 110) + `"z":1}}`)
	ts := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		_ = Sign("msg_2Lh9KTrj0XJrXDZyWSvS8Cp1lLm", ts, body, [][]byte{key})
	}
}
