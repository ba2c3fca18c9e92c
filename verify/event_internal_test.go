package verify

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/aetheriot/aether-audit/domain"
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

// scanner.details returns what skip and canonicalDetails return for the
// same line (the canonical details, or the same error), and leaves the
// scanner at the same place, for canonical and non-canonical details.
func TestDetailsMatchesSkipAndCanonicalize(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	// Mostly plain pieces; the last ones (escapes, U+2028, invalid bytes)
	// more rarely.
	pieces := []string{`a`, `b`, `é`, `<&>`, `12345678`, ``, `zz`, "\u00e9t\u00e9", `b0`, "\u2028", `\"`, `\n`, `\u003c`, "\x01", "\xff"}
	str := func() string {
		var b []byte
		for range rng.IntN(4) {
			n := 9
			if rng.IntN(20) == 0 {
				n = len(pieces)
			}
			b = append(b, pieces[rng.IntN(n)]...)
		}
		return `"` + string(b) + `"`
	}
	var value func(depth int) string
	value = func(depth int) string {
		switch k := rng.IntN(9); {
		case k < 2 && depth < 18:
			out := "{"
			for i := range rng.IntN(4) {
				if i > 0 {
					out += ","
				}
				if rng.IntN(10) == 0 {
					out += " "
				}
				out += str() + ":" + value(depth+1)
			}
			return out + "}"
		case k < 3 && depth < 18:
			out := "["
			for i := range rng.IntN(4) {
				if i > 0 {
					out += ","
				}
				out += value(depth + 1)
			}
			return out + "]"
		case k < 5:
			return str()
		case k < 6:
			if rng.IntN(20) == 0 {
				return []string{"01", "1.", "-", "nul", "tru"}[rng.IntN(5)]
			}
			return []string{"0", "-0.0", "1.50", "1e2", "12345678901234567890"}[rng.IntN(5)]
		default:
			return []string{"true", "false", "null"}[rng.IntN(3)]
		}
	}
	fixed := []string{`null`, `{}`, `{"a":1}`, `{"b":1,"a":2}`, `{"a":1,"a":2}`, `{"a": 1}`, `[1]`, `"x"`, `{"a":{"b":[1,{"c":null}]}}`,
		`{"a":"` + strings.Repeat("x", domain.MaxDetailsBytes) + `"}`, `{"a":"` + strings.Repeat("x", domain.MaxDetailsBytes-8) + `"}`,
		`{"a":1`, `{"a":"x`, `{"a":` + strings.Repeat("[", 20) + strings.Repeat("]", 20) + `}`}
	for i := range 30_000 {
		d := value(0)
		if i < len(fixed) {
			d = fixed[i]
		} else if i%2 == 0 {
			d = "{" + strings.TrimPrefix(d, "{")
			if d[len(d)-1] != '}' {
				d = `{"k":` + d + `}`
			}
		}
		line := []byte(`{"details":` + d + `,"z":1}`)
		old := scanner{b: line, i: len(`{"details":`)}
		var want json.RawMessage
		raw, wantErr := old.skip()
		if wantErr == nil {
			want, wantErr = canonicalDetails(raw)
		}
		s := scanner{b: line, i: len(`{"details":`)}
		got, err := s.details()
		if string(got) != string(want) || (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) ||
			(err == nil && s.i != old.i) {
			t.Fatalf("%s: got %s, %v at %d; want %s, %v at %d", line, got, err, s.i, want, wantErr, old.i)
		}
	}
}

// parseUTCTime returns exactly time.Date's Time (the same value, not only
// the same instant) over random dates of every year it reads, and rejects
// the days a month does not have, as time.Parse does.
func TestParseUTCTimeRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for range 300_000 {
		year, month, day := rng.IntN(10000), 1+rng.IntN(12), 1+rng.IntN(31)
		hour, minute, sec, nsec := rng.IntN(24), rng.IntN(60), rng.IntN(60), rng.IntN(1e9)
		s := fmt.Sprintf("%04d-%02d-%02dT%02d:%02d:%02d.%09dZ", year, month, day, hour, minute, sec, nsec)
		got, ok := parseUTCTime([]byte(s))
		want := time.Date(year, time.Month(month), day, hour, minute, sec, nsec, time.UTC)
		_, perr := time.Parse(time.RFC3339, s)
		if ok != (perr == nil) || (ok && got != want) {
			t.Fatalf("%s: got %v %v (%#v), want %v (%#v), time.Parse %v", s, got, ok, got, want, want, perr)
		}
	}
}

// parseUUID agrees with uuid.Parse on random hyphenated UUIDs, with bad
// digits and dashes, and on the other forms uuid.Parse reads.
func TestParseUUID(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	check := func(s string) {
		t.Helper()
		got, err := parseUUID(s)
		want, werr := uuid.Parse(s)
		if got != want || (err == nil) != (werr == nil) || (err != nil && err.Error() != werr.Error()) {
			t.Fatalf("%q: got %v %v, want %v %v", s, got, err, want, werr)
		}
	}
	for range 100_000 {
		var u uuid.UUID
		for i := range u {
			u[i] = byte(rng.IntN(256))
		}
		b := []byte(u.String())
		switch rng.IntN(4) {
		case 0:
			b = []byte(strings.ToUpper(string(b)))
		case 1:
			b[rng.IntN(len(b))] = "0aF-gG:x \x00\xff"[rng.IntN(11)]
		}
		check(string(b))
	}
	for _, s := range []string{"", "urn:uuid:6ba7b810-9dad-11d1-80b4-00c04fd430c8", "{6ba7b810-9dad-11d1-80b4-00c04fd430c8}",
		"6ba7b8109dad11d180b400c04fd430c8", "6ba7b810-9dad-11d1-80b4-00c04fd430c"} {
		check(s)
	}
}

// readChainHash decodes what hex.Decode decodes (either case) and
// rejects what it rejects.
func TestReadChainHash(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 20))
	alphabet := "0123456789abcdefABCDEF"
	for i := range 50_000 {
		b := make([]byte, 64)
		for j := range b {
			b[j] = alphabet[rng.IntN(len(alphabet))]
		}
		if i%2 == 0 {
			b[rng.IntN(64)] = "gG/:@`x \xff"[rng.IntN(9)]
		}
		var want domain.Hash
		_, werr := hex.Decode(want[:], b)
		var l line
		s := scanner{b: []byte(`"` + string(b) + `"`)}
		err := readChainHash(&s, &l)
		if (err == nil) != (werr == nil) || (err == nil && l.claimed != want) {
			t.Fatalf("%s: got %x %v, hex.Decode %x %v", b, l.claimed, err, want, werr)
		}
	}
}
