package domain

import (
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestAppendAssignsDenseSequencesAndChains(t *testing.T) {
	drafts := []AuditEventDraft{validDraft(), validDraft(), validDraft()}
	for i := range drafts {
		drafts[i].ID[15] = byte(i + 1)
		require.NoError(t, drafts[i].Normalize("", testNow))
	}
	head := ChainHead{Sequence: 41, Hash: Hash{1}}
	events, newHead := head.Append("t1", drafts, testNow)
	require.Len(t, events, 3)
	prev := head.Hash
	for i, e := range events {
		require.Equal(t, uint64(42+i), e.Sequence)
		require.Equal(t, "t1", e.TenantID)
		require.Equal(t, e.ComputeChainHash(prev), e.ChainHash)
		prev = e.ChainHash
	}
	require.Equal(t, ChainHead{Sequence: 44, Hash: events[2].ChainHash, RecordedAt: events[2].RecordedAt}, newHead)

	// A clock that steps back does not move recorded_at back: the next
	// events are recorded at the head's time.
	more, after := newHead.Append("t1", drafts[:1], testNow.Add(-time.Hour))
	require.Equal(t, newHead.RecordedAt, more[0].RecordedAt)
	require.Equal(t, newHead.RecordedAt, after.RecordedAt)

	// Any change to a covered field changes the hash.
	e := events[1]
	orig := e.ChainHash
	e.Resource.ID = "tampered"
	require.NotEqual(t, orig, e.ComputeChainHash(events[0].ChainHash))
	e = events[1]
	e.RecordedAt = e.RecordedAt.Add(time.Microsecond)
	require.NotEqual(t, orig, e.ComputeChainHash(events[0].ChainHash))
}

func TestCanonicalBytesAreStable(t *testing.T) {
	d := validDraft()
	require.NoError(t, d.Normalize("", testNow))
	d.RecordedBy = &Recorder{Issuer: "https://idp.example", Subject: "svc-1", TokenID: "j-1", ClientID: "c-1"}
	events, _ := ChainHead{}.Append("t1", []AuditEventDraft{d}, testNow)
	// The documented canonical encodings, byte for byte: changing either
	// breaks every stored chain, so this test pins both.
	const v1 = `{"action":"device.firmware.updated","correlation":null,"details":{"a":{"y":[1,2.50,"x"],"z":true},"b":1},` +
		`"evidenceDigests":[],"governance":null,"id":"0193f3c4-0000-7000-8000-000000000001","occurredAt":"2026-11-30T11:59:00.000000Z",` +
		`"outcome":"SUCCESS","projectId":"p1","recordedAt":"2026-11-30T12:00:00.000000Z","resource":{"type":"device","id":"d1"},` +
		`"sequence":"1","subject":{"type":"USER","id":"u1","displayName":"Ada"},"tenantId":"t1","v":1}`
	const v2 = `{"action":"device.firmware.updated","correlation":null,"details":{"a":{"y":[1,2.50,"x"],"z":true},"b":1},` +
		`"evidenceDigests":[],"governance":null,"id":"0193f3c4-0000-7000-8000-000000000001","occurredAt":"2026-11-30T11:59:00.000000Z",` +
		`"outcome":"SUCCESS","projectId":"p1","recordedAt":"2026-11-30T12:00:00.000000Z",` +
		`"recordedBy":{"issuer":"https://idp.example","subject":"svc-1","tokenId":"j-1","clientId":"c-1"},"resource":{"type":"device","id":"d1"},` +
		`"sequence":"1","subject":{"type":"USER","id":"u1","displayName":"Ada"},"tenantId":"t1","v":2}`
	require.Equal(t, ChainVersionRecordedBy, events[0].ChainVersion)
	require.Equal(t, v2, string(events[0].CanonicalBytes()))

	// An event stored under version 1 encodes exactly as it always did,
	// whatever else it carries.
	old := events[0]
	old.ChainVersion = ChainVersionOriginal
	require.Equal(t, v1, string(old.CanonicalBytes()))
	old.RecordedBy = nil
	require.Equal(t, v1, string(old.CanonicalBytes()))
}

// TestChainCrossesVersions: a chain of version 1 events continued by
// version 2 events links across the boundary, and changing who recorded a
// version 2 event breaks its hash.
func TestChainCrossesVersions(t *testing.T) {
	d := validDraft()
	require.NoError(t, d.Normalize("", testNow))
	first, head := ChainHead{}.Append("t1", []AuditEventDraft{d}, testNow)
	first[0].ChainVersion, first[0].RecordedBy = ChainVersionOriginal, nil
	first[0].ChainHash = first[0].ComputeChainHash(Hash{})
	head.Hash = first[0].ChainHash

	d.ID[15] = 2
	d.RecordedBy = &Recorder{Subject: "svc-1"}
	second, _ := head.Append("t1", []AuditEventDraft{d}, testNow)
	require.Equal(t, second[0].ChainHash, second[0].ComputeChainHash(first[0].ChainHash))
	require.Equal(t, first[0].ChainHash, first[0].ComputeChainHash(Hash{}))

	forged := second[0]
	forged.RecordedBy = &Recorder{Subject: "someone-else"}
	require.NotEqual(t, second[0].ChainHash, forged.ComputeChainHash(first[0].ChainHash))
	// Fingerprints ignore the recorder: a retry with another token matches.
	other := d
	other.RecordedBy = &Recorder{Subject: "svc-1", TokenID: "refreshed"}
	require.Equal(t, d.Fingerprint(), other.Fingerprint())
}

// TestCanonicalEncoderMatchesEncodingJSON holds the hand-written encoder to
// its specification: encoding/json of canonicalEvent, HTML escaping off.
func TestCanonicalEncoderMatchesEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "Z", "0", " ", "\"", "\\", "<", ">", "&", "\n", "\t", "\x00", "\x1f", "\x7f", "é", "€", "\u2028", "\u2029", "😀", "\xff", "/"}
	str := func() string {
		var sb strings.Builder
		for range rng.IntN(12) {
			sb.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		return sb.String()
	}
	for range 2000 {
		c := canonicalEvent{
			Action: str(), ID: str(), OccurredAt: str(), Outcome: Outcome(str()), ProjectID: str(),
			Resource: Resource{Type: str(), ID: str()},
			Subject:  Subject{Type: SubjectType(str()), ID: str(), DisplayName: str()},
			Details:  json.RawMessage(`{"k":[1,"v"]}`),
		}
		if rng.IntN(2) == 0 {
			c.RecordedAt, c.Sequence, c.TenantID = str(), str(), str()
		}
		if rng.IntN(2) == 0 {
			c.Correlation = &Correlation{TraceID: str(), RequestID: str(), CausationID: str()}
		}
		if rng.IntN(2) == 0 {
			c.Governance = &Governance{Reason: str(), Ticket: str(), Risk: Risk(str()), ConfirmedBy: str()}
		}
		for range rng.IntN(3) {
			c.EvidenceDigests = append(c.EvidenceDigests, EvidenceDigest{Algorithm: str(), Value: str(), Label: str()})
		}
		c.Version = ChainVersionOriginal
		if rng.IntN(2) == 0 {
			c.Version = ChainVersionRecordedBy
			c.RecordedBy = &Recorder{Issuer: str(), Subject: str(), TokenID: str(), ClientID: str()}
		}
		ref := c
		if ref.EvidenceDigests == nil {
			ref.EvidenceDigests = []EvidenceDigest{}
		}
		want, err := marshalCanonical(ref)
		require.NoError(t, err)
		require.Equal(t, string(want), string(c.encode()))
	}
}

