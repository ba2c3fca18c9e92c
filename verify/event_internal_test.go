package verify

import (
	"testing"
	"time"
)

// parseUTCTime agrees with time.Parse(time.RFC3339, ...) wherever it
// accepts a time.
func TestParseUTCTime(t *testing.T) {
	for _, s := range []string{
		"2026-11-30T12:00:00Z", "2026-11-30T12:00:00.1Z", "2026-11-30T12:00:00.123456Z", "2026-11-30T12:00:00.123456789Z",
		"2024-02-29T23:59:59.999999999Z", "0001-01-01T00:00:00Z", "9999-12-31T23:59:59.5Z",
		"2025-02-29T00:00:00Z", "2026-13-01T00:00:00Z", "2026-11-30T24:00:00Z", "2026-11-30T12:00:60Z",
		"2026-11-30T12:00:00.Z", "2026-11-30T12:00:00.1234567890Z", "2026-11-30 12:00:00Z", "2026-11-30T12:00:00+01:00",
		"2026-11-30T12:00:00,5Z", "2026-11-30T12:00:0aZ", "2026-11-31T12:00:00Z",
	} {
		got, ok := parseUTCTime([]byte(s))
		want, err := time.Parse(time.RFC3339, s)
		if ok && (err != nil || !got.Equal(want)) {
			t.Errorf("%s: got %v, time.Parse %v, %v", s, got, want, err)
		}
		if !ok && err == nil && s[len(s)-1] == 'Z' && s[10] == 'T' {
			t.Logf("%s: left to time.Parse", s)
		}
	}
}

// special8 finds every quote, backslash and control character (false
// positives only slow the scan down).
func TestSpecial8(t *testing.T) {
	for pos := range 8 {
		for c := range 256 {
			var b [8]byte
			for i := range b {
				b[i] = 'a'
			}
			b[pos] = byte(c)
			x := uint64(0)
			for i := 7; i >= 0; i-- {
				x = x<<8 | uint64(b[i])
			}
			want := c == '"' || c == '\\' || c < 0x20
			if got := special8(x); want && !got {
				t.Errorf("byte %#x at %d: not found", c, pos)
			} else if !want && got {
				t.Errorf("byte %#x at %d: false positive", c, pos)
			}
		}
	}
}
