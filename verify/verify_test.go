package verify_test

import (
	"bytes"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/domain"
)

// A chain of 12 version 1 events continued by 18 version 2 events.
const nV1, nV2 = 12, 18

func TestUntouchedExportVerifies(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	events := sealChain(t, nV1, nV2)
	lines := exportLines(t, events)
	key := newSigningKey(t)
	keys := writeFile(t, dir, "keys.json", jwks(t, key))
	cp := writeFile(t, dir, "cp.jws", []byte(sign(t, key, "", payloadAt(events[len(events)-1]))))
	for _, gz := range []bool{false, true} {
		path := writeExport(t, dir, map[bool]string{false: "export.ndjson", true: "export.ndjson.gz"}[gz], lines, gz)
		r := aetherVerify(t, "--export", path)
		require.Equal(t, 0, r.code, "gzip %v: %s%s", gz, r.stdout, r.stderr)
		require.Contains(t, r.stdout, "sequences 1 to 30, 30 chain hashes recomputed and matched")
		require.Contains(t, r.stdout, "last chain hash: "+events[len(events)-1].ChainHash.String())
		require.True(t, strings.HasSuffix(r.stdout, "result: OK, the export verifies\n"), r.stdout)

		r = aetherVerify(t, "--export", path, "--checkpoint", cp, "--keys", keys)
		require.Equal(t, 0, r.code, "gzip %v: %s%s", gz, r.stdout, r.stderr)
		require.Contains(t, r.stdout, "checkpoint: verified: key "+key.kid+", sequence 30")
	}
}

func TestTamperedExportFails(t *testing.T) {
	t.Parallel()
	events := sealChain(t, nV1, nV2)
	edit := func(i int, f func(*domain.AuditEvent)) [][]byte {
		changed := append([]domain.AuditEvent(nil), events...)
		e := changed[i]
		if e.RecordedBy != nil {
			rb := *e.RecordedBy
			e.RecordedBy = &rb
		}
		f(&e)
		changed[i] = e
		return exportLines(t, changed)
	}
	for name, tc := range map[string]struct {
		lines func() [][]byte
		want  []string // "line:sequence" of each line problem
	}{
		"cut in the middle of the last line": {func() [][]byte {
			lines := exportLines(t, events)
			last := lines[len(lines)-1]
			lines[len(lines)-1] = last[:len(last)/2]
			return lines
		}, []string{"30:30"}},
		"last newline missing": {func() [][]byte {
			lines := exportLines(t, events)
			last := lines[len(lines)-1]
			lines[len(lines)-1] = last[:len(last)-1]
			return lines
		}, []string{"30:30"}},
		"a line removed": {func() [][]byte {
			lines := exportLines(t, events)
			return append(lines[:16:16], lines[17:]...) // sequence 17
		}, []string{"17:18"}},
		"two lines swapped": {func() [][]byte {
			lines := exportLines(t, events)
			lines[9], lines[10] = lines[10], lines[9] // sequences 10 and 11
			return lines
		}, []string{"10:11", "11:10"}},
		"resource id edited (v2)": {func() [][]byte {
			return edit(20, func(e *domain.AuditEvent) { e.Resource.ID = "dev-tampered" })
		}, []string{"21:21"}},
		"recordedBy.subject edited": {func() [][]byte {
			return edit(14, func(e *domain.AuditEvent) { e.RecordedBy.Subject = "someone-else" })
		}, []string{"15:15"}},
		"details edited (v1)": {func() [][]byte {
			return edit(3, func(e *domain.AuditEvent) { e.Details = []byte(`{"price":1.5}`) })
		}, []string{"4:4"}},
		"v1 event claims version 2": {func() [][]byte {
			return edit(5, func(e *domain.AuditEvent) { e.ChainVersion = domain.ChainVersionRecordedBy })
		}, []string{"6:6"}},
		"event edited and its own hash recomputed": {func() [][]byte {
			return edit(7, func(e *domain.AuditEvent) {
				e.Outcome = domain.OutcomeFailure
				e.ChainHash = e.ComputeChainHash(events[6].ChainHash)
			})
		}, []string{"9:9"}},
		"event moved to another project": {func() [][]byte {
			return edit(25, func(e *domain.AuditEvent) { e.ProjectID = "plant-2" })
		}, []string{"26:26", "26:26"}},
		"three lines in another tenant": {func() [][]byte {
			changed := append([]domain.AuditEvent(nil), events...)
			for i := 22; i < 25; i++ {
				changed[i].TenantID = "evil"
			}
			return exportLines(t, changed)
		}, []string{"23:23", "23:23", "24:24", "24:24", "25:25", "25:25"}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			for _, gz := range []bool{false, true} {
				path := writeExport(t, dir, "export", tc.lines(), gz)
				r := aetherVerify(t, "--export", path)
				require.Equal(t, 1, r.code, "gzip %v: %s%s", gz, r.stdout, r.stderr)
				require.Equal(t, tc.want, problemLines(r.stdout), "gzip %v: %s", gz, r.stdout)
				require.Contains(t, r.stdout, "result: FAILED")
			}
		})
	}
}

