package verify

import (
	"encoding/binary"
	"math/bits"
	"math/rand/v2"
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

// specialMask's lowest marked byte is the first special byte of random
// words, and scanString finds the closing quote and reports ASCII
// exactly.
func TestSpecialMaskFirstByte(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte{'a', '"', '\\', 0, 0x1f, 0x20, 0x21, 0x5b, 0x5d, 0x7f, 0x80, 0xff, 0xe2, 0x9f, 0xa0, 'z'}
	for range 200_000 {
		var b [8]byte
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		first := 8
		for i, c := range b {
			if c == '"' || c == '\\' || c < 0x20 {
				first = i
				break
			}
		}
		m := specialMask(binary.LittleEndian.Uint64(b[:]))
		if got := bits.TrailingZeros64(m) >> 3; got != first {
			t.Fatalf("%q: first special byte at %d, mask says %d", b, first, got)
		}
	}
	for range 20_000 {
		n := rng.IntN(40)
		text := make([]byte, n)
		ascii := true
		for i := range text {
			text[i] = alphabet[rng.IntN(len(alphabet))]
			if text[i] == '"' || text[i] == '\\' || text[i] < 0x20 {
				text[i] = 'q'
			}
			ascii = ascii && text[i] < 0x80
		}
		line := append(append(append([]byte(`"`), text...), `",`...), make([]byte, rng.IntN(10))...)
		s := scanner{b: line}
		raw, escaped, gotASCII, err := s.scanString()
		if err != nil || string(raw) != string(text) || escaped || gotASCII != ascii || s.i != n+2 {
			t.Fatalf("%q: got %q %v %v %v at %d", line, raw, escaped, gotASCII, err, s.i)
		}
	}
}
