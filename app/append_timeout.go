package app

import (
	"context"
	"errors"
	"time"
)

// DefaultAppendTimeout is how long an append of audit events waits, from
// its arrival, for its transaction unless Config.AppendTimeout says
// otherwise.
const DefaultAppendTimeout = time.Minute

// appendGrace is how long past an append's bound its transaction may still
// run on our side: PostgreSQL ends its waits at the bound itself
// (Tx.BoundAppendWaits: a lock wait at the bound, any other a little
// later, canceled), cleanly; the grace only covers the round trip of that
// answer. Past it the context ends the transaction from our side,
// whose outcome is then unknown. It is also the idle time a transaction
// holding the head may spend between its statements.
const appendGrace = 2 * time.Second

// appendRetryAfter is the wait an UNAVAILABLE append suggests.
const appendRetryAfter = time.Second

// errAppendDeadline is the error of an append transaction that would start
// past its bound: it sends nothing.
var errAppendDeadline = errors.New("the append's time bound passed before its transaction ran")

// appendUnavailable is the answer to an append that did not commit within
// its bound, with cause. written tells whether the events may still have
// been recorded (our side gave up on a transaction PostgreSQL may still
// commit) or certainly were not.
func appendUnavailable(cause error, written bool) *Error {
	msg := "the append waited past its time bound (its project's head or history locked by another transaction); nothing was recorded: retry"
	if written {
		msg = "the append's transaction did not finish within its time bound and may still commit: retry with the same event ids"
	}
	return &Error{Code: CodeUnavailable, Message: msg, RetryAfter: appendRetryAfter, Err: cause}
}

// boundedAppendTx runs fn in a transaction as retryTx does, bounded by
// deadline: PostgreSQL ends any lock wait of the transaction at the
// deadline (Tx.BoundAppendWaits, sent with its first statement), and our
// side ends it appendGrace later. A transaction that did not commit by
// then fails with UNAVAILABLE, saying whether it may still commit. When
// parent ends first its error is returned as is (the caller is gone; the
// append may still commit).
func (a *App) boundedAppendTx(parent context.Context, deadline time.Time, fn func(ctx context.Context, tx Tx) error) error {
	ctx, cancel := context.WithDeadline(parent, deadline.Add(appendGrace))
	defer cancel()
	err := a.retryTx(ctx, func(ctx context.Context, tx Tx) error {
		left := time.Until(deadline)
		if left <= 0 {
			return errAppendDeadline
		}
		tx.BoundAppendWaits(left, left+appendGrace)
		return fn(ctx, tx)
	})
	switch {
	case err == nil || parent.Err() != nil:
		return err
	case errors.Is(err, errAppendDeadline) || a.store.IsPastBound(err):
		return appendUnavailable(err, false)
	case ctx.Err() != nil:
		return appendUnavailable(err, true)
	}
	return err
}
