package app

import (
	"time"

	"github.com/google/uuid"

	"github.com/aetheriot/aether-audit/domain"
)

// appendRequest is one request's drafts (already normalized, ids assigned,
// fingerprints computed) on their way into a transaction, and its outcome.
type appendRequest struct {
	drafts       []domain.AuditEventDraft
	fingerprints []domain.Hash
	// clientIDs is true when some draft carries a client-supplied id, which
	// may already be stored.
	clientIDs bool

	events []domain.AuditEvent
	err    error
}

// reset clears the outcome before a (re)attempt of the transaction.
func (r *appendRequest) reset() {
	r.events = make([]domain.AuditEvent, len(r.drafts))
	r.err = nil
}

// sealBatch resolves the drafts of one transaction against the events
// already stored (existing) and those sealed earlier in the same
// transaction: a known id with the same fingerprint is that event again, with
// another fingerprint it is an IDEMPOTENCY_CONFLICT of its request alone;
// every other draft becomes a new event.
type sealBatch struct {
	existing map[uuid.UUID]domain.AuditEvent
	sealed   map[uuid.UUID]domain.AuditEvent
}

func newSealBatch(existing map[uuid.UUID]domain.AuditEvent) *sealBatch {
	return &sealBatch{existing: existing, sealed: map[uuid.UUID]domain.AuditEvent{}}
}

// known returns the event an id already stands for in this transaction.
func (b *sealBatch) known(id uuid.UUID) (domain.AuditEvent, bool) {
	if e, ok := b.existing[id]; ok {
		return e, true
	}
	e, ok := b.sealed[id]
	return e, ok
}

// seal appends the new drafts of reqs, in order, after head and fills each
// request's events (or its err). It returns the new events and the new head.
// A request that conflicts contributes nothing.
func (b *sealBatch) seal(tenantID string, head domain.ChainHead, reqs []*appendRequest, recordedAt time.Time) ([]domain.AuditEvent, domain.ChainHead) {
	type slot struct {
		req, idx int
	}
	var (
		fresh     []domain.AuditEventDraft
		freshFP   []domain.Hash
		freshSlot []slot
	)
	pending := map[uuid.UUID]int{} // id -> index in fresh, for repeats in this call
	for ri, r := range reqs {
		// First pass: a conflict fails the whole request before it adds anything.
		for i := range r.drafts {
			id := r.drafts[i].ID
			if e, ok := b.known(id); ok && e.InputFingerprint != r.fingerprints[i] {
				r.err = idempotencyConflict(id)
				break
			}
			if k, ok := pending[id]; ok && freshFP[k] != r.fingerprints[i] {
				r.err = idempotencyConflict(id)
				break
			}
		}
		if r.err != nil {
			continue
		}
		for i := range r.drafts {
			id := r.drafts[i].ID
			if e, ok := b.known(id); ok {
				r.events[i] = e
				continue
			}
			if _, ok := pending[id]; ok {
				continue // filled in once sealed
			}
			pending[id] = len(fresh)
			fresh = append(fresh, r.drafts[i])
			freshFP = append(freshFP, r.fingerprints[i])
			freshSlot = append(freshSlot, slot{ri, i})
		}
	}
	if len(fresh) == 0 {
		return nil, head
	}
	events, newHead := head.Append(tenantID, fresh, recordedAt)
	for k := range events {
		events[k].InputFingerprint = freshFP[k]
		b.sealed[events[k].ID] = events[k]
		s := freshSlot[k]
		reqs[s.req].events[s.idx] = events[k]
	}
	// Repeats of an id sealed in this call point at its event.
	for _, r := range reqs {
		if r.err != nil {
			continue
		}
		for i := range r.drafts {
			if r.events[i].Sequence == 0 {
				r.events[i] = b.sealed[r.drafts[i].ID]
			}
		}
	}
	return events, newHead
}
