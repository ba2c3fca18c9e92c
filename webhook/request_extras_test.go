package webhook

import (
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSendContentTypeExtraHeadersAndUnsigned(t *testing.T) {
	t.Parallel()
	got := make(chan http.Header, 2)
	srv := newTLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		got <- r.Header.Clone()
	}))
	s := newTestSender(t, srv, nil)

	req, _ := testRequest(t, srv.URL)
	req.ContentType = "application/x-ndjson"
	req.Header = http.Header{"Aether-Stream-Id": {"s1"}}
	res := s.Send(context.Background(), req)
	require.True(t, res.Delivered, res.Error)
	h := <-got
	require.Equal(t, "application/x-ndjson", h.Get("Content-Type"))
	require.Equal(t, "s1", h.Get("Aether-Stream-Id"))
	require.Equal(t, Sign(req.ID, req.Timestamp, req.Body, req.Keys), h.Get("webhook-signature"), "still signed")

	unsigned := Request{URL: srv.URL, ID: "x", Body: []byte("[]"), Unsigned: true, Header: http.Header{"Dd-Api-Key": {"k"}}}
	res = s.Send(context.Background(), unsigned)
	require.True(t, res.Delivered, res.Error)
	h = <-got
	require.Equal(t, "k", h.Get("DD-API-KEY"))
	for _, name := range []string{"webhook-id", "webhook-timestamp", "webhook-signature"} {
		require.Empty(t, h.Get(name), name)
	}

	// Extra headers cannot replace what Send sets, nor smuggle lines.
	for _, header := range []http.Header{{"Webhook-Signature": {"v1,x"}}, {"Content-Type": {"text/plain"}}, {"X-A": {"a\r\nX-B: b"}}, {"X A": {"a"}}} {
		r := unsigned
		r.Header = header
		res := s.Send(context.Background(), r)
		require.False(t, res.Delivered)
		require.Equal(t, ErrorClassOther, res.ErrorClass)
	}
	require.Len(t, got, 0, "refused requests were not sent")
}
