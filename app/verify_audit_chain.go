package app

import (
	"context"
	"time"

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

// DefaultVerifyProgressInterval is how often a verification stream
// (StreamAuditChainVerification) yields a progress item.
const DefaultVerifyProgressInterval = time.Second

// Defaults of VerifyLimits' bounds on concurrent verification streams.
const (
	DefaultVerifyStreamsPerTenant     = 4
	DefaultVerifyStreamsPerConnection = 2
)

// VerifyLimits bounds the work of one VerifyAuditChain call, and of each
// step of a verification stream; a call that reaches either bound stops
// after the chunk it is reading and returns a resume token. It also bounds
// how many verification streams run at once.
type VerifyLimits struct {
	// MaxEvents is the most events a call (or a stream's step) recomputes;
	// default and ceiling MaxVerifyRange.
	MaxEvents uint64
	// MaxDuration is how long a call starts new chunks for; default
	// DefaultVerifyTimeBudget.
	MaxDuration time.Duration
	// ProgressInterval is how long a stream's step starts new chunks for
	// before it yields a progress item (at most MaxDuration); default
	// DefaultVerifyProgressInterval.
	ProgressInterval time.Duration
	// StreamsPerTenant is how many verification streams a tenant may run
	// at once; default DefaultVerifyStreamsPerTenant.
	StreamsPerTenant int
	// StreamsPerConnection is how many verification streams one client
	// connection (a GraphQL WebSocket, an MCP session: Connection) may run
	// at once; default
	// DefaultVerifyStreamsPerConnection.
	StreamsPerConnection int
}

func (l VerifyLimits) withDefaults() VerifyLimits {
	if l.MaxEvents == 0 || l.MaxEvents > MaxVerifyRange {
		l.MaxEvents = MaxVerifyRange
	}
	if l.MaxDuration <= 0 {
		l.MaxDuration = DefaultVerifyTimeBudget
	}
	if l.ProgressInterval <= 0 {
		l.ProgressInterval = DefaultVerifyProgressInterval
	}
	l.ProgressInterval = min(l.ProgressInterval, l.MaxDuration)
	if l.StreamsPerTenant <= 0 {
		l.StreamsPerTenant = DefaultVerifyStreamsPerTenant
	}
	if l.StreamsPerConnection <= 0 {
		l.StreamsPerConnection = DefaultVerifyStreamsPerConnection
	}
	return l
}

// chunk is how many events one read of a call streams: a sixteenth of
// the call's events, from 1,024 to 65,536, so that the time budget is
// checked often and each read stays one short index range scan.
func (l VerifyLimits) chunk() uint64 {
	return min(max(l.MaxEvents/16, 1024), 65_536)
}

// ChainVerification is the result of VerifyAuditChain, and each item of a
// verification stream (StreamAuditChainVerification): progress items are
// not Complete, the last is.
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
	// SequenceReached is the last sequence of the range recomputed and
	// found matching, so far (the sequence before the range's first when
	// none was yet): a resume token continues after it.
	SequenceReached uint64
	// EventsPerSecond is the rate this call (or stream, since it started)
	// recomputed events at; 0 before any.
	EventsPerSecond float64
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
	resume, err := in.resume()
	if err != nil {
		return ChainVerification{}, err
	}
	for attempt := 0; ; attempt++ {
		v, err := a.startChainVerifier(ctx, id, in, resume)
		if err != nil {
			return ChainVerification{}, err
		}
		if err := v.advance(ctx, a.verifyLimits.MaxEvents, a.verifyLimits.MaxDuration); err != nil {
			return ChainVerification{}, err
		}
		res := v.result()
		if attempt > 0 {
			return res, nil
		}
		if again, err := v.purgedSince(ctx); err != nil || !again {
			return res, err
		}
	}
}

// resume decodes in's resume token: nil without one, BAD_USER_INPUT when
// it is not a token of in's project or comes with a range.
func (in VerifyAuditChainInput) resume() (*verifyResume, error) {
	if in.ResumeToken == "" {
		return nil, nil
	}
	if in.FromSequence != nil || in.ToSequence != nil {
		return nil, badInput("resumeToken", "continues the range it was issued for: give it without fromSequence and toSequence")
	}
	r, err := decodeVerifyResume(in.ResumeToken, in.ProjectID)
	if err != nil {
		return nil, err
	}
	return &r, nil
}
