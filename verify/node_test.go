package verify_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// nodeVerifier is the Node.js example verifier (built-in modules only).
const nodeVerifier = "../examples/verify-node/verify.mjs"

// TestNodeVerifierAgrees runs examples/verify-node/verify.mjs and `aether
// verify` on the same good and tampered exports and checkpoints, and
// requires the same exit codes and the same failing lines. The exports
// hold details that a careless verifier canonicalizes wrongly (1.50, 1e2,
// -0.0, 12345678901234567890, HTML characters, U+2028, repeated keys,
// keys that sort differently in UTF-16 and UTF-8) and a chain that crosses
// from version 1 to version 2.
//
// AETHER_VERIFY_EXPORT (with AETHER_VERIFY_CHECKPOINT and AETHER_VERIFY_KEYS,
// optional) names a real export, e.g. one downloaded from a server; it is
// checked the same way, untouched and tampered.
func TestNodeVerifierAgrees(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed (make test-deps installs it)")
	}
	dir := t.TempDir()
	events := sealChain(t, nV1, 3*len(trickyDetails))
	key, retired, stranger := newSigningKey(t), newSigningKey(t), newSigningKey(t)
	keys := writeFile(t, dir, "keys.json", jwks(t, key, retired))
	last := events[len(events)-1]
	export := writeExport(t, dir, "export.ndjson", exportLines(t, events), false)
	checkpoint := writeFile(t, dir, "cp.jws", []byte(sign(t, key, "", payloadAt(last))))
	agreeOn(t, export, checkpoint, keys)

	// Checkpoints that do not verify, for the good export.
	for name, jws := range map[string]string{
		"retired key":      sign(t, retired, "", payloadAt(last)),
		"another sequence": sign(t, key, "", payloadAt(events[len(events)-2])),
		"forged":           sign(t, stranger, key.kid, payloadAt(last)),
		"unknown kid":      sign(t, stranger, "", payloadAt(last)),
		"altered payload": func() string {
			good, other := strings.Split(sign(t, key, "", payloadAt(last)), "."), strings.Split(sign(t, key, "", payloadAt(events[3])), ".")
			return good[0] + "." + other[1] + "." + good[2]
		}(),
	} {
		cp := writeFile(t, dir, "cp-"+strings.ReplaceAll(name, " ", "-")+".jws", []byte(jws))
		agree(t, name, "--export", export, "--checkpoint", cp, "--keys", keys)
	}
	// Details written in other forms than the stored one, which both must
	// re-canonicalize to the stored bytes: white space, keys out of order,
	// repeated keys, escapes where none are needed.
	lines := exportLines(t, events)
	for i, d := range map[int]string{
		0: `{ "price" : 1.50 , "neg": -12.5E-3, "negZero" : -0.0, "hundred": 1e2, "big": 12345678901234567890 }`,
		1: `{"sep":"a\u2028b\u2029c","html":"\u003cscript\u003ealert('\u0026')\u003c/script\u003e","ctl":"tab\u0009nl\u000abell\u0007del\u007f"}`,
		2: `{"z": null, "dup": 1, "dup": {"inner": 2, "inner": [3, 1.0]}}`,
		3: `{"\u00e9":"e-acute","A":false,"\ud83d\ude00":"emoji","a":true,"\uff61":"halfwidth"}`,
		4: `{"surrogate":"\ud83d\ude00 \ud800 lone","nested":{"a":"\/slash \\ backslash \" quote","b":[{"x":2,"y":1}]}}`,
	} {
		lines[i] = replaceDetails(t, lines[i], d)
	}
	reencoded := writeExport(t, dir, "reencoded.ndjson", lines, false)
	r := agree(t, "details re-encoded", "--export", reencoded)
	require.Equal(t, 0, r.code, "re-encoded details must verify: %s%s", r.stdout, r.stderr)

	// A file that starts after sequence 1.
	tail := writeExport(t, dir, "tail.ndjson.gz", exportLines(t, events[5:]), true)
	agree(t, "tail without start", "--export", tail)
	agree(t, "tail with --previous-hash", "--export", tail, "--previous-hash", events[4].ChainHash.String())

	if path := os.Getenv("AETHER_VERIFY_EXPORT"); path != "" {
		t.Logf("also checking %s", path)
		agreeOn(t, path, os.Getenv("AETHER_VERIFY_CHECKPOINT"), os.Getenv("AETHER_VERIFY_KEYS"))
	}
}