func BenchmarkCanonicalBytes(b *testing.B) {
	d := validDraft()
	require.NoError(b, d.Normalize("", testNow))
	events, _ := ChainHead{}.Append("t1", []AuditEventDraft{d}, testNow)
	b.ReportAllocs()
	for b.Loop() {
		_ = events[0].CanonicalBytes()
	}
}

// TestAppendCanonicalMatchesStringForm: the event encoder, which formats
// times, ids and sequences in place, writes the bytes of the reference
// form built from strings (held to encoding/json above).
func TestAppendCanonicalMatchesStringForm(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	d := validDraft()
	require.NoError(t, d.Normalize("", testNow))
	for i := range 500 {
		d.ID[i%16] = byte(rng.IntN(256))
		d.OccurredAt = time.Unix(rng.Int64N(4e9), rng.Int64N(1e9)).In(time.FixedZone("x", 3600*rng.IntN(12)))
		events, _ := ChainHead{Sequence: rng.Uint64N(1 << 62)}.Append("t1", []AuditEventDraft{d}, d.OccurredAt.Add(time.Duration(rng.IntN(1e9))))
		e := events[0]
		if i%3 == 0 {
			e.ChainVersion, e.RecordedBy = ChainVersionOriginal, nil
		} else if i%3 == 1 {
			e.RecordedBy = &Recorder{Issuer: "i", Subject: "s\u2028", TokenID: "t", ClientID: "c"}
		}
		ref := canonicalEvent{
			Action: e.Action, Correlation: e.Correlation, Details: e.Details, EvidenceDigests: e.EvidenceDigests,
			Governance: e.Governance, ID: e.ID.String(), OccurredAt: formatTime(e.OccurredAt), Outcome: e.Outcome,
			ProjectID: e.ProjectID, RecordedAt: formatTime(e.RecordedAt), RecordedBy: e.RecordedBy, Resource: e.Resource,
			Sequence: strconv.FormatUint(e.Sequence, 10), Subject: e.Subject, TenantID: e.TenantID, Version: e.ChainVersion,
		}
		if ref.Version < ChainVersionRecordedBy {
			ref.Version, ref.RecordedBy = ChainVersionOriginal, nil
		}
		require.Equal(t, string(ref.encode()), string(e.CanonicalBytes()))
		h, _ := e.ChainHashWith(Hash{1}, make([]byte, 3))
		require.Equal(t, e.ComputeChainHash(Hash{1}), h)
	}
}

