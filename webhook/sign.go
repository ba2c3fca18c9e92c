package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"hash"
	"strconv"
	"sync"
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
	var ts [20]byte
	return signature(id, strconv.AppendInt(ts[:0], timestamp.Unix(), 10), body, keys, nil)
}

// signature is Sign with the timestamp already in decimal (Sender.deliver
// sends the same digits in webhook-timestamp). It writes the signed
// content's prefix (id, ".", timestamp, ".") in one piece and encodes the
// MACs into the result's buffer, so that a signature costs little more
// than its HMACs. With macs, the HMACs are keyed states reused from it
// rather than new ones.
func signature(id string, ts, body []byte, keys [][]byte, macs *macCache) string {
	entry := len(signatureVersion) + 1 + base64.StdEncoding.EncodedLen(sha256.Size)
	// buf holds the prefix, then room for one MAC, then the header value.
	prefix := len(id) + 1 + len(ts) + 1
	out := prefix + sha256.Size
	buf := make([]byte, out, out+len(keys)*(entry+1))
	n := copy(buf, id)
	buf[n] = '.'
	n += 1 + copy(buf[n+1:], ts)
	buf[n] = '.'
	for i, key := range keys {
		var (
			mac  hash.Hash
			pool *sync.Pool
		)
		if macs != nil {
			mac, pool = macs.get(key)
		} else {
			mac = hmac.New(sha256.New, key)
		}
		mac.Write(buf[:prefix])
		mac.Write(body)
		sum := mac.Sum(buf[prefix:prefix])
		if pool != nil {
			pool.Put(mac)
		}
		if i > 0 {
			buf = append(buf, ' ')
		}
		buf = append(buf, signatureVersion...)
		buf = append(buf, ',')
		buf = base64.StdEncoding.AppendEncode(buf, sum)
	}
	return string(buf[out:])
}
