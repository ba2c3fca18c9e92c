package app

import (
	"context"
	"errors"
	"fmt"

	"github.com/aetheriot/aether-audit/checkpoint"
	"github.com/aetheriot/aether-audit/domain"
)

// MaxVerifyRange is the most events one VerifyAuditChain call recomputes;
// longer chains are verified range by range.
const MaxVerifyRange = 1_000_000

// ChainVerification is the result of VerifyAuditChain.
type ChainVerification struct {
	// Valid is true when every event of the range recomputes to its stored
	// chain hash, sequences are dense, and the range's last event matches
	// the project's head when the range reaches it.
	Valid bool
	// CheckedCount is how many events were recomputed.
	CheckedCount uint64
	// FirstInvalidSequence is the first sequence that failed, when !Valid.
	FirstInvalidSequence *uint64
	// HeadSequence and HeadHash are the project's committed head.
	HeadSequence uint64
	HeadHash     domain.Hash
	// PurgedThrough is the last sequence removed by retention (0 when none
	// was): verification starts after it, from its stored anchor hash.
	PurgedThrough uint64
	// CheckpointsChecked is how many stored checkpoints within the range
	// verified (signature, chain hash at their sequence against the
	// recomputed chain, link to the previously issued checkpoint) before
	// the first that failed.
	CheckpointsChecked uint64
	// FirstInvalidCheckpointSequence is the sequence of the first stored
	// checkpoint of the range that failed; Valid is then false even when
	// every event recomputed to its stored hash (the chain was rewritten
	// consistently, or a checkpoint was forged or altered).
	FirstInvalidCheckpointSequence *uint64
}

// maxVerifiedCheckpoints bounds the checkpoints one verification reads.
const maxVerifiedCheckpoints = 100_000

// VerifyAuditChain recomputes the hash chain of a project's events with
// sequence in [from, to] (defaults: the first event retention kept and the
// head) and reports the first event whose content no longer matches its
// chain. The range starts from the stored hash of the event before it, or
// from the purged prefix's anchor. Needs audit:read and the project.
//
// A retention purge committing while the chain is read would look like
// missing events: a failure is checked again against the purged prefix
// read afresh, and the verification starts over once from the new anchor.
func (a *App) VerifyAuditChain(ctx context.Context, id Identity, projectID string, from, to *uint64) (ChainVerification, error) {
	if err := authorize(id, PermissionAuditRead, projectID); err != nil {
		return ChainVerification{}, err
	}
	if err := allow(a.limits.verificationsIdentity, nil, id, "chain verifications", a.now()); err != nil {
		return ChainVerification{}, err
	}
	for attempt := 0; ; attempt++ {
		res, err := a.verifyAuditChain(ctx, id, projectID, from, to)
		if err != nil || res.Valid || attempt > 0 {
			return res, err
		}
		purged, err := a.store.AuditPurgedPrefix(ctx, id.TenantID, projectID)
		if err != nil || purged.Through == res.PurgedThrough {
			return res, err
		}
	}
}

