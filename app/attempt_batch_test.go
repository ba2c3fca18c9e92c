package app

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/eventjson"
)

// TestAttemptBatchSharesOneBuffer: a job's payloads are written into one
// buffer, each body the event's payload as AppendWebhookPayload writes it
// alone, untouched by the payloads written after it (a buffer outgrown by
// a large event included), with a few allocations per job instead of two
// per attempt.
func TestAttemptBatchSharesOneBuffer(t *testing.T) {
	events := make([]domain.AuditEvent, 100)
	base := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	for i := range events {
		details := `{"n":` + strings.Repeat("1", 1+i%7) + `}`
		if i == 40 {
			details = `{"big":"` + strings.Repeat("x", 5000) + `"}` // outgrows the hint
		}
		events[i] = domain.AuditEvent{TenantID: "t", ProjectID: "p", Sequence: uint64(i + 1), ID: uuid.New(), Action: "doc.read",
			OccurredAt: base, RecordedAt: base, Subject: domain.Subject{Type: domain.SubjectUser, ID: "u"},
			Resource: domain.Resource{Type: "doc", ID: "d"}, Outcome: domain.OutcomeSuccess,
			Details: json.RawMessage(details), EvidenceDigests: []domain.EvidenceDigest{}}
	}
	batch := newAttemptBatch(len(events))
	bodies := make([][]byte, len(events))
	for i := range events {
		body, err := batch.payload(&events[i])
		require.NoError(t, err)
		bodies[i] = body
		batch.prepared(preparedAttempt{body: body})
	}
	for i := range events {
		want, err := eventjson.AppendWebhookPayload(nil, &events[i])
		require.NoError(t, err)
		require.Equal(t, string(want), string(bodies[i]), "payload %d", i)
		require.Equal(t, len(bodies[i]), cap(bodies[i]), "payload %d can be overwritten by an append", i)
	}

	small := events[:40]
	kept := make([]*preparedAttempt, len(small))
	allocs := testing.AllocsPerRun(20, func() {
		b := newAttemptBatch(len(small))
		for i := range small {
			body, _ := b.payload(&small[i])
			kept[i] = b.prepared(preparedAttempt{body: body})
		}
	})
	// Encoding allocates nothing of its own: the batch, its buffer and its
	// attempts are all (a buffer and an attempt per payload before).
	require.LessOrEqual(t, allocs, 3.0, "allocations for a batch of %d", len(small))
}
