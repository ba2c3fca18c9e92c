package eventjson

// maxVerbatimDepth bounds the nesting rawJSONVerbatim follows; deeper
// details take the encoding/json path.
const maxVerbatimDepth = 200

// rawJSONVerbatim reports whether encoding/json's Marshal would copy raw
// unchanged: it is one valid JSON value with no white space outside strings,
// no '<', '>' or '&' and no U+2028/U+2029. It may answer false for values
// Marshal copies unchanged (deep nesting); it never answers true for one
// Marshal rejects or rewrites.
func rawJSONVerbatim(raw []byte) bool {
	v := verbatimScanner{raw: raw}
	return v.value(0) && v.i == len(raw)
}

type verbatimScanner struct {
	raw []byte
	i   int
}

func (v *verbatimScanner) value(depth int) bool {
	if v.i >= len(v.raw) {
		return false
	}
	switch c := v.raw[v.i]; {
	case c == '{':
		if depth >= maxVerbatimDepth {
			return false
		}
		v.i++
		if v.i < len(v.raw) && v.raw[v.i] == '}' {
			v.i++
			return true
		}
		for {
			if v.i >= len(v.raw) || v.raw[v.i] != '"' || !v.str() {
				return false
			}
			if v.i >= len(v.raw) || v.raw[v.i] != ':' {
				return false
			}
			v.i++
			if !v.value(depth + 1) {
				return false
			}
			if v.i >= len(v.raw) {
				return false
			}
			switch v.raw[v.i] {
			case ',':
				v.i++
			case '}':
				v.i++
				return true
			default:
				return false
			}
		}
	case c == '[':
		if depth >= maxVerbatimDepth {
			return false
		}
		v.i++
		if v.i < len(v.raw) && v.raw[v.i] == ']' {
			v.i++
			return true
		}
		for {
			if !v.value(depth + 1) {
				return false
			}
			if v.i >= len(v.raw) {
				return false
			}
			switch v.raw[v.i] {
			case ',':
				v.i++
			case ']':
				v.i++
				return true
			default:
				return false
			}
		}
	case c == '"':
		return v.str()
	case c == '-' || ('0' <= c && c <= '9'):
		return v.number()
	case c == 't':
		return v.literal("true")
	case c == 'f':
		return v.literal("false")
	case c == 'n':
		return v.literal("null")
	}
	return false
}

func (v *verbatimScanner) literal(lit string) bool {
	if len(v.raw)-v.i < len(lit) || string(v.raw[v.i:v.i+len(lit)]) != lit {
		return false
	}
	v.i += len(lit)
	return true
}

// str scans a string starting at its opening quote.
func (v *verbatimScanner) str() bool {
	raw := v.raw
	i := v.i + 1
	for i < len(raw) {
		c := raw[i]
		switch {
		case c == '"':
			v.i = i + 1
			return true
		case c < 0x20 || c == '<' || c == '>' || c == '&':
			return false
		case c == '\\':
			if i+1 >= len(raw) {
				return false
			}
			switch raw[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(raw) {
					return false
				}
				for _, h := range raw[i+2 : i+6] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return false
					}
				}
				i += 6
			default:
				return false
			}
		case c == 0xE2:
			// U+2028 and U+2029 are E2 80 A8 and E2 80 A9.
			if i+2 < len(raw) && raw[i+1] == 0x80 && (raw[i+2] == 0xA8 || raw[i+2] == 0xA9) {
				return false
			}
			i++
		default:
			i++
		}
	}
	return false
}

func (v *verbatimScanner) number() bool {
	raw := v.raw
	i := v.i
	if raw[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(raw) && '0' <= raw[i] && raw[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if i >= len(raw) {
		return false
	}
	if raw[i] == '0' {
		i++
	} else if digits() == 0 {
		return false
	}
	if i < len(raw) && raw[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(raw) && (raw[i] == 'e' || raw[i] == 'E') {
		i++
		if i < len(raw) && (raw[i] == '+' || raw[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	v.i = i
	return true
}
