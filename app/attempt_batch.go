package app

import (
	"fmt"

	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/eventjson"
)

// payloadSizeHint is the room reserved per attempt in an attemptBatch's
// payload buffer: a webhook payload of a typical event takes about 900
// bytes. A larger one grows the buffer, as append does.
const payloadSizeHint = 1024

// attemptBatch holds the prepared attempts of one delivery job and their
// payloads: one allocation for the attempts and one (unless a payload
// outgrows the hint) for every payload, each attempt's body a slice of the
// buffer, instead of two allocations per attempt.
type attemptBatch struct {
	payloads []byte
	preps    []preparedAttempt
}

// newAttemptBatch returns a batch with room for n attempts.
func newAttemptBatch(n int) *attemptBatch {
	return &attemptBatch{payloads: make([]byte, 0, n*payloadSizeHint), preps: make([]preparedAttempt, 0, n)}
}

// payload appends event's webhook payload to the buffer and returns it, a
// slice whose capacity ends with it (so that the next payload cannot
// overwrite it).
func (b *attemptBatch) payload(event *domain.AuditEvent) ([]byte, error) {
	start := len(b.payloads)
	buf, err := eventjson.AppendWebhookPayload(b.payloads, event)
	if err != nil {
		return nil, fmt.Errorf("encoding webhook payload: %w", err)
	}
	b.payloads = buf
	return buf[start:len(buf):len(buf)], nil
}

// prepared adds p to the batch and returns its place there. A batch
// filled beyond its room moves to a larger array; attempts returned
// before stay where they were (each is used through its own pointer).
func (b *attemptBatch) prepared(p preparedAttempt) *preparedAttempt {
	b.preps = append(b.preps, p)
	return &b.preps[len(b.preps)-1]
}
