package main

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// childReply is a line the bench's child processes (the webhook receiver,
// the live-fanout client) answer their commands with.
type childReply interface {
	replyType() string
	replyErr() string
}

func (r receiverReply) replyType() string { return r.Type }
func (r receiverReply) replyErr() string  { return r.Err }
func (r fanoutReply) replyType() string   { return r.Type }
func (r fanoutReply) replyErr() string    { return r.Err }

// collectReplies reads a child process's replies until one of type final,
// which it returns. Replies of type part (none when "") come before it as
// pieces of a long answer and go to each; replies of other types are stale
// (answers to a call that timed out) and are skipped. An "error" reply, the
// process's exit, ctx or timeout end it with an error naming who.
func collectReplies[R childReply](ctx context.Context, replies <-chan R, who, final, part string, each func(R), timeout time.Duration) (R, error) {
	var zero R
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		select {
		case r, ok := <-replies:
			switch {
			case !ok:
				return r, errors.New(who + " exited")
			case r.replyType() == final:
				return r, nil
			case part != "" && r.replyType() == part:
				each(r)
			case r.replyType() == "error":
				return r, fmt.Errorf("%s: %s", who, r.replyErr())
			}
		case <-t.C:
			return zero, fmt.Errorf("%s: no %q within %s", who, final, timeout)
		case <-ctx.Done():
			return zero, ctx.Err()
		}
	}
}
