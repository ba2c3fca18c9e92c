package webhook

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNewPostIsNewRequest holds newPost to what http.NewRequestWithContext
// makes of the same URL and body, the empty body included: the transport
// must see the same request.
func TestNewPostIsNewRequest(t *testing.T) {
	t.Parallel()
	type ctxKey struct{}
	ctx := context.WithValue(context.Background(), ctxKey{}, 1)
	for _, raw := range []string{"https://example.com/hook?a=1&b=%20", "https://[2606:4700::1111]:8443/x/y", "http://93.184.215.14/"} {
		checked, v := checkURL(raw, true, newAddrPolicy(nil))
		require.Nil(t, v, raw)
		u, v := requestURL(checked)
		require.Nil(t, v, raw)
		for _, body := range [][]byte{[]byte(`{"a":1}`), nil} {
			header := http.Header{"Webhook-Id": {"msg_1"}}
			got := newPost(ctx, u, header, body)
			want, err := http.NewRequestWithContext(ctx, http.MethodPost, checked.String(), bytes.NewReader(body))
			require.NoError(t, err)
			want.Header = header

			require.Equal(t, want.Method, got.Method)
			require.Equal(t, *want.URL, *got.URL, raw)
			require.Same(t, u, got.URL)
			require.Equal(t, want.Host, got.Host)
			require.Equal(t, want.Proto, got.Proto)
			require.Equal(t, want.ProtoMajor, got.ProtoMajor)
			require.Equal(t, want.ProtoMinor, got.ProtoMinor)
			require.Equal(t, want.ContentLength, got.ContentLength)
			require.Equal(t, want.Header, got.Header)
			require.Equal(t, want.Context(), got.Context())
			require.Equal(t, readAll(t, want.Body), readAll(t, got.Body))
			require.Equal(t, want.Body == http.NoBody, got.Body == http.NoBody)
			for range 2 {
				wb, err := want.GetBody()
				require.NoError(t, err)
				gb, err := got.GetBody()
				require.NoError(t, err)
				require.Equal(t, readAll(t, wb), readAll(t, gb), "GetBody gives the whole body each time")
			}
		}
	}
}

// readAll reads r to its end.
func readAll(t *testing.T, r io.Reader) []byte {
	t.Helper()
	b, err := io.ReadAll(r)
	require.NoError(t, err)
	return b
}
