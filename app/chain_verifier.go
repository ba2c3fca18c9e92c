package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aetheriot/aether-audit/checkpoint"
	"github.com/aetheriot/aether-audit/domain"
)

// maxVerifiedCheckpoints bounds the checkpoints one step of a verification
// reads.
const maxVerifiedCheckpoints = 100_000

// chainVerifier is one verification of a project's chain as it advances,
// step by step: the one loop that both a verifyAuditChain call (one step
// within its budget) and a verification stream (steps until the end, a
// progress item after each) run.
type chainVerifier struct {
	a                   *App
	tenantID, projectID string
	// res is the verdict so far: counts, head, and the first failure.
	res ChainVerification
	// next is the next sequence to recompute, hi the range's last; prev
	// the hash recomputed through next-1.
	next, hi uint64
	prev     domain.Hash
	// done is set when the verdict is final: the range is verified to its
	// end, or something failed.
	done bool
	// started and checked measure this verifier's rate (EventsPerSecond).
	started time.Time
	checked uint64
}

// startChainVerifier reads the project's head and purged prefix and sets a
// verifier at the start of in's range (or where resume stopped), chained
// on the hash before it. Bad input (a range out of order or purged, a
// token of purged events) is BAD_USER_INPUT, as the query answers it.
func (a *App) startChainVerifier(ctx context.Context, id Identity, in VerifyAuditChainInput, resume *verifyResume) (*chainVerifier, error) {
	projectID, from, to := in.ProjectID, in.FromSequence, in.ToSequence
	head, err := a.store.AuditHead(ctx, id.TenantID, projectID)
	if err != nil {
		return nil, err
	}
	purged, err := a.store.AuditPurgedPrefix(ctx, id.TenantID, projectID)
	if err != nil {
		return nil, err
	}
	v := &chainVerifier{a: a, tenantID: id.TenantID, projectID: projectID, started: time.Now(),
		res: ChainVerification{Valid: true, Complete: true, HeadSequence: head.Sequence, HeadHash: head.Hash, PurgedThrough: purged.Through}}
	lo, hi := purged.Through+1, head.Sequence
	if resume != nil {
		if resume.Next <= purged.Through {
			return nil, badInput("resumeToken", fmt.Sprintf("events through %d were purged by retention: verify from %d", purged.Through, purged.Through+1))
		}
		lo, hi = resume.Next, min(resume.To, head.Sequence)
		v.res.CheckedCount, v.res.CheckpointsChecked = resume.Checked, resume.Checkpoints
	}
	if from != nil {
		if *from < 1 {
			return nil, badInput("fromSequence", "must be at least 1")
		}
		if *from <= purged.Through {
			return nil, badInput("fromSequence", fmt.Sprintf("events through %d were purged by retention: verify from %d", purged.Through, purged.Through+1))
		}
		lo = *from
	}
	if to != nil {
		hi = min(*to, head.Sequence)
	}
	if from != nil && to != nil && *from > *to {
		return nil, badInput("toSequence", "must not be below fromSequence")
	}
	v.next, v.hi = lo, hi
	v.res.SequenceReached = lo - 1
	if lo > hi {
		v.done = true // nothing committed in the range
		return v, nil
	}

	// The range chains on the event before it, or on the purged prefix's
	// anchor when it starts right after it (the zero hash at genesis); a
	// resumed one on the hash the previous step recomputed.
	v.prev = purged.Hash
	switch {
	case resume != nil:
		v.prev = resume.Prev
	case lo > purged.Through+1:
		before, err := a.store.GetAuditEventBySequence(ctx, id.TenantID, projectID, lo-1)
		if errors.Is(err, domain.ErrNotFound) {
			v.fail(lo - 1)
			v.done = true
			return v, nil
		}
		if err != nil {
			return nil, err
		}
		v.prev = before.ChainHash
	}
	return v, nil
}

// errVerifyStop ends a scan at the first failure.
var errVerifyStop = errors.New("stop")

// fail records seq as the first sequence that failed.
func (v *chainVerifier) fail(seq uint64) error {
	v.res.Valid, v.res.FirstInvalidSequence = false, &seq
	return errVerifyStop
}

