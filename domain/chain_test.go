package domain

import (
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
