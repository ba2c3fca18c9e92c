package domain

import (
	"math/rand/v2"
	"regexp"
	"testing"
)

// TestPatternsMatchTheirRegexps holds each hand-written check to the
// regular expression it replaces, on edge cases and random strings over
// an alphabet that exercises every class.
func TestPatternsMatchTheirRegexps(t *testing.T) {
	checks := []struct {
		name string
		re   *regexp.Regexp
		fn   func(string) bool
	}{
		{"action", regexp.MustCompile(`^[a-z][a-z0-9_-]*(\.[a-z][a-z0-9_-]*){1,7}$`), isAction},
		{"trace id", regexp.MustCompile(`^[0-9a-f]{32}$`), isTraceID},
		{"digest algorithm", regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`), isDigestAlgorithm},
		{"resource type", regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_.:-]*$`), isResourceType},
	}
	edge := []string{"", ".", "a", "a.", ".a", "a.b", "a..b", "a.b.c.d.e.f.g.h", "a.b.c.d.e.f.g.h.i", "A.b", "a.B",
		"a-.b_", "1a.b", "a.1b", "a.b\n", "é.b", "sha256", "-sha", "sha-", "Device", "device:x.y-z_1", ":x",
		"0123456789abcdef0123456789abcdef", "0123456789abcdef0123456789abcdeF", "0123456789abcdef0123456789abcde"}
	const alphabet = "ab09AZ._:-/ \x00é"
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		b := make([]byte, rng.IntN(40))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		edge = append(edge, string(b))
	}
	hex := "0123456789abcdefg"
	for range 20000 {
		b := make([]byte, 31+rng.IntN(3))
		for i := range b {
			b[i] = hex[rng.IntN(len(hex))]
		}
		edge = append(edge, string(b))
	}
	for _, c := range checks {
		for _, s := range edge {
			if got, want := c.fn(s), c.re.MatchString(s); got != want {
				t.Fatalf("%s(%q) = %v, the regexp says %v", c.name, s, got, want)
			}
		}
	}
}
