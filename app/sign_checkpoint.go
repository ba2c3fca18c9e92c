package app

import (
	"context"
	"errors"
	"fmt"

	"github.com/aetheriot/aether-audit/checkpoint"
	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/jobargs"
)

// MaxCheckpointRecompute is the most events one signing recomputes before
// it signs: a longer stretch since the last checkpoint is signed in steps,
// one checkpoint per step.
const MaxCheckpointRecompute = MaxVerifyRange

// ErrChainDoesNotRecompute is why a signer refused to sign: the stored chain
// does not recompute from the last checkpoint (or the purge anchor, or
// genesis) to the sequence to sign. The chain was changed; signing it would
// certify the change.
var ErrChainDoesNotRecompute = errors.New("the audit chain does not recompute: refusing to sign a checkpoint")

// signCheckpoint returns the project's checkpoint at target, signing it
// (and, when more than MaxCheckpointRecompute events lie between it and
// where the recomputation starts, checkpoints in between) unless one
// exists. With maxSteps > 0 it signs at most that many checkpoints and
// returns the last: the periodic job's bound on its work.
//
// Before each signature it recomputes the chain from the highest checkpoint
// at or below the target (whose own signature it verifies), or from the
// purged prefix's anchor (the zero hash at genesis), to the sequence it
// signs, and refuses (ErrChainDoesNotRecompute, logged and counted) if an
// event is missing or does not recompute to its stored hash.
func (a *App) signCheckpoint(ctx context.Context, tenantID, projectID string, target uint64, maxSteps int) (domain.AuditCheckpoint, error) {
	if a.checkpoints == nil {
		return domain.AuditCheckpoint{}, errNoCheckpointKey
	}
	for step := 1; ; step++ {
		if c, err := a.store.GetAuditCheckpoint(ctx, tenantID, projectID, target); err == nil || !errors.Is(err, domain.ErrNotFound) {
			return c, err
		}
		purged, err := a.store.AuditPurgedPrefix(ctx, tenantID, projectID)
		if err != nil {
			return domain.AuditCheckpoint{}, err
		}
		if target <= purged.Through {
			return domain.AuditCheckpoint{}, newError(CodeInvalidState,
				fmt.Sprintf("events through %d were purged by retention: no checkpoint can be signed at %d", purged.Through, target))
		}
		head, err := a.store.AuditHead(ctx, tenantID, projectID)
		if err != nil {
			return domain.AuditCheckpoint{}, err
		}
		if target > head.Sequence {
			return domain.AuditCheckpoint{}, newError(CodeInvalidState, fmt.Sprintf("sequence %d is past the project's head %d", target, head.Sequence))
		}
		start, startHash := purged.Through, purged.Hash
		base, err := a.store.AuditCheckpointAtOrBelow(ctx, tenantID, projectID, target)
		switch {
		case errors.Is(err, domain.ErrNotFound):
		case err != nil:
			return domain.AuditCheckpoint{}, err
		case base.Sequence >= purged.Through:
			if err := a.checkStoredCheckpoint(base); err != nil {
				return domain.AuditCheckpoint{}, a.refuseCheckpoint(ctx, tenantID, projectID, base.Sequence, err)
			}
			start, startHash = base.Sequence, base.ChainHash
		}
		at := min(target, start+MaxCheckpointRecompute)
		hash, err := a.recomputeChain(ctx, tenantID, projectID, start, startHash, at)
		if errors.Is(err, ErrChainDoesNotRecompute) {
			// A purge that committed meanwhile removes events the scan
			// expected: look again from the new anchor, once per purge.
			if now, perr := a.store.AuditPurgedPrefix(ctx, tenantID, projectID); perr == nil && now.Through != purged.Through {
				step--
				continue
			}
			return domain.AuditCheckpoint{}, a.refuseCheckpoint(ctx, tenantID, projectID, at, err)
		}
		if err != nil {
			return domain.AuditCheckpoint{}, err
		}
		if at == head.Sequence && hash != head.Hash {
			return domain.AuditCheckpoint{}, a.refuseCheckpoint(ctx, tenantID, projectID, at,
				fmt.Errorf("%w: the head's hash differs at %d", ErrChainDoesNotRecompute, at))
		}
		c, err := a.insertCheckpoint(ctx, tenantID, projectID, at, hash, purged)
		if err != nil || at == target || (maxSteps > 0 && step >= maxSteps) {
			return c, err
		}
	}
}

// checkStoredCheckpoint verifies a stored checkpoint's signature with the
// key ring and that its payload says what its row says, before a signer
// trusts its chain hash.
func (a *App) checkStoredCheckpoint(c domain.AuditCheckpoint) error {
	p, _, err := a.checkpoints.Verify(c.JWS)
	if err != nil {
		return fmt.Errorf("%w: the stored checkpoint at %d does not verify: %v", ErrChainDoesNotRecompute, c.Sequence, err)
	}
	f, err := p.Fields()
	if err != nil || f.TenantID != c.TenantID || f.ProjectID != c.ProjectID || f.Sequence != c.Sequence || f.ChainHash != c.ChainHash {
		return fmt.Errorf("%w: the stored checkpoint at %d differs from its signed payload", ErrChainDoesNotRecompute, c.Sequence)
	}
	return nil
}

