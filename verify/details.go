package verify

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math/bits"
	"unicode/utf8"

	"github.com/aetheriot/aether-audit/domain"
)

// canonicalDetails returns the canonical form of an event's details as
// domain.CanonicalJSON computes it (the stored, hashed bytes). Details that
// are already canonical, as most are, come back as they are without the
// decoding and re-encoding CanonicalJSON does; anything else (an escape,
// white space, unsorted or repeated keys, limits) goes through
// CanonicalJSON itself. JSON null, which the event JSON shows for absent
// details, is the empty object the canonical encoding writes for them.
func canonicalDetails(raw []byte) (json.RawMessage, error) {
	if bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	if len(raw) <= domain.MaxDetailsBytes && raw[0] == '{' {
		c := canonicalChecker{b: raw}
		if c.value(0) && c.i == len(raw) {
			return raw, nil
		}
	}
	return domain.CanonicalJSON(raw)
}

// details consumes the details value of an event line and returns its
// canonical form, as canonicalDetails(raw) does for the raw text skip
// would return. Details already canonical, as most are, are checked and
// delimited in one pass; anything else is skipped and canonicalized.
func (s *scanner) details() (json.RawMessage, error) {
	if s.peek() == '{' {
		c := canonicalChecker{b: s.b, i: s.i}
		// The checker accepts only a complete, valid object, which it
		// delimits exactly as skip would; it never looks past its end.
		if c.value(0) && c.i-s.i <= domain.MaxDetailsBytes {
			raw := s.b[s.i:c.i]
			s.i = c.i
			return raw, nil
		}
	}
	raw, err := s.skip()
	if err != nil {
		return nil, err
	}
	return canonicalDetails(raw)
}

// canonicalChecker reports whether JSON text is exactly what
// domain.CanonicalJSON writes for it. It errs on the side of "no": strings
// with any escape are left to CanonicalJSON.
type canonicalChecker struct {
	b []byte
	i int
}

// value checks the value at c.i, nested in depth containers.
func (c *canonicalChecker) value(depth int) bool {
	if c.i >= len(c.b) {
		return false
	}
	switch ch := c.b[c.i]; {
	case ch == '{':
		if depth >= domain.MaxDetailsDepth {
			return false
		}
		c.i++
		if c.i < len(c.b) && c.b[c.i] == '}' {
			c.i++
			return true
		}
		var prev []byte
		for first := true; ; first = false {
			key, ok := c.str()
			// Keys strictly ascending by bytes: sorted, none repeated.
			if !ok || (!first && bytes.Compare(prev, key) >= 0) {
				return false
			}
			prev = key
			if c.i >= len(c.b) || c.b[c.i] != ':' {
				return false
			}
			c.i++
			if !c.value(depth + 1) {
				return false
			}
			if c.i >= len(c.b) {
				return false
			}
			switch c.b[c.i] {
			case ',':
				c.i++
			case '}':
				c.i++
				return true
			default:
				return false
			}
		}
	case ch == '[':
		if depth >= domain.MaxDetailsDepth {
			return false
		}
		c.i++
		if c.i < len(c.b) && c.b[c.i] == ']' {
			c.i++
			return true
		}
		for {
			if !c.value(depth + 1) {
				return false
			}
			if c.i >= len(c.b) {
				return false
			}
			switch c.b[c.i] {
			case ',':
				c.i++
			case ']':
				c.i++
				return true
			default:
				return false
			}
		}
	case ch == '"':
		_, ok := c.str()
		return ok
	case ch == '-' || ('0' <= ch && ch <= '9'):
		n := numberLen(c.b[c.i:])
		c.i += n
		return n > 0
	case ch == 't':
		return c.literal("true")
	case ch == 'f':
		return c.literal("false")
	case ch == 'n':
		return c.literal("null")
	}
	return false
}

func (c *canonicalChecker) literal(lit string) bool {
	if len(c.b)-c.i < len(lit) || string(c.b[c.i:c.i+len(lit)]) != lit {
		return false
	}
	c.i += len(lit)
	return true
}

// str checks a string that encoding/json writes as is: no escapes, no
// control characters, valid UTF-8 without U+2028 and U+2029 (which it
// escapes). It returns the string's bytes between the quotes.
func (c *canonicalChecker) str() ([]byte, bool) {
	if c.i >= len(c.b) || c.b[c.i] != '"' {
		return nil, false
	}
	start := c.i + 1
	for i := start; i < len(c.b); {
		// Eight bytes at a time up to the first special or non-ASCII byte
		// (the lowest marked byte of either mask is the first such byte).
		for i+8 <= len(c.b) {
			x := binary.LittleEndian.Uint64(c.b[i:])
			if m := specialMask(x) | x&0x8080808080808080; m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				break
			}
			i += 8
		}
		if i >= len(c.b) {
			break
		}
		ch := c.b[i]
		switch {
		case ch == '"':
			c.i = i + 1
			return c.b[start:i], true
		case ch < 0x20 || ch == '\\':
			return nil, false
		case ch < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(c.b[i:])
			if r == utf8.RuneError || r == '\u2028' || r == '\u2029' {
				return nil, false
			}
			i += size
		}
	}
	return nil, false
}
