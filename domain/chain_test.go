package domain

import (
	"encoding/json"
	"math/rand/v2"
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
	require.Equal(t, ChainHead{Sequence: 44, Hash: events[2].ChainHash}, newHead)

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
	events, _ := ChainHead{}.Append("t1", []AuditEventDraft{d}, testNow)
	// The documented canonical encoding, byte for byte: changing it breaks
	// every stored chain, so this test pins it.
	const want = `{"action":"device.firmware.updated","correlation":null,"details":{"a":{"y":[1,2.50,"x"],"z":true},"b":1},` +
		`"evidenceDigests":[],"governance":null,"id":"0193f3c4-0000-7000-8000-000000000001","occurredAt":"2026-11-30T11:59:00.000000Z",` +
		`"outcome":"SUCCESS","projectId":"p1","recordedAt":"2026-11-30T12:00:00.000000Z","resource":{"type":"device","id":"d1"},` +
		`"sequence":"1","subject":{"type":"USER","id":"u1","displayName":"Ada"},"tenantId":"t1","v":1}`
	require.Equal(t, want, string(events[0].CanonicalBytes()))
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
		ref := c
		ref.Version = ChainVersion
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
