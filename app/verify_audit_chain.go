package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aetheriot/aether-audit/checkpoint"
	"github.com/aetheriot/aether-audit/domain"
)

// MaxVerifyRange is the most events one VerifyAuditChain call recomputes
// (its cost is bounded before it runs); a longer range is verified call by
// call, each resuming where the previous stopped (ChainVerification's
// ResumeToken).
const MaxVerifyRange = 1_000_000

// DefaultVerifyTimeBudget is how long one VerifyAuditChain call reads
// events before it stops and returns a resume token.
const DefaultVerifyTimeBudget = 10 * time.Second

// VerifyLimits bounds the work of one VerifyAuditChain call; a call that
// reaches either bound stops after the chunk it is reading and returns a
// resume token.
type VerifyLimits struct {
	// MaxEvents is the most events a call recomputes; default and
	// ceiling MaxVerifyRange.
	MaxEvents uint64
	// MaxDuration is how long a call starts new chunks for; default
	// DefaultVerifyTimeBudget.
	MaxDuration time.Duration
}

func (l VerifyLimits) withDefaults() VerifyLimits {
	if l.MaxEvents == 0 || l.MaxEvents > MaxVerifyRange {
		l.MaxEvents = MaxVerifyRange
	}
	if l.MaxDuration <= 0 {
		l.MaxDuration = DefaultVerifyTimeBudget
	}
	return l
}

// chunk is how many events one read of a call streams: a sixteenth of
// the call's events, from 1,024 to 65,536, so that the time budget is
// checked often and each read stays one short index range scan.
func (l VerifyLimits) chunk() uint64 {
	return min(max(l.MaxEvents/16, 1024), 65_536)
}

// ChainVerification is the result of VerifyAuditChain.
type ChainVerification struct {
	// Valid is true when the whole range was verified (Complete) and every
	// event of it recomputes to its stored chain hash, sequences are
	// dense, and the range's last event matches the project's head when
	// the range reaches it. A call that stopped at its budget is not
	// Valid (and has no FirstInvalidSequence): its ResumeToken continues.
	Valid bool
	// Complete is false when the call stopped at its budget before the
	// end of the range, having found nothing wrong so far.
	Complete bool
	// ResumeToken, when the call stopped at its budget, continues the
	// verification where it stopped (VerifyAuditChainInput.ResumeToken).
	ResumeToken *string
	// CheckedCount is how many events were recomputed, across the calls
	// of a resumed verification.
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
	// the first that failed, across the calls of a resumed verification.
	CheckpointsChecked uint64
	// FirstInvalidCheckpointSequence is the sequence of the first stored
	// checkpoint of the range that failed; Valid is then false even when
	// every event recomputed to its stored hash (the chain was rewritten
	// consistently, or a checkpoint was forged or altered).
	FirstInvalidCheckpointSequence *uint64
}

// VerifyAuditChainInput is what VerifyAuditChain verifies: a range of a
// project, or the rest of a verification a previous call stopped.
type VerifyAuditChainInput struct {
	ProjectID string
	// FromSequence and ToSequence bound the range (defaults: the first
	// event retention kept and the head).
	FromSequence, ToSequence *uint64
	// ResumeToken continues a verification that stopped at its budget;
	// the range is then the token's, and FromSequence and ToSequence must
	// be absent.
	ResumeToken string
}

// maxVerifiedCheckpoints bounds the checkpoints one verification reads.
const maxVerifiedCheckpoints = 100_000

// VerifyAuditChain recomputes the hash chain of a project's events with
// sequence in [from, to] (defaults: the first event retention kept and the
// head) and reports the first event whose content no longer matches its
// chain. The range starts from the stored hash of the event before it, or
// from the purged prefix's anchor. Needs audit:read and the project.
//
// One call streams at most VerifyLimits' events for at most its duration,
// in chunks of the primary key, with memory bounded by a chunk's row and
// the range's checkpoints; a longer range returns a resume token that the
// next call continues from, chained on the hash this one recomputed.
//
// A retention purge committing while the chain is read would look like
// missing events: a failure is checked again against the purged prefix
// read afresh, and the verification starts over once from the new anchor.
func (a *App) VerifyAuditChain(ctx context.Context, id Identity, projectID string, from, to *uint64) (ChainVerification, error) {
	return a.VerifyAuditChainResumable(ctx, id, VerifyAuditChainInput{ProjectID: projectID, FromSequence: from, ToSequence: to})
}

