package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// ChainVerification is the result of [Client.VerifyChain].
type ChainVerification struct {
	// Valid is true when every event of the range recomputed to its stored
	// hash and every stored checkpoint of the range verified.
	Valid        bool
	CheckedCount uint64
	// FirstInvalidSequence is the first event whose content no longer
	// matches its chain (0 when none).
	FirstInvalidSequence uint64
	HeadSequence         uint64
	HeadHash             string
	// PurgedThroughSequence is the last sequence removed by retention (0
	// when none was); verification starts after it.
	PurgedThroughSequence uint64
	CheckpointsChecked    uint64
	// FirstInvalidCheckpointSequence is the first stored checkpoint that
	// failed (0 when none).
	FirstInvalidCheckpointSequence uint64
}

// VerifyProgress is how far a [Client.VerifyChain] has come.
type VerifyProgress struct {
	// CheckedCount is how many events were recomputed so far.
	CheckedCount uint64
	// SequenceReached is the sequence the range is verified through.
	SequenceReached uint64
	// HeadSequence is the project's head when the verification started.
	HeadSequence uint64
	// EventsPerSecond is the server's rate since the stream (re)started.
	EventsPerSecond float64
}

// VerifyOption configures a [Client.VerifyChain].
type VerifyOption func(*verifyOptions)

type verifyOptions struct {
	progress func(VerifyProgress)
}

// WithVerifyProgress has VerifyChain call f with each progress item the
// server sends (about one a second), from the goroutine of VerifyChain.
func WithVerifyProgress(f func(VerifyProgress)) VerifyOption {
	return func(o *verifyOptions) { o.progress = f }
}

// verifyFields are the fields VerifyChain reads of an
// AuditChainVerification.
const verifyFields = `valid complete resumeToken checkedCount firstInvalidSequence headSequence headHash purgedThroughSequence
checkpointsChecked firstInvalidCheckpointSequence`

const verifyChain = `query($p: ID!, $from: Uint64, $to: Uint64, $resume: String) {
verifyAuditChain(projectId: $p, fromSequence: $from, toSequence: $to, resumeToken: $resume) {
` + verifyFields + ` } }`

const verifyChainStream = `subscription($p: ID!, $from: Uint64, $to: Uint64, $resume: String) {
auditChainVerification(projectId: $p, fromSequence: $from, toSequence: $to, resumeToken: $resume) {
` + verifyFields + ` sequenceReached eventsPerSecond } }`

// wireVerification is an AuditChainVerification as sent.
type wireVerification struct {
	Valid                          bool
	Complete                       bool
	ResumeToken                    *string
	CheckedCount                   uint64 `json:",string"`
	FirstInvalidSequence           *string
	HeadSequence                   uint64 `json:",string"`
	HeadHash                       string
	PurgedThroughSequence          uint64 `json:",string"`
	CheckpointsChecked             uint64 `json:",string"`
	FirstInvalidCheckpointSequence *string
	SequenceReached                uint64 `json:",string"`
	EventsPerSecond                float64
}

func (v wireVerification) result() ChainVerification {
	return ChainVerification{
		Valid: v.Valid, CheckedCount: v.CheckedCount, HeadSequence: v.HeadSequence, HeadHash: v.HeadHash,
		PurgedThroughSequence: v.PurgedThroughSequence, CheckpointsChecked: v.CheckpointsChecked,
		FirstInvalidSequence:           optionalUint(v.FirstInvalidSequence),
		FirstInvalidCheckpointSequence: optionalUint(v.FirstInvalidCheckpointSequence),
	}
}