func TestCutGzipFails(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := writeExport(t, dir, "export.gz", exportLines(t, sealChain(t, nV1, nV2)), true)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, data[:len(data)*2/3], 0o644))
	r := aetherVerify(t, "--export", path)
	require.Equal(t, 1, r.code, r.stdout+r.stderr)
	require.Contains(t, r.stdout, "gzip stream is damaged or cut short")
}

func TestCheckpoints(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	events := sealChain(t, nV1, nV2)
	last := events[len(events)-1]
	export := writeExport(t, dir, "export.ndjson", exportLines(t, events), false)
	current, retired, stranger := newSigningKey(t), newSigningKey(t), newSigningKey(t)
	keys := writeFile(t, dir, "keys.json", jwks(t, current, retired))

	altered := func() string {
		jws := sign(t, current, "", payloadAt(last))
		parts := strings.Split(jws, ".")
		p := payloadAt(last)
		p.Sequence = "31"
		body, _ := jsonMarshal(p)
		parts[1] = base64.RawURLEncoding.EncodeToString(body)
		return strings.Join(parts, ".")
	}
	for name, tc := range map[string]struct {
		jws  func() string
		code int
		want string
	}{
		"good":                {func() string { return sign(t, current, "", payloadAt(last)) }, 0, "checkpoint: verified: key " + current.kid},
		"retired key in JWKS": {func() string { return sign(t, retired, "", payloadAt(last)) }, 0, "checkpoint: verified: key " + retired.kid},
		"another sequence": {func() string { return sign(t, current, "", payloadAt(events[len(events)-2])) }, 1,
			"checkpoint: covers sequence 29, the file ends at sequence 30"},
		"another hash": {func() string {
			p := payloadAt(last)
			p.ChainHash = events[3].ChainHash.String()
			return sign(t, current, "", p)
		}, 1, "checkpoint: chain hash " + events[3].ChainHash.String()},
		"another project": {func() string {
			p := payloadAt(last)
			p.ProjectID = "plant-2"
			return sign(t, current, "", p)
		}, 1, `checkpoint: for tenant/project "acme"/"plant-2"`},
		"altered payload":  {altered, 1, "checkpoint: the signature does not verify with key " + current.kid},
		"forged signature": {func() string { return sign(t, stranger, current.kid, payloadAt(last)) }, 1, "checkpoint: the signature does not verify"},
		"unknown kid":      {func() string { return sign(t, stranger, "", payloadAt(last)) }, 1, "checkpoint: unknown key id"},
		"not a JWS at all": {func() string { return "hello" }, 1, "checkpoint: not a compact JWS"},
		"signature removed": {func() string {
			jws := sign(t, current, "", payloadAt(last))
			return jws[:strings.LastIndex(jws, ".")+1]
		}, 1, "checkpoint:"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cp := writeFile(t, t.TempDir(), "cp.jws", []byte(tc.jws()))
			r := aetherVerify(t, "--export", export, "--checkpoint", cp, "--keys", keys)
			require.Equal(t, tc.code, r.code, r.stdout+r.stderr)
			require.Contains(t, r.stdout, tc.want)
			require.Empty(t, problemLines(r.stdout), "the lines themselves verify")
		})
	}
}

// TestKeysFromURL fetches the JWKS from a server, as from the service's
// /.well-known/aether/checkpoint-keys.
func TestKeysFromURL(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	events := sealChain(t, 2, 3)
	key := newSigningKey(t)
	set := jwks(t, key)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/.well-known/aether/checkpoint-keys" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(set)
	}))
	t.Cleanup(srv.Close)
	export := writeExport(t, dir, "e.ndjson", exportLines(t, events), false)
	cp := writeFile(t, dir, "cp.jws", []byte(sign(t, key, "", payloadAt(events[4]))))
	r := aetherVerify(t, "--export", export, "--checkpoint", cp, "--keys", srv.URL+"/.well-known/aether/checkpoint-keys")
	require.Equal(t, 0, r.code, r.stdout+r.stderr)
	r = aetherVerify(t, "--export", export, "--checkpoint", cp, "--keys", srv.URL+"/nope")
	require.Equal(t, 2, r.code, r.stdout+r.stderr)
	require.Contains(t, r.stderr, "404")
}

