// Package doccache is the cache of GraphQL documents and what is made of
// them (parsed documents, persisted queries, fast-path plans): bounded in
// the bytes of the documents it holds, not in entries, keyed by a SHA-256 of
// the document rather than its text, and refusing documents over a size of
// its own, so that no caller can fill a process's memory with text of its
// choosing however many distinct documents it sends.
package doccache

import (
	"container/list"
	"crypto/sha256"
	"sync"
)

// Key is what an entry is found by: the SHA-256 of its parts.
type Key [sha256.Size]byte

// KeyOf returns the key of parts (a document, and what else tells its
// entries apart: an operation name, a tenant). Parts are length-prefixed,
// so that ("a", "bc") and ("ab", "c") differ.
func KeyOf(parts ...string) Key {
	h := sha256.New()
	var n [8]byte
	for _, p := range parts {
		l := uint64(len(p))
		for i := range n {
			n[i] = byte(l >> (8 * i))
		}
		h.Write(n[:])
		h.Write([]byte(p))
	}
	var k Key
	h.Sum(k[:0])
	return k
}

// Cache is a least-recently-used cache of values that each stand for a
// document of a given size. It is safe for concurrent use.
type Cache[V any] struct {
	maxBytes, maxDocument int

	mu    sync.Mutex
	used  int
	order *list.List // front: most recently used
	items map[Key]*list.Element
}

type entry[V any] struct {
	key   Key
	value V
	size  int
}

// New returns a cache of documents of at most maxDocument bytes each and
// maxBytes in all.
func New[V any](maxBytes, maxDocument int) *Cache[V] {
	return &Cache[V]{maxBytes: maxBytes, maxDocument: maxDocument, order: list.New(), items: map[Key]*list.Element{}}
}

// Cacheable reports whether a document of size bytes may be cached.
func (c *Cache[V]) Cacheable(size int) bool { return size <= c.maxDocument && size <= c.maxBytes }

// Get returns the value cached under key.
func (c *Cache[V]) Get(key Key) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[key]
	if !ok {
		var zero V
		return zero, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*entry[V]).value, true
}

// Add caches value, which stands for a document of size bytes, under key,
// evicting the least recently used entries to stay within the byte bound.
// A document over the cache's document size is not cached.
func (c *Cache[V]) Add(key Key, value V, size int) {
	if !c.Cacheable(size) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		e := el.Value.(*entry[V])
		c.used += size - e.size
		e.value, e.size = value, size
		c.order.MoveToFront(el)
	} else {
		c.items[key] = c.order.PushFront(&entry[V]{key: key, value: value, size: size})
		c.used += size
	}
	for c.used > c.maxBytes {
		oldest := c.order.Back()
		e := oldest.Value.(*entry[V])
		c.order.Remove(oldest)
		delete(c.items, e.key)
		c.used -= e.size
	}
}

// Len returns the number of cached entries.
func (c *Cache[V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

// Bytes returns the size of the documents the cached entries stand for.
func (c *Cache[V]) Bytes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used
}