// VerifyAuditChainResumable is VerifyAuditChain of a range or of a resume
// token (in.ResumeToken).
func (a *App) VerifyAuditChainResumable(ctx context.Context, id Identity, in VerifyAuditChainInput) (ChainVerification, error) {
	if err := authorize(id, PermissionAuditRead, in.ProjectID); err != nil {
		return ChainVerification{}, err
	}
	if err := allow(a.limits.verificationsIdentity, nil, id, "chain verifications", a.now()); err != nil {
		return ChainVerification{}, err
	}
	var resume *verifyResume
	if in.ResumeToken != "" {
		if in.FromSequence != nil || in.ToSequence != nil {
			return ChainVerification{}, badInput("resumeToken", "continues the range it was issued for: give it without fromSequence and toSequence")
		}
		r, err := decodeVerifyResume(in.ResumeToken, in.ProjectID)
		if err != nil {
			return ChainVerification{}, err
		}
		resume = &r
	}
	for attempt := 0; ; attempt++ {
		res, err := a.verifyAuditChain(ctx, id, in, resume)
		if err != nil || res.Valid || !res.Complete || attempt > 0 {
			return res, err
		}
		purged, err := a.store.AuditPurgedPrefix(ctx, id.TenantID, in.ProjectID)
		if err != nil || purged.Through == res.PurgedThrough {
			return res, err
		}
	}
}

func (a *App) verifyAuditChain(ctx context.Context, id Identity, in VerifyAuditChainInput, resume *verifyResume) (ChainVerification, error) {
	projectID, from, to := in.ProjectID, in.FromSequence, in.ToSequence
	head, err := a.store.AuditHead(ctx, id.TenantID, projectID)
	if err != nil {
		return ChainVerification{}, err
	}
	purged, err := a.store.AuditPurgedPrefix(ctx, id.TenantID, projectID)
	if err != nil {
		return ChainVerification{}, err
	}
	res := ChainVerification{Valid: true, Complete: true, HeadSequence: head.Sequence, HeadHash: head.Hash, PurgedThrough: purged.Through}
	lo, hi := purged.Through+1, head.Sequence
	if resume != nil {
		if resume.Next <= purged.Through {
			return res, badInput("resumeToken", fmt.Sprintf("events through %d were purged by retention: verify from %d", purged.Through, purged.Through+1))
		}
		lo, hi = resume.Next, min(resume.To, head.Sequence)
		res.CheckedCount, res.CheckpointsChecked = resume.Checked, resume.Checkpoints
	}
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

	// The range chains on the event before it, or on the purged prefix's
	// anchor when it starts right after it (the zero hash at genesis); a
	// resumed one on the hash the previous call recomputed.
	prev := purged.Hash
	switch {
	case resume != nil:
		prev = resume.Prev
	case lo > purged.Through+1:
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
	// This call recomputes at most limits.MaxEvents of the range.
	limits := a.verifyLimits
	last := hi
	if hi-lo >= limits.MaxEvents {
		last = lo + limits.MaxEvents - 1
	}
	var checkpoints []domain.StoredCheckpoint
	if a.checkpoints != nil {
		if checkpoints, err = a.store.AuditCheckpointsInRange(ctx, id.TenantID, projectID, lo, last, maxVerifiedCheckpoints); err != nil {
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
	check := func(e *domain.AuditEvent) error {
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
	}
	// Chunk by chunk, each a short ordered range of the primary key; the
	// time budget is checked between chunks, and every call makes progress.
	started := time.Now()
	for res.Valid && next <= last && (next == lo || time.Since(started) < limits.MaxDuration) {
		end := min(last, next+limits.chunk()-1)
		err = a.store.ScanAuditEvents(ctx, id.TenantID, projectID, next, end, check)
		if err != nil && !errors.Is(err, errStop) {
			return res, err
		}
		if res.Valid && next <= end {
			_ = fail(next) // events missing at the end of the chunk
		}
	}
	// Checkpoints up to the last event that recomputed are checked against
	// the recomputed chain.
	a.verifyCheckpoints(&res, id.TenantID, projectID, checkpoints, recomputed, next)
	if res.Valid && next <= hi {
		// Stopped at the budget: not valid yet, but resumable.
		token := verifyResume{Project: projectID, Next: next, To: hi, Prev: prev,
			Checked: res.CheckedCount, Checkpoints: res.CheckpointsChecked}.encode()
		res.Valid, res.Complete, res.ResumeToken = false, false, &token
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