// TestStartAfterSequenceOne: a file that starts after sequence 1 chains
// from --previous-hash, or from a checkpoint's anchor after a purge.
func TestStartAfterSequenceOne(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	events := sealChain(t, nV1, nV2)
	tail := events[10:] // sequences 11 to 30
	export := writeExport(t, dir, "tail.ndjson", exportLines(t, tail), true)

	r := aetherVerify(t, "--export", export)
	require.Equal(t, 2, r.code, r.stdout+r.stderr)
	require.Contains(t, r.stderr, "--previous-hash")

	r = aetherVerify(t, "--export", export, "--previous-hash", events[9].ChainHash.String())
	require.Equal(t, 0, r.code, r.stdout+r.stderr)
	r = aetherVerify(t, "--export", export, "--previous-hash", events[8].ChainHash.String())
	require.Equal(t, 1, r.code, r.stdout+r.stderr)
	require.Equal(t, []string{"1:11"}, problemLines(r.stdout))

	key := newSigningKey(t)
	keys := writeFile(t, dir, "keys.json", jwks(t, key))
	p := payloadAt(events[len(events)-1])
	p.PurgedThroughSequence, p.AnchorHash = "10", events[9].ChainHash.String()
	cp := writeFile(t, dir, "cp.jws", []byte(sign(t, key, "", p)))
	r = aetherVerify(t, "--export", export, "--checkpoint", cp, "--keys", keys)
	require.Equal(t, 0, r.code, r.stdout+r.stderr)
	require.Contains(t, r.stdout, "anchorHash")
}

func TestBadUsageAndUnreadableInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	events := sealChain(t, 2, 2)
	export := writeExport(t, dir, "e.ndjson", exportLines(t, events), false)
	key := newSigningKey(t)
	keys := writeFile(t, dir, "keys.json", jwks(t, key))
	cp := writeFile(t, dir, "cp.jws", []byte(sign(t, key, "", payloadAt(events[3]))))
	badGzip := writeFile(t, dir, "bad.gz", []byte{0x1f, 0x8b, 0, 1, 2, 3})
	noRead := filepath.Join(dir, "no-read.ndjson")
	require.NoError(t, os.WriteFile(noRead, []byte("{}\n"), 0o000))
	for name, args := range map[string][]string{
		"no flags":                 {},
		"unknown flag":             {"--export", export, "--bogus"},
		"positional argument":      {"--export", export, "extra"},
		"missing export":           {"--export", filepath.Join(dir, "missing.ndjson")},
		"export is a folder":       {"--export", dir},
		"not gzip after all":       {"--export", badGzip},
		"checkpoint without keys":  {"--export", export, "--checkpoint", cp},
		"keys without checkpoint":  {"--export", export, "--keys", keys},
		"missing checkpoint":       {"--export", export, "--checkpoint", filepath.Join(dir, "nope.jws"), "--keys", keys},
		"missing keys":             {"--export", export, "--checkpoint", cp, "--keys", filepath.Join(dir, "nope.json")},
		"keys not a JWKS":          {"--export", export, "--checkpoint", cp, "--keys", export},
		"previous hash not hex":    {"--export", export, "--previous-hash", "xyz"},
		"previous hash too short":  {"--export", export, "--previous-hash", "abcd"},
		"keys URL that is refused": {"--export", export, "--checkpoint", cp, "--keys", "http://127.0.0.1:1/keys"},
	} {
		r := aetherVerify(t, args...)
		require.Equal(t, 2, r.code, "%s: %s%s", name, r.stdout, r.stderr)
	}
	if os.Geteuid() != 0 { // root reads anything
		r := aetherVerify(t, "--export", noRead)
		require.Equal(t, 2, r.code, r.stdout+r.stderr)
	}
}

// TestEmptyAndGarbage: an empty file or lines that are not events fail
// verification (exit 1) with the line.
func TestEmptyAndGarbage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := aetherVerify(t, "--export", writeFile(t, dir, "empty", nil))
	require.Equal(t, 1, r.code, r.stdout+r.stderr)
	require.Contains(t, r.stdout, "export: no events")

	lines := exportLines(t, sealChain(t, 2, 3))
	lines[2] = []byte("not json\n")
	r = aetherVerify(t, "--export", writeExport(t, dir, "garbage", lines, false))
	require.Equal(t, 1, r.code, r.stdout+r.stderr)
	require.Equal(t, []string{"3:3"}, problemLines(r.stdout), r.stdout)

	lines = exportLines(t, sealChain(t, 2, 3))
	lines = append(lines[:2:2], append([][]byte{[]byte("\n")}, lines[2:]...)...)
	r = aetherVerify(t, "--export", writeExport(t, dir, "blank", lines, false))
	require.Equal(t, 1, r.code, r.stdout+r.stderr)
	require.Equal(t, []string{"3:3", "4:3"}, problemLines(r.stdout), r.stdout)
	_ = bytes.MinRead
}
