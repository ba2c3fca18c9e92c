package store

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/store/dbsqlc"
)

// TestEventFromRowWithParts: an event of a batch read takes its
// governance, correlation and recorder from the batch's arrays and, without
// evidence digests, allocates nothing of its own (four allocations per
// event before: the three parts and the event itself, moved to the heap by
// the digests' decoding); with digests it decodes them as before; and the
// values equal those of the row scanner's events.
func TestEventFromRowWithParts(t *testing.T) {
	risk := "HIGH"
	row := dbsqlc.AuditEvent{TenantID: "t", ProjectID: "p", Sequence: 7, Action: "doc.read",
		OccurredAt: time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC), RecordedAt: time.Date(2026, 12, 3, 8, 0, 1, 0, time.UTC),
		SubjectType: "USER", SubjectID: "u", ResourceType: "doc", ResourceID: "d", Outcome: "SUCCESS",
		GovernanceRisk: &risk, GovernanceReason: "why", TraceID: "trace", EvidenceDigests: []byte("[]"),
		Details: []byte(`{"n":1}`), InputFingerprint: make([]byte, 32), ChainHash: make([]byte, 32),
		ChainVersion: int16(domain.ChainVersionRecordedBy), RecordedByIssuer: "iss", RecordedBySubject: "sub"}
	want, err := auditEventFromRow(&row)
	require.NoError(t, err)
	parts := newEventParts(1000)
	got, err := auditEventFromRowIn(&row, parts)
	require.NoError(t, err)
	require.Equal(t, want, got)
	require.NotNil(t, got.Governance)
	require.NotNil(t, got.Correlation)
	require.NotNil(t, got.RecordedBy)

	events := make([]domain.AuditEvent, 0, 200)
	allocs := testing.AllocsPerRun(100, func() {
		e, _ := auditEventFromRowIn(&row, parts)
		events = append(events[:len(events)%100], e)
	})
	require.Less(t, allocs, 0.1, "allocations per event")
	first := take(parts.recorders())
	require.NotSame(t, first, take(parts.recorders()), "each event its own part")

	row.EvidenceDigests = []byte(`[{"algorithm":"sha256","value":"ab","label":"x"}]`)
	got, err = auditEventFromRowIn(&row, parts)
	require.NoError(t, err)
	require.Equal(t, []domain.EvidenceDigest{{Algorithm: "sha256", Value: "ab", Label: "x"}}, got.EvidenceDigests)
}
