package server

import (
	"strings"
	"unicode/utf8"
)

// Bounds of the early shape check of large request bodies.
const (
	// rawShapeMinBody is the body size from which a POST's document is
	// checked before its JSON is decoded: below it, decoding costs less
	// than checking twice.
	rawShapeMinBody = 64 << 10
	// rawShapePrefix is how much of the document the early check decodes:
	// a document refused for its shape shows it in its first selections.
	rawShapePrefix = 32 << 10
)

// rawShapeRefusal checks the start of the "query" member of a large
// GraphQL-over-HTTP JSON body against operationShape's limits before the
// body is decoded, so that refusing a document of thousands of aliases
// costs a scan of its first kilobytes rather than decoding all of it. It
// returns the refusal, or "" when the body is small, is not the JSON it
// expects, or the start of its document is within the limits (the document
// is then checked in full once decoded). Only refusals that a longer text
// could not undo are taken: too many selections in a set or in all, and
// nesting (a repeated verifyAuditChain is left to the full check).
func rawShapeRefusal(body []byte, max int) string {
	if len(body) < rawShapeMinBody {
		return ""
	}
	raw, ok := rawQueryMember(body)
	if !ok {
		return ""
	}
	return scanShape(unescapePrefix(raw, rawShapePrefix), max, false)
}

// rawQueryMember returns the raw (still escaped) text of the string value
// of the top-level "query" member of a JSON object, up to the end of body
// (the end of the string is not looked for).
func rawQueryMember(b []byte) ([]byte, bool) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil, false
	}
	i++
	for {
		i = skipSpace(b, i)
		if i >= len(b) || b[i] != '"' {
			return nil, false
		}
		keyStart := i + 1
		i = skipJSONString(b, i)
		if i < 0 {
			return nil, false
		}
		key := b[keyStart : i-1]
		i = skipSpace(b, i)
		if i >= len(b) || b[i] != ':' {
			return nil, false
		}
		i = skipSpace(b, i+1)
		if string(key) == "query" {
			if i >= len(b) || b[i] != '"' {
				return nil, false
			}
			return b[i+1:], true
		}
		if i = skipJSONValue(b, i, 0); i < 0 {
			return nil, false
		}
		i = skipSpace(b, i)
		if i >= len(b) || b[i] != ',' {
			return nil, false
		}
		i++
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipJSONString returns the index after the JSON string starting at b[i]
// (a '"'), or -1.
func skipJSONString(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return -1
}

// skipJSONValue returns the index after the JSON value starting at b[i],
// or -1 (for anything unexpected, or nesting past 64).
func skipJSONValue(b []byte, i, depth int) int {
	if i >= len(b) || depth > 64 {
		return -1
	}
	switch b[i] {
	case '"':
		return skipJSONString(b, i)
	case '{', '[':
		end := byte('}')
		if b[i] == '[' {
			end = ']'
		}
		i = skipSpace(b, i+1)
		if i < len(b) && b[i] == end {
			return i + 1
		}
		for {
			if end == '}' {
				if i = skipJSONString(b, skipSpace(b, i)); i < 0 {
					return -1
				}
				if i = skipSpace(b, i); i >= len(b) || b[i] != ':' {
					return -1
				}
				i++
			}
			if i = skipJSONValue(b, skipSpace(b, i), depth+1); i < 0 {
				return -1
			}
			i = skipSpace(b, i)
			if i >= len(b) {
				return -1
			}
			if b[i] == end {
				return i + 1
			}
			if b[i] != ',' {
				return -1
			}
			i++
		}
	default: // a number, true, false or null
		j := i
		for j < len(b) && !strings.ContainsRune(",}] \t\n\r", rune(b[j])) {
			j++
		}
		if j == i {
			return -1
		}
		return j
	}
}

// unescapePrefix decodes the JSON string text raw (without its opening
// quote) up to its closing quote or about max bytes. \uXXXX escapes of
// non-ASCII characters become a letter: what the shape check reads of
// them (names) is the same.
func unescapePrefix(raw []byte, max int) string {
	var sb strings.Builder
	sb.Grow(min(len(raw), max))
	for i := 0; i < len(raw) && sb.Len() < max; i++ {
		c := raw[i]
		switch {
		case c == '"':
			return sb.String()
		case c != '\\':
			sb.WriteByte(c)
			continue
		}
		if i+1 >= len(raw) {
			break
		}
		i++
		switch raw[i] {
		case 'n':
			sb.WriteByte('\n')
		case 't':
			sb.WriteByte('\t')
		case 'r':
			sb.WriteByte('\r')
		case 'b', 'f':
			sb.WriteByte(' ')
		case 'u':
			if i+4 >= len(raw) {
				return sb.String()
			}
			var r rune
			for _, h := range raw[i+1 : i+5] {
				r <<= 4
				switch {
				case h >= '0' && h <= '9':
					r |= rune(h - '0')
				case h >= 'a' && h <= 'f':
					r |= rune(h-'a') + 10
				case h >= 'A' && h <= 'F':
					r |= rune(h-'A') + 10
				default:
					return sb.String()
				}
			}
			i += 4
			if r < utf8.RuneSelf {
				sb.WriteByte(byte(r))
			} else {
				sb.WriteByte('x')
			}
		default: // \" \\ \/
			sb.WriteByte(raw[i])
		}
	}
	return sb.String()
}
