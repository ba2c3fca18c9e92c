package webhook

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"
)

// TestSignFixedVector checks the test vector shared by the Standard Webhooks
// reference libraries.
func TestSignFixedVector(t *testing.T) {
	t.Parallel()
	key, err := ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	require.NoError(t, err)
	got := Sign("msg_p5jXN8AQM9LWM0D4loKWxJek", time.Unix(1614265330, 0), []byte(`{"test": 2432232314}`), [][]byte{key})
	require.Equal(t, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", got)
}

func TestSignNoKeys(t *testing.T) {
	t.Parallel()
	require.Empty(t, Sign("msg", time.Unix(1, 0), []byte("{}"), nil))
}

func TestSignVerifiesWithReferenceLibrary(t *testing.T) {
	t.Parallel()
	_, oldKey, err := NewSecret()
	require.NoError(t, err)
	newEncoded, newKey, err := NewSecret()
	require.NoError(t, err)
	_, strangerKey, err := NewSecret()
	require.NoError(t, err)

	id := "msg_2Lh9KTrj0XJrXDZyWSvS8Cp1lLm"
	ts := time.Now()
	body := []byte(`{"type":"audit.event.created","data":{"id":"e1","n":42}}`)

	headers := func(sig string) http.Header {
		h := http.Header{}
		h.Set("webhook-id", id)
		h.Set("webhook-timestamp", strconv.FormatInt(ts.Unix(), 10))
		h.Set("webhook-signature", sig)
		return h
	}
	verifier := func(key []byte) *standardwebhooks.Webhook {
		wh, err := standardwebhooks.NewWebhookRaw(key)
		require.NoError(t, err)
		return wh
	}

	t.Run("one key", func(t *testing.T) {
		sig := Sign(id, ts, body, [][]byte{newKey})
		require.NotContains(t, sig, " ")
		require.NoError(t, verifier(newKey).Verify(body, headers(sig)))

		// The reference library also accepts the encoded secret.
		wh, err := standardwebhooks.NewWebhook(newEncoded)
		require.NoError(t, err)
		require.NoError(t, wh.Verify(body, headers(sig)))

		require.Error(t, verifier(strangerKey).Verify(body, headers(sig)))
		require.Error(t, verifier(newKey).Verify(append(body, ' '), headers(sig)), "body is covered")
	})

	t.Run("two keys during rotation", func(t *testing.T) {
		sig := Sign(id, ts, body, [][]byte{oldKey, newKey})
		parts := strings.Split(sig, " ")
		require.Len(t, parts, 2)
		require.Equal(t, Sign(id, ts, body, [][]byte{oldKey}), parts[0], "order is preserved")
		require.Equal(t, Sign(id, ts, body, [][]byte{newKey}), parts[1])

		require.NoError(t, verifier(oldKey).Verify(body, headers(sig)), "old key verifies")
		require.NoError(t, verifier(newKey).Verify(body, headers(sig)), "new key verifies")
		require.Error(t, verifier(strangerKey).Verify(body, headers(sig)))
	})

	t.Run("id and timestamp are covered", func(t *testing.T) {
		sig := Sign(id, ts, body, [][]byte{newKey})
		h := headers(sig)
		h.Set("webhook-id", id+"x")
		require.Error(t, verifier(newKey).Verify(body, h))
		h = headers(sig)
		h.Set("webhook-timestamp", strconv.FormatInt(ts.Unix()+1, 10))
		require.Error(t, verifier(newKey).Verify(body, h))
	})
}
