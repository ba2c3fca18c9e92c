package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"strings"
	"time"
)

// signatureVersion labels signatures computed with HMAC-SHA256, the only
// symmetric scheme defined by Standard Webhooks.
const signatureVersion = "v1"

// Sign returns the value of the webhook-signature header for one delivery.
//
// For each key, in the order given, it computes HMAC-SHA256 over the signed
// content id + "." + timestamp + "." + body, where timestamp is
// timestamp.Unix() in decimal, and emits "v1," followed by the standard
// base64 encoding of the MAC. Entries are joined by single spaces. Passing
// several keys (old and new during rotation) lets a receiver holding any
// one of them verify the request. With no keys Sign returns "".
//
// The timestamp and id must be sent unchanged in the webhook-timestamp and
// webhook-id headers, and body must be the exact bytes sent.
func Sign(id string, timestamp time.Time, body []byte, keys [][]byte) string {
	if len(keys) == 0 {
		return ""
	}
	ts := strconv.FormatInt(timestamp.Unix(), 10)
	var b strings.Builder
	b.Grow(len(keys) * (len(signatureVersion) + 1 + base64.StdEncoding.EncodedLen(sha256.Size) + 1))
	for i, key := range keys {
		if i > 0 {
			b.WriteByte(' ')
		}
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(id))
		mac.Write([]byte{'.'})
		mac.Write([]byte(ts))
		mac.Write([]byte{'.'})
		mac.Write(body)
		b.WriteString(signatureVersion)
		b.WriteByte(',')
		b.WriteString(base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	}
	return b.String()
}
