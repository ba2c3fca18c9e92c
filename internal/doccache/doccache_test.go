package doccache

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCacheBoundedInBytes: documents over the document size are never
// cached, and the least recently used entries make room for new ones, so
// the bytes held never pass the bound.
func TestCacheBoundedInBytes(t *testing.T) {
	t.Parallel()
	c := New[string](1000, 300)
	big := strings.Repeat("x", 301)
	c.Add(KeyOf(big), big, len(big))
	_, ok := c.Get(KeyOf(big))
	require.False(t, ok, "over the document size")
	require.Zero(t, c.Bytes())

	for i := range 10 {
		doc := strconv.Itoa(i) + strings.Repeat("y", 199)
		c.Add(KeyOf(doc), doc, len(doc))
		require.LessOrEqual(t, c.Bytes(), 1000)
	}
	require.Equal(t, 5, c.Len())
	_, ok = c.Get(KeyOf("0" + strings.Repeat("y", 199)))
	require.False(t, ok, "the oldest were evicted")
	v, ok := c.Get(KeyOf("9" + strings.Repeat("y", 199)))
	require.True(t, ok)
	require.Equal(t, "9"+strings.Repeat("y", 199), v)

	// A read keeps an entry: the next eviction takes another.
	c.Get(KeyOf("5" + strings.Repeat("y", 199)))
	c.Add(KeyOf("new"), "new", 200)
	_, ok = c.Get(KeyOf("5" + strings.Repeat("y", 199)))
	require.True(t, ok)
	_, ok = c.Get(KeyOf("6" + strings.Repeat("y", 199)))
	require.False(t, ok)
}

// TestKeyOfSeparatesParts: the parts of a key are not simply joined.
func TestKeyOfSeparatesParts(t *testing.T) {
	t.Parallel()
	require.NotEqual(t, KeyOf("a", "bc"), KeyOf("ab", "c"))
	require.NotEqual(t, KeyOf("t1", "q"), KeyOf("t2", "q"))
	require.Equal(t, KeyOf("t1", "q"), KeyOf("t1", "q"))
}
