package verify

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"math/bits"
	"unicode/utf8"
	"unsafe"
)

// scanner reads JSON values from one line without reflection. It keeps the
// raw text of what it skips, so that details can be re-canonicalized from
// the exact numbers the line holds.
type scanner struct {
	b []byte
	i int
}

// errSyntax is what any malformed input yields; the line's problem names
// the field being read.
var errSyntax = errors.New("malformed JSON")

// peek returns the next byte after white space, or 0 at the end.
func (s *scanner) peek() byte {
	for s.i < len(s.b) {
		switch c := s.b[s.i]; c {
		case ' ', '\t', '\r', '\n':
			s.i++
		default:
			return c
		}
	}
	return 0
}

// consume skips white space and the byte c, reporting whether it was there.
func (s *scanner) consume(c byte) bool {
	if s.peek() == c {
		s.i++
		return true
	}
	return false
}

// literal consumes lit (true, false, null) at the current position.
func (s *scanner) literal(lit string) bool {
	if s.peek() == lit[0] && len(s.b)-s.i >= len(lit) && string(s.b[s.i:s.i+len(lit)]) == lit {
		s.i += len(lit)
		return true
	}
	return false
}

// lit consumes text if the input continues with it exactly (no white
// space skipped), reporting whether it did.
func (s *scanner) lit(text string) bool {
	if len(s.b)-s.i >= len(text) && string(s.b[s.i:s.i+len(text)]) == text {
		s.i += len(text)
		return true
	}
	return false
}

// rawString consumes a string and returns its text between the quotes,
// still escaped, and whether it holds an escape.
func (s *scanner) rawString() (raw []byte, escaped bool, err error) {
	raw, escaped, _, err = s.scanString()
	return raw, escaped, err
}

// scanString is rawString that also reports whether the text is all
// ASCII (then valid UTF-8, with no need to check).
func (s *scanner) scanString() (raw []byte, escaped, ascii bool, err error) {
	if s.peek() != '"' {
		return nil, false, false, errSyntax
	}
	start := s.i + 1
	i := start
	var high uint64 // the bytes scanned, or-ed: bit 7 set if one is not ASCII
	for {
		// Eight bytes at a time; the lowest bit of the mask marks the first
		// special byte exactly.
		for i+8 <= len(s.b) {
			x := binary.LittleEndian.Uint64(s.b[i:])
			if m := specialMask(x); m != 0 {
				n := bits.TrailingZeros64(m) >> 3
				high |= x & (1<<(8*n) - 1) // the bytes before it
				i += n
				break
			}
			high |= x
			i += 8
		}
		if i >= len(s.b) {
			return nil, false, false, errSyntax
		}
		switch c := s.b[i]; {
		case c == '"':
			s.i = i + 1
			return s.b[start:i], escaped, high&0x8080808080808080 == 0, nil
		case c == '\\':
			escaped = true
			i += 2
		case c < 0x20:
			return nil, false, false, errSyntax
		default: // the last bytes of the line, fewer than eight
			high |= uint64(c)
			i++
		}
	}
}

// specialMask has the high bit of each byte of x set that is a quote, a
// backslash or a control character (below 0x20): the bytes a string scan
// stops at. Bytes above a special one may be marked too (a borrow
// carries up), but the lowest marked byte is always the first special
// one, and no byte is marked when none is special.
func specialMask(x uint64) uint64 {
	const (
		ones  = 0x0101010101010101
		highs = 0x8080808080808080
	)
	quote := x ^ (ones * '"')
	backslash := x ^ (ones * '\\')
	less := (x - ones*0x20) &^ x          // a byte below 0x20 (hasless)
	zq := (quote - ones) &^ quote         // a zero byte: a quote
	zb := (backslash - ones) &^ backslash // a zero byte: a backslash
	return (less | zq | zb) & highs
}

// special8 reports whether any of the eight bytes of x is a quote, a
// backslash or a control character (below 0x20).
func special8(x uint64) bool { return specialMask(x) != 0 }

// str consumes a string and returns its value as encoding/json decodes it
// (invalid UTF-8 and lone surrogates become U+FFFD). A string without
// escapes points into the line, which is never written afterwards (see
// chunk), so that reading an event allocates no strings.
func (s *scanner) str() (string, error) {
	start := s.i
	raw, escaped, ascii, err := s.scanString()
	if err != nil {
		return "", err
	}
	if !escaped && (ascii || utf8.Valid(raw)) {
		if len(raw) == 0 {
			return "", nil
		}
		return unsafe.String(&raw[0], len(raw)), nil
	}
	var v string
	if err := json.Unmarshal(s.b[start:s.i], &v); err != nil {
		return "", errSyntax
	}
	return v, nil
}

// fields calls field for each key of the object whose opening brace was
// just consumed, with the scanner at the key's value; field must consume
// that value. It consumes the closing brace.
func (s *scanner) fields(field func(key []byte) error) error {
	if s.consume('}') {
		return nil
	}
	for {
		key, escaped, err := s.rawString()
		if err != nil {
			return err
		}
		if escaped { // no key of the event shape has an escape
			var k string
			if json.Unmarshal(s.b[s.i-len(key)-2:s.i], &k) != nil {
				return errSyntax
			}
			key = []byte(k)
		}
		if !s.consume(':') {
			return errSyntax
		}
		if err := field(key); err != nil {
			return err
		}
		if s.consume('}') {
			return nil
		}
		if !s.consume(',') {
			return errSyntax
		}
	}
}

// skip consumes any value and returns its raw text.
func (s *scanner) skip() ([]byte, error) {
	c := s.peek()
	start := s.i
	switch {
	case c == '{' || c == '[':
		depth := 0
		for i := s.i; i < len(s.b); i++ {
			switch s.b[i] {
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					s.i = i + 1
					return s.b[start:s.i], nil
				}
			case '"':
				s.i = i
				if _, _, err := s.rawString(); err != nil {
					return nil, err
				}
				i = s.i - 1
			}
		}
		return nil, errSyntax
	case c == '"':
		_, _, err := s.rawString()
		return s.b[start:s.i], err
	case c == 't':
		if s.literal("true") {
			return s.b[start:s.i], nil
		}
	case c == 'f':
		if s.literal("false") {
			return s.b[start:s.i], nil
		}
	case c == 'n':
		if s.literal("null") {
			return s.b[start:s.i], nil
		}
	case c == '-' || ('0' <= c && c <= '9'):
		n := numberLen(s.b[s.i:])
		if n == 0 {
			return nil, errSyntax
		}
		s.i += n
		return s.b[start:s.i], nil
	}
	return nil, errSyntax
}

// numberLen returns the length of the JSON number at the start of b, 0 if
// there is none.
func numberLen(b []byte) int {
	i := 0
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
	default:
		return 0
	}
	if i < len(b) && b[i] == '.' {
		i++
		d := i
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		if i == d {
			return 0
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		d := i
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		if i == d {
			return 0
		}
	}
	return i
}
