package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"hash"
	"sync"
)

// maxMACKeys bounds a macCache's keys; it starts over when full.
const maxMACKeys = 4096

// macCache holds HMAC-SHA256 states keyed with the signing keys a Sender
// signs with, for reuse: a new HMAC costs allocations and the key's two
// pad blocks, a reused one is reset to its keyed state by a copy. The
// requests of a destination sign with the same keys, job after job.
type macCache struct {
	mu    sync.Mutex
	pools map[string]*sync.Pool
}

// newMACCache returns an empty cache.
func newMACCache() *macCache {
	return &macCache{pools: map[string]*sync.Pool{}}
}

// get returns an HMAC-SHA256 keyed with key, in its initial state, and
// the pool to put it back into once its sum is taken.
func (c *macCache) get(key []byte) (hash.Hash, *sync.Pool) {
	c.mu.Lock()
	p := c.pools[string(key)]
	if p == nil {
		if len(c.pools) >= maxMACKeys {
			clear(c.pools)
		}
		k := string(key)
		p = &sync.Pool{New: func() any { return hmac.New(sha256.New, []byte(k)) }}
		c.pools[k] = p
	}
	c.mu.Unlock()
	mac := p.Get().(hash.Hash)
	mac.Reset()
	return mac, p
}