// refuseCheckpoint logs and counts a refusal to sign.
func (a *App) refuseCheckpoint(ctx context.Context, tenantID, projectID string, seq uint64, cause error) error {
	a.logger.ErrorContext(ctx, "refusing to sign an audit checkpoint: the chain does not recompute; run verifyAuditChain",
		"tenant", tenantID, "project", projectID, "sequence", seq, "err", cause)
	a.observer.CheckpointSigned(CheckpointOutcomeRefused)
	return &Error{Code: CodeInvalidState, Message: fmt.Sprintf(
		"the audit chain does not recompute up to sequence %d: no checkpoint is signed; run verifyAuditChain", seq), Err: cause}
}

// recomputeChain recomputes the chain of events (start, to] from
// startHash, the hash at start, and returns the hash at to. A missing event
// or one that does not recompute to its stored hash is
// ErrChainDoesNotRecompute.
func (a *App) recomputeChain(ctx context.Context, tenantID, projectID string, start uint64, startHash domain.Hash, to uint64) (domain.Hash, error) {
	prev, next := startHash, start+1
	err := a.store.ScanAuditEvents(ctx, tenantID, projectID, start+1, to, func(e *domain.AuditEvent) error {
		if e.Sequence != next {
			return fmt.Errorf("%w: sequence %d is missing", ErrChainDoesNotRecompute, next)
		}
		if got := e.ComputeChainHash(prev); got != e.ChainHash {
			return fmt.Errorf("%w: sequence %d", ErrChainDoesNotRecompute, e.Sequence)
		}
		prev = e.ChainHash
		next++
		return nil
	})
	if err != nil {
		return domain.Hash{}, err
	}
	if next <= to {
		return domain.Hash{}, fmt.Errorf("%w: sequence %d is missing", ErrChainDoesNotRecompute, next)
	}
	return prev, nil
}

// insertCheckpoint signs and stores the checkpoint at seq with chain hash
// hash, linked to the project's checkpoint issued last, and, with object
// storage, enqueues its copy there in the same transaction. A checkpoint
// at seq stored meanwhile is returned instead.
func (a *App) insertCheckpoint(ctx context.Context, tenantID, projectID string, seq uint64, hash domain.Hash, purged domain.PurgedPrefix) (out domain.AuditCheckpoint, err error) {
	ctx, span := a.startCommand(ctx, "SignAuditCheckpoint")
	defer func() { a.endCommand(span, err) }()
	signed := false
	err = a.retryTx(ctx, func(ctx context.Context, tx Tx) error {
		signed = false
		existing, err := tx.GetAuditCheckpoint(ctx, tenantID, projectID, seq)
		if err == nil || !errors.Is(err, domain.ErrNotFound) {
			out = existing
			return err
		}
		c := domain.AuditCheckpoint{TenantID: tenantID, ProjectID: projectID, Sequence: seq, IssueNumber: 1,
			ChainHash: hash, PurgedThrough: purged.Through, AnchorHash: purged.Hash, KeyID: a.checkpoints.KeyID(),
			IssuedAt: a.storedNow()}
		latest, err := tx.LatestIssuedAuditCheckpoint(ctx, tenantID, projectID)
		switch {
		case err == nil:
			d := domain.Hash(checkpoint.Digest(latest.JWS))
			c.IssueNumber, c.PreviousCheckpoint = latest.IssueNumber+1, &d
		case !errors.Is(err, domain.ErrNotFound):
			return err
		}
		fields := checkpoint.Fields{TenantID: tenantID, ProjectID: projectID, Sequence: seq, ChainHash: hash,
			PurgedThrough: purged.Through, AnchorHash: purged.Hash, IssuedAt: c.IssuedAt}
		if c.PreviousCheckpoint != nil {
			prev := [32]byte(*c.PreviousCheckpoint)
			fields.Previous = &prev
		}
		if c.JWS, err = a.checkpoints.Sign(checkpoint.NewPayload(fields)); err != nil {
			return err
		}
		c.JWSDigest = checkpoint.Digest(c.JWS)
		if err := tx.InsertAuditCheckpoint(ctx, c); err != nil {
			return err
		}
		if a.exports.Bucket != nil {
			if err := tx.EnqueueJobs(ctx, domain.OutboxJob{Args: jobargs.WriteCheckpointObjectArgs{
				TenantID: tenantID, ProjectID: projectID, Sequence: seq}}); err != nil {
				return err
			}
		}
		out, signed = c, true
		return nil
	})
	if err == nil && signed {
		a.observer.CheckpointSigned(CheckpointOutcomeSigned)
	}
	return out, err
}
