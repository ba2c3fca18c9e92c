package app

import (
	"context"
)

// ChainVerificationStream is one verification of a whole range in one
// call: it yields a progress item after each step of the verification,
// then the verdict, and then ends (ErrStreamEnded).
type ChainVerificationStream struct {
	app     *App
	id      Identity
	in      VerifyAuditChainInput
	resume  *verifyResume
	v       *chainVerifier
	retried bool
	ended   bool
	release func()
}

// StreamAuditChainVerification verifies a project's chain over the range
// VerifyAuditChain takes (a range, or a resume token of a call or of a
// progress item), to its end, whatever its length: the stream recomputes it
// step by step, each step the work of one VerifyAuditChain call bounded by
// VerifyLimits (MaxEvents, and ProgressInterval instead of MaxDuration),
// and yields after each a progress item (not Complete, with a resume token
// valid at that point), then the final item (Complete), as
// VerifyAuditChain's result would be. Work happens only while the caller
// asks for the next item, under its context: a caller that goes away stops
// it at once.
//
// Needs audit:read and the project; starts are charged to the
// subscription rate limits, and a tenant (a client connection) runs at
// most VerifyLimits.StreamsPerTenant (StreamsPerConnection) streams at
// once: one more is QUOTA_EXCEEDED until Close of another. Bad input is
// BAD_USER_INPUT, as the query answers it.
func (a *App) StreamAuditChainVerification(ctx context.Context, id Identity, in VerifyAuditChainInput) (*ChainVerificationStream, error) {
	if err := a.authorizeSubscription(id, PermissionAuditRead, in.ProjectID); err != nil {
		return nil, err
	}
	resume, err := in.resume()
	if err != nil {
		return nil, err
	}
	release, err := a.acquireVerificationSlot(ctx, id.TenantID)
	if err != nil {
		return nil, err
	}
	v, err := a.startChainVerifier(ctx, id, in, resume)
	if err != nil {
		release()
		return nil, err
	}
	return &ChainVerificationStream{app: a, id: id, in: in, resume: resume, v: v, release: release}, nil
}

// Next runs the verification's next step and returns its progress item,
// or the final item once the range is verified or something failed;
// ErrStreamEnded after the final item. A failed verdict found while a
// retention purge committed starts over once from the purge's new anchor,
// as VerifyAuditChain does.
func (s *ChainVerificationStream) Next(ctx context.Context) (*ChainVerification, error) {
	if s.ended {
		return nil, ErrStreamEnded
	}
	limits := s.app.verifyLimits
	for {
		if err := s.v.advance(ctx, limits.MaxEvents, limits.ProgressInterval); err != nil {
			return nil, err
		}
		res := s.v.result()
		if !res.Complete {
			return &res, nil
		}
		if !s.retried {
			again, err := s.v.purgedSince(ctx)
			if err != nil {
				return nil, err
			}
			if again {
				s.retried = true
				if s.v, err = s.app.startChainVerifier(ctx, s.id, s.in, s.resume); err != nil {
					return nil, err
				}
				continue
			}
		}
		s.ended = true
		return &res, nil
	}
}

// Close ends the stream and frees its slot of the concurrency limits.
func (s *ChainVerificationStream) Close() { s.release() }