func (a *App) verifyAuditChain(ctx context.Context, id Identity, projectID string, from, to *uint64) (ChainVerification, error) {
	head, err := a.store.AuditHead(ctx, id.TenantID, projectID)
	if err != nil {
		return ChainVerification{}, err
	}
	purged, err := a.store.AuditPurgedPrefix(ctx, id.TenantID, projectID)
	if err != nil {
		return ChainVerification{}, err
	}
	res := ChainVerification{Valid: true, HeadSequence: head.Sequence, HeadHash: head.Hash, PurgedThrough: purged.Through}
	lo, hi := purged.Through+1, head.Sequence
	if from != nil {
		if *from < 1 {
			return res, badInput("fromSequence", "must be at least 1")
		}
		if *from <= purged.Through {
			return res, badInput("fromSequence", fmt.Sprintf("events through %d were purged by retention: verify from %d", purged.Through, purged.Through+1))
		}
		lo = *from
	}
	if to != nil {
		hi = min(*to, head.Sequence)
	}
	if from != nil && to != nil && *from > *to {
		return res, badInput("toSequence", "must not be below fromSequence")
	}
	if lo > hi {
		return res, nil // nothing committed in the range
	}
	if hi-lo >= MaxVerifyRange {
		return res, badInput("toSequence", fmt.Sprintf("a range may span at most %d events", MaxVerifyRange))
	}

	// The range chains on the event before it, or on the purged prefix's
	// anchor when it starts right after it (the zero hash at genesis).
	prev := purged.Hash
	if lo > purged.Through+1 {
		before, err := a.store.GetAuditEventBySequence(ctx, id.TenantID, projectID, lo-1)
		if errors.Is(err, domain.ErrNotFound) {
			s := lo - 1
			res.Valid, res.FirstInvalidSequence = false, &s
			return res, nil
		}
		if err != nil {
			return res, err
		}
		prev = before.ChainHash
	}
	var checkpoints []domain.StoredCheckpoint
	if a.checkpoints != nil {
		if checkpoints, err = a.store.AuditCheckpointsInRange(ctx, id.TenantID, projectID, lo, hi, maxVerifiedCheckpoints); err != nil {
			return res, err
		}
	}
	// recomputed holds the recomputed hash at each checkpoint's sequence.
	recomputed := make(map[uint64]domain.Hash, len(checkpoints))
	for _, c := range checkpoints {
		recomputed[c.Sequence] = domain.Hash{}
	}
	next := lo
	errStop := errors.New("stop")
	fail := func(seq uint64) error {
		res.Valid, res.FirstInvalidSequence = false, &seq
		return errStop
	}
	err = a.store.ScanAuditEvents(ctx, id.TenantID, projectID, lo, hi, func(e *domain.AuditEvent) error {
		if e.Sequence != next {
			return fail(next) // a missing event
		}
		// Up to the first mismatch the recomputed and stored hashes agree,
		// so chaining on either is the same.
		got := e.ComputeChainHash(prev)
		if got != e.ChainHash {
			return fail(e.Sequence)
		}
		prev = got
		if _, ok := recomputed[e.Sequence]; ok {
			recomputed[e.Sequence] = got
		}
		res.CheckedCount++
		next++
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return res, err
	}
	// Checkpoints up to the last event that recomputed are checked against
	// the recomputed chain.
	a.verifyCheckpoints(&res, id.TenantID, projectID, checkpoints, recomputed, next)
	if res.Valid && next <= hi {
		_ = fail(next) // events missing at the end
		return res, nil
	}
	if res.Valid && hi == head.Sequence && prev != head.Hash {
		_ = fail(hi)
	}
	return res, nil
}

// verifyCheckpoints checks the stored checkpoints below sequence next (the
// recomputed part of the range), in sequence order: each must verify with
// the key ring, sign this project's sequence and the chain hash recomputed
// there, and link to the checkpoint issued before it (none for the first).
// The first that fails makes res invalid.
func (a *App) verifyCheckpoints(res *ChainVerification, tenantID, projectID string, cs []domain.StoredCheckpoint, recomputed map[uint64]domain.Hash, next uint64) {
	for _, c := range cs {
		if c.Sequence >= next {
			return
		}
		if !a.checkpointMatches(c, tenantID, projectID, recomputed[c.Sequence]) {
			seq := c.Sequence
			res.Valid, res.FirstInvalidCheckpointSequence = false, &seq
			return
		}
		res.CheckpointsChecked++
	}
}

// checkpointMatches reports whether a stored checkpoint verifies and
// signs hash at its sequence, linked to the checkpoint issued before it.
func (a *App) checkpointMatches(c domain.StoredCheckpoint, tenantID, projectID string, hash domain.Hash) bool {
	p, _, err := a.checkpoints.Verify(c.JWS)
	if err != nil {
		return false
	}
	f, err := p.Fields()
	if err != nil || f.TenantID != tenantID || f.ProjectID != projectID || f.Sequence != c.Sequence || f.ChainHash != hash {
		return false
	}
	if c.IssueNumber == 1 {
		return f.Previous == nil
	}
	return f.Previous != nil && c.PreviousJWS != nil && *f.Previous == checkpoint.Digest(*c.PreviousJWS)
}