func BenchmarkChainHashWith(b *testing.B) {
	d := validDraft()
	require.NoError(b, d.Normalize("", testNow))
	events, _ := ChainHead{}.Append("t1", []AuditEventDraft{d}, testNow)
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		_, buf = events[0].ChainHashWith(Hash{}, buf)
	}
}

// TestAppendTimeMatchesFormat: appendTime writes the bytes of formatTime
// (time.Format with the canonical layout) as a JSON string, for random
// instants in any zone, the edges of the directly formatted years and
// years outside them.
func TestAppendTimeMatchesFormat(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	zones := []*time.Location{time.UTC, time.FixedZone("plus", 5*3600+1800), time.FixedZone("minus", -11*3600), time.Local}
	check := func(tm time.Time) {
		t.Helper()
		want := `"` + formatTime(tm) + `"`
		if got := string(appendTime([]byte("x"), tm)); got != "x"+want {
			t.Fatalf("%v: got %s, want %s", tm, got, want)
		}
	}
	for range 200_000 {
		// Anywhere from year -50 to 10050, to the nanosecond.
		sec := rng.Int64N(10100*365*86400) - 62_135_596_800 - 51*365*86400
		check(time.Unix(sec, rng.Int64N(1e9)).In(zones[rng.IntN(len(zones))]))
	}
	for _, s := range []string{
		"0000-01-01T00:00:00Z", "0001-01-01T00:00:00Z", "9999-12-31T23:59:59.999999999Z", "2024-02-29T12:34:56.000001Z",
		"2026-11-30T12:00:00.999999Z", "1969-12-31T23:59:59.9999995Z", "1970-01-01T00:00:00Z",
	} {
		tm, err := time.Parse(time.RFC3339Nano, s)
		require.NoError(t, err)
		check(tm)
		check(tm.Add(-time.Nanosecond))
		check(tm.Add(time.Nanosecond))
	}
	check(time.Time{})
	check(time.Date(-1, 12, 31, 23, 59, 59, 0, time.UTC))
	check(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC))
	check(time.Date(-12345, 6, 7, 8, 9, 10, 11000, time.UTC))
}

// appendJSONString writes what encoding/json writes (marshalCanonical)
// for random strings of plain ASCII with, now and then, a byte it must
// escape or pass on as UTF-8, at every offset.
func TestAppendJSONStringMatchesMarshal(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 18))
	special := []string{"\"", "\\", "\x00", "\x1f", "\x7f", "\x80", "\xff", "é", "\u2028", "\u2029", "<", "&", "/", " ", "~"}
	for range 200_000 {
		var b []byte
		for range rng.IntN(40) {
			if rng.IntN(30) == 0 {
				b = append(b, special[rng.IntN(len(special))]...)
			} else {
				b = append(b, byte(0x20+rng.IntN(0x5f)))
			}
		}
		want, err := marshalCanonical(string(b))
		require.NoError(t, err)
		if got := appendJSONString([]byte("x"), string(b)); string(got) != "x"+string(want) {
			t.Fatalf("%q: got %s, want %s", b, got[1:], want)
		}
	}
	for c := range 256 {
		for pos := range 9 {
			b := []byte(strings.Repeat("a", 9))
			b[pos] = byte(c)
			want, _ := marshalCanonical(string(b))
			require.Equal(t, "x"+string(want), string(appendJSONString([]byte("x"), string(b))), "%q", b)
		}
	}
}

func TestParseHash(t *testing.T) {
	h := Hash{0xab, 31: 0x01}
	got, err := ParseHash(h.String())
	require.NoError(t, err)
	require.Equal(t, h, got)
	got, err = ParseHash(strings.ToUpper(h.String()))
	require.NoError(t, err)
	require.Equal(t, h, got)
	for _, bad := range []string{"", "ab", h.String()[:63], h.String() + "0", "zz" + h.String()[2:]} {
		_, err := ParseHash(bad)
		require.Error(t, err, bad)
	}
}