// agreeOn checks that both verifiers agree on export (plain or gzip) as it
// is, on its gzip or plain twin, and on tampered copies: cut in the middle,
// a line removed, two lines swapped, a field edited. With checkpoint and
// keys both, the checkpoint is checked too. The untouched export must
// verify.
func agreeOn(t *testing.T, export, checkpoint, keys string) {
	t.Helper()
	cpArgs := []string{}
	if checkpoint != "" && keys != "" {
		cpArgs = []string{"--checkpoint", checkpoint, "--keys", keys}
	}
	r := agree(t, "untouched "+filepath.Base(export), append([]string{"--export", export}, cpArgs...)...)
	require.Equal(t, 0, r.code, "the untouched export must verify: %s%s", r.stdout, r.stderr)

	data, err := os.ReadFile(export)
	require.NoError(t, err)
	if bytes.HasPrefix(data, []byte{0x1f, 0x8b}) {
		zr, err := gzip.NewReader(bytes.NewReader(data))
		require.NoError(t, err)
		data, err = io.ReadAll(zr)
		require.NoError(t, err)
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	if len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1]
	}
	require.GreaterOrEqual(t, len(lines), 4, "too few lines to tamper with")
	mid := len(lines) / 2
	dir := t.TempDir()
	variants := map[string][][]byte{
		"untouched": lines,
		"cut in the middle": func() [][]byte {
			c := clone(lines[:mid+1])
			c[mid] = c[mid][:len(c[mid])/2]
			return c
		}(),
		"line removed": append(clone(lines[:mid]), lines[mid+1:]...),
		"lines swapped": func() [][]byte {
			c := clone(lines)
			c[mid], c[mid+1] = c[mid+1], c[mid]
			return c
		}(),
		"resource id edited":    editLine(lines, mid, `"resource":{"type":"[^"]*","id":"`, "X"),
		"subject edited":        editLine(lines, mid-1, `"subject":{"type":"[^"]*","id":"`, "Y"),
		"recordedBy edited":     editLine(lines, len(lines)-2, `"recordedBy":{"issuer":"[^"]*","subject":"`, "Z"),
		"details number edited": editLine(lines, 1, `"details":\{"[^"]*":`, "1"),
		"tenant changed":        editLine(lines, mid+1, `"tenantId":"`, "T"),
	}
	for name, v := range variants {
		if v == nil {
			continue // the field is not in this export
		}
		for _, gz := range []bool{false, true} {
			path := writeExport(t, dir, strings.ReplaceAll(name, " ", "-")+map[bool]string{false: ".ndjson", true: ".ndjson.gz"}[gz], v, gz)
			r := agree(t, name, append([]string{"--export", path}, cpArgs...)...)
			if name != "untouched" {
				require.Equal(t, 1, r.code, "%s: %s%s", name, r.stdout, r.stderr)
			}
		}
	}
}

// agree runs both verifiers with args and requires the same exit code,
// the same failing lines and the same number of checkpoint problems; when
// both pass, the same output. It returns aether verify's result.
func agree(t *testing.T, name string, args ...string) result {
	t.Helper()
	goRes := aetherVerify(t, args...)
	nodeRes := runCmd(t, "node", append([]string{nodeVerifier}, args...)...)
	require.Equal(t, goRes.code, nodeRes.code, "%s: exit codes differ\naether verify:\n%s%s\nnode:\n%s%s",
		name, goRes.stdout, goRes.stderr, nodeRes.stdout, nodeRes.stderr)
	require.Equal(t, lineNumbers(goRes.stdout), lineNumbers(nodeRes.stdout), "%s: failing lines differ\naether verify:\n%s\nnode:\n%s",
		name, goRes.stdout, nodeRes.stdout)
	require.Equal(t, strings.Count(goRes.stdout, "\ncheckpoint: ")+strings.Count("\n"+goRes.stdout, "\ncheckpoint: "),
		strings.Count(nodeRes.stdout, "\ncheckpoint: ")+strings.Count("\n"+nodeRes.stdout, "\ncheckpoint: "),
		"%s: checkpoint problems differ\naether verify:\n%s\nnode:\n%s", name, goRes.stdout, nodeRes.stdout)
	if goRes.code == 0 {
		require.Equal(t, goRes.stdout, nodeRes.stdout, "%s: the summaries differ", name)
	}
	return goRes
}

// lineNumbers returns the line numbers of the line problems printed.
func lineNumbers(out string) []string {
	var got []string
	for _, p := range problemLines(out) {
		got = append(got, p[:strings.IndexByte(p, ':')])
	}
	return got
}

func clone(lines [][]byte) [][]byte { return append([][]byte(nil), lines...) }

// editLine returns lines with line i changed: ins inserted after the first
// match of the regular expression at, or nil when there is none.
func editLine(lines [][]byte, i int, at, ins string) [][]byte {
	loc := regexp.MustCompile(at).FindIndex(lines[i])
	if loc == nil {
		return nil
	}
	c := clone(lines)
	l := append([]byte(nil), lines[i][:loc[1]]...)
	l = append(l, ins...)
	c[i] = append(l, lines[i][loc[1]:]...)
	return c
}

// replaceDetails returns line with its details replaced by details.
func replaceDetails(t *testing.T, line []byte, details string) []byte {
	start := bytes.Index(line, []byte(`,"details":`))
	end := bytes.Index(line, []byte(`,"chainHash":`))
	require.True(t, start > 0 && end > start, "no details in %s", line)
	out := append([]byte(nil), line[:start+len(`,"details":`)]...)
	out = append(out, details...)
	return append(out, line[end:]...)
}
