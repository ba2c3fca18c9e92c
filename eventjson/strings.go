package eventjson

import (
	"unicode/utf8"

	"github.com/google/uuid"
)

const hexDigits = "0123456789abcdef"

func appendHex(b []byte, src []byte) []byte {
	for _, c := range src {
		b = append(b, hexDigits[c>>4], hexDigits[c&0x0f])
	}
	return b
}

// appendJSONUUID appends u as its MarshalText form, a quoted 36-character
// lower-case hex string.
func appendJSONUUID(b []byte, u uuid.UUID) []byte {
	b = append(b, '"')
	b = appendHex(b, u[0:4])
	b = append(b, '-')
	b = appendHex(b, u[4:6])
	b = append(b, '-')
	b = appendHex(b, u[6:8])
	b = append(b, '-')
	b = appendHex(b, u[8:10])
	b = append(b, '-')
	b = appendHex(b, u[10:16])
	return append(b, '"')
}

// marshalSafe[c] is true for the ASCII bytes encoding/json's Marshal copies
// into a string unchanged (it escapes control characters, '"', '\\' and,
// for HTML safety, '<', '>' and '&').
var marshalSafe = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// appendMarshalString appends s as a JSON string escaped exactly as
// encoding/json's Marshal does: HTML characters and U+2028/U+2029 as \u
// escapes, invalid UTF-8 as \ufffd, \b \f \n \r \t short escapes, other
// control characters as \u00xx. (appendJSONString in chain.go is the
// canonical, non-HTML-escaping form and is not interchangeable.)
func appendMarshalString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if marshalSafe[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0x0f])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0x0f])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