// advance recomputes the range from next on, at most maxEvents for at
// most maxDuration (checked between chunks; one chunk is always read), in
// chunks of the primary key with memory bounded by a chunk's row and the
// step's checkpoints. Each stored checkpoint of the step is checked as the
// chain reaches its sequence: it must verify with the key ring, sign this
// project's sequence and the chain hash recomputed there, and link to the
// checkpoint issued before it (none for the first). An error is the
// store's or ctx's: the verifier is then unusable.
func (v *chainVerifier) advance(ctx context.Context, maxEvents uint64, maxDuration time.Duration) error {
	if v.done {
		return nil
	}
	a, first := v.a, v.next
	last := v.hi
	if v.hi-v.next >= maxEvents {
		last = v.next + maxEvents - 1
	}
	var checkpoints []domain.StoredCheckpoint
	if a.checkpoints != nil {
		var err error
		if checkpoints, err = a.store.AuditCheckpointsInRange(ctx, v.tenantID, v.projectID, v.next, last, maxVerifiedCheckpoints); err != nil {
			return err
		}
	}
	check := func(e *domain.AuditEvent) error {
		if e.Sequence != v.next {
			return v.fail(v.next) // a missing event
		}
		// Up to the first mismatch the recomputed and stored hashes agree,
		// so chaining on either is the same.
		got := e.ComputeChainHash(v.prev)
		if got != e.ChainHash {
			return v.fail(e.Sequence)
		}
		v.prev = got
		for len(checkpoints) > 0 && checkpoints[0].Sequence <= e.Sequence {
			v.checkCheckpoint(checkpoints[0], got)
			checkpoints = checkpoints[1:]
		}
		v.res.CheckedCount++
		v.checked++
		v.next++
		return nil
	}
	chunk := a.verifyLimits.chunk()
	started := time.Now()
	for v.res.Valid && v.next <= last && (v.next == first || time.Since(started) < maxDuration) {
		end := min(last, v.next+chunk-1)
		err := a.store.ScanAuditEvents(ctx, v.tenantID, v.projectID, v.next, end, check)
		if err != nil && !errors.Is(err, errVerifyStop) {
			return err
		}
		if v.res.Valid && v.next <= end {
			_ = v.fail(v.next) // events missing at the end of the chunk
		}
	}
	v.res.SequenceReached = v.next - 1
	if elapsed := time.Since(v.started).Seconds(); elapsed > 0 {
		v.res.EventsPerSecond = float64(v.checked) / elapsed
	}
	switch {
	case v.res.FirstInvalidCheckpointSequence != nil:
		v.res.Valid, v.done = false, true
	case !v.res.Valid:
		v.done = true
	case v.next > v.hi:
		v.done = true
		if v.hi == v.res.HeadSequence && v.prev != v.res.HeadHash {
			_ = v.fail(v.hi)
		}
	}
	return nil
}

// checkCheckpoint checks a stored checkpoint against hash, the chain
// recomputed at its sequence, unless one already failed: the first that
// fails is recorded, and makes the verdict invalid.
func (v *chainVerifier) checkCheckpoint(c domain.StoredCheckpoint, hash domain.Hash) {
	if v.res.FirstInvalidCheckpointSequence != nil {
		return
	}
	if c.Sequence != v.next || !v.a.checkpointMatches(c, v.tenantID, v.projectID, hash) {
		seq := c.Sequence
		v.res.FirstInvalidCheckpointSequence = &seq
		return
	}
	v.res.CheckpointsChecked++
}

// result is the verdict so far: final once done, otherwise not Valid, not
// Complete, with a resume token that continues after SequenceReached.
func (v *chainVerifier) result() ChainVerification {
	res := v.res
	if !v.done {
		token := verifyResume{Project: v.projectID, Next: v.next, To: v.hi, Prev: v.prev,
			Checked: res.CheckedCount, Checkpoints: res.CheckpointsChecked}.encode()
		res.Valid, res.Complete, res.ResumeToken = false, false, &token
	}
	return res
}

// purgedSince reports whether a final, failed verdict may be the work of a
// retention purge that committed while the chain was read (its purged
// prefix moved): the verification is then to start over, once, from the
// new anchor.
func (v *chainVerifier) purgedSince(ctx context.Context) (bool, error) {
	if !v.done || v.res.Valid {
		return false, nil
	}
	purged, err := v.a.store.AuditPurgedPrefix(ctx, v.tenantID, v.projectID)
	if err != nil {
		return false, err
	}
	return purged.Through != v.res.PurgedThrough, nil
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
