package webhook

import (
	"context"
	"net/http"
	"testing"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"
)

// TestSendExtraHeaders: a request's extra headers are sent beside the
// sender's own, which still verify (one naming them is refused unsent:
// TestSendContentTypeExtraHeadersAndUnsigned).
func TestSendExtraHeaders(t *testing.T) {
	t.Parallel()
	got := make(chan http.Header, 1)
	srv := newTLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
	}))
	s := newTestSender(t, srv, nil)
	req, key := testRequest(t, srv.URL)
	req.Header = http.Header{"X-Route": {"eu-1"}}
	res := s.Send(context.Background(), req)
	require.True(t, res.Delivered, res.Error)
	h := <-got
	require.Equal(t, "eu-1", h.Get("X-Route"))
	require.Equal(t, []string{req.ID}, h.Values("Webhook-Id"))
	require.Equal(t, []string{"application/json"}, h.Values("Content-Type"))
	wh, err := standardwebhooks.NewWebhookRaw(key)
	require.NoError(t, err)
	require.NoError(t, wh.Verify(req.Body, h))
}
