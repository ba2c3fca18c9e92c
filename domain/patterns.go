package domain

// The text patterns of event fields, checked byte by byte: they run for
// every recorded event, where a regular expression costs more than the
// rest of the validation. patterns_test.go holds each to its regular
// expression, which the comments give.

// isAction reports whether s matches
// ^[a-z][a-z0-9_-]*(\.[a-z][a-z0-9_-]*){1,7}$: two to eight dot-separated
// segments, each a lower-case letter followed by lower-case letters,
// digits, '_' or '-'.
func isAction(s string) bool {
	segments, start := 1, true
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case start:
			if c < 'a' || c > 'z' {
				return false
			}
			start = false
		case c == '.':
			segments++
			start = true
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '_', c == '-':
		default:
			return false
		}
	}
	return !start && segments >= 2 && segments <= 8
}

// isTraceID reports whether s matches ^[0-9a-f]{32}$.
func isTraceID(s string) bool {
	if len(s) != 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// isDigestAlgorithm reports whether s matches ^[a-z0-9][a-z0-9-]*$.
func isDigestAlgorithm(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && (c != '-' || i == 0) {
			return false
		}
	}
	return s != ""
}

// isResourceType reports whether s matches ^[A-Za-z][A-Za-z0-9_.:-]*$.
func isResourceType(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !letter && (i == 0 || (c < '0' || c > '9') && c != '_' && c != '.' && c != ':' && c != '-') {
			return false
		}
	}
	return s != ""
}