// VerifyChain recomputes the hash chain of a project's events from
// fromSequence to toSequence (0 for either: from the start, to the head)
// and checks the stored checkpoints, in one call whatever the range's
// length. It subscribes to auditChainVerification over Server-Sent Events:
// the server verifies the whole range and sends progress items (passed to
// the WithVerifyProgress callback), then the verdict. A dropped stream
// resumes from the last progress item's token, retried as the client's
// other calls are (MaxAttempts without progress in between); a server
// without the subscription is verified call by call with verifyAuditChain,
// following its resume tokens.
func (c *Client) VerifyChain(ctx context.Context, projectID string, fromSequence, toSequence uint64, opts ...VerifyOption) (ChainVerification, error) {
	var o verifyOptions
	for _, opt := range opts {
		opt(&o)
	}
	vars := map[string]any{"p": projectID}
	if fromSequence > 0 {
		vars["from"] = strconv.FormatUint(fromSequence, 10)
	}
	if toSequence > 0 {
		vars["to"] = strconv.FormatUint(toSequence, 10)
	}
	for attempt := 1; ; attempt++ {
		res, done, progressed, err := c.verifyStream(ctx, vars, o)
		if ErrorCode(err) == CodeGraphQLValidationFailed && !progressed {
			return c.verifyChainByCalls(ctx, vars, o) // a server without the subscription
		}
		if done {
			return res, err
		}
		if progressed {
			attempt = 1
		}
		retryAfter, ok := retryable(err, query)
		if !ok || attempt >= c.retry.attempts || ctx.Err() != nil {
			return ChainVerification{}, err
		}
		if werr := sleep(ctx, c.retry.delay(attempt, retryAfter)); werr != nil {
			return ChainVerification{}, err
		}
	}
}

// verifyStream runs one auditChainVerification stream of vars. done is set
// with the verdict, or with an error a retry would not mend; otherwise
// err says why the stream ended early, and vars continue after its last
// progress item (progressed when there was one).
func (c *Client) verifyStream(ctx context.Context, vars map[string]any, o verifyOptions) (res ChainVerification, done, progressed bool, err error) {
	s, err := c.SubscribeSSE(ctx, verifyChainStream, vars)
	if err != nil {
		return ChainVerification{}, false, false, err
	}
	defer s.Close()
	for {
		raw, err := s.Next()
		var e *Error
		switch {
		case errors.As(err, &e):
			// The server's answer (bad input, a limit): as the query's.
			_, again := retryable(err, query)
			return ChainVerification{}, !again, progressed, err
		case errors.Is(err, ErrStreamCompleted):
			// Completed without its verdict (a server going away): resume.
			return ChainVerification{}, false, progressed, &transientError{err: errors.New("verification stream completed without its verdict")}
		case err != nil:
			if ctx.Err() != nil {
				return ChainVerification{}, true, progressed, ctx.Err()
			}
			return ChainVerification{}, false, progressed, &transientError{err: err}
		}
		var data struct {
			AuditChainVerification wireVerification
		}
		if err := json.Unmarshal(raw, &data); err != nil {
			return ChainVerification{}, true, progressed, fmt.Errorf("client: decoding a verification item: %w", err)
		}
		v := data.AuditChainVerification
		if v.Complete || v.ResumeToken == nil {
			return v.result(), true, progressed, nil
		}
		// A progress item: a dropped stream resumes after it.
		p := vars["p"]
		clear(vars)
		vars["p"], vars["resume"] = p, *v.ResumeToken
		progressed = true
		if o.progress != nil {
			o.progress(VerifyProgress{CheckedCount: v.CheckedCount, SequenceReached: v.SequenceReached,
				HeadSequence: v.HeadSequence, EventsPerSecond: v.EventsPerSecond})
		}
	}
}

// verifyChainByCalls verifies vars' range with verifyAuditChain, call
// after call, each resuming where the previous stopped at its budget, and
// returns the last call's result.
func (c *Client) verifyChainByCalls(ctx context.Context, vars map[string]any, o verifyOptions) (ChainVerification, error) {
	for {
		var out struct {
			VerifyAuditChain wireVerification
		}
		if err := c.do(ctx, query, verifyChain, vars, &out); err != nil {
			return ChainVerification{}, err
		}
		v := out.VerifyAuditChain
		if v.Complete || v.ResumeToken == nil {
			return v.result(), nil
		}
		vars = map[string]any{"p": vars["p"], "resume": *v.ResumeToken}
		if o.progress != nil {
			o.progress(VerifyProgress{CheckedCount: v.CheckedCount, HeadSequence: v.HeadSequence})
		}
	}
}

// optionalUint is a nullable Uint64, 0 for null.
func optionalUint(s *string) uint64 {
	if s == nil {
		return 0
	}
	n, _ := strconv.ParseUint(*s, 10, 64)
	return n
}
