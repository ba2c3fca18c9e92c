package app

import (
	"context"
	"sync"

	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/webhook"
)

// orderedRecordLag bounds the outcomes of an ordered round that are known
// but not recorded yet: the sender waits for the recorder beyond it. A
// crash resends at most that many deliveries the receiver already answered
// (under the same webhook-ids).
const orderedRecordLag = 50

// orderedRecorder records the outcomes of an ordered round's requests in a
// goroutine of its own while the round goes on sending, so that the next
// request waits only for the previous one's answer, never for the database.
// It commits as group commit does: each transaction records every outcome
// that became known while the previous one ran, so a slow database makes
// fewer, larger transactions instead of holding the sender up.
//
// Every intent of the round was committed durably before its first request,
// so recording later changes nothing a crash could break: an outcome not yet
// recorded leaves its delivery DELIVERING, which the lock's next holder
// records as lost and resends under the same webhook-id.
type orderedRecorder struct {
	finish func(from, to int) error

	mu   sync.Mutex
	cond *sync.Cond
	// ready is how many outcomes are known (in order), recorded how many
	// were recorded (or given up after an error).
	ready, recorded int
	closed          bool
	err             error
	done            chan struct{}
}

// startOrderedRecorder starts recording the outcomes of a round's attempts
// sent (results, and unsent for the ones withdrawn unsent) to dest, as the
// round makes them known with advance. ctx bounds the recording (it should
// outlive the job's cancellation, as finishWebhookAttempts' context does).
func (a *App) startOrderedRecorder(ctx context.Context, dest domain.WebhookDestination, sent []*preparedAttempt, results []webhook.Result, unsent []bool) *orderedRecorder {
	return newOrderedRecorder(func(from, to int) error {
		return a.finishWebhookAttempts(ctx, dest, sent[from:to], results[from:to], unsent[from:to], nil, nil)
	})
}

// newOrderedRecorder starts a recorder that records the outcomes [from, to)
// with finish.
func newOrderedRecorder(finish func(from, to int) error) *orderedRecorder {
	r := &orderedRecorder{done: make(chan struct{}), finish: finish}
	r.cond = sync.NewCond(&r.mu)
	go r.run()
	return r
}

// run records what becomes known until the round ends.
func (r *orderedRecorder) run() {
	defer close(r.done)
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		for r.ready == r.recorded && !r.closed {
			r.cond.Wait()
		}
		if r.ready == r.recorded {
			return
		}
		from, to := r.recorded, r.ready
		if r.err == nil {
			r.mu.Unlock()
			err := r.finish(from, to)
			r.mu.Lock()
			if err != nil {
				r.err = err
			}
		}
		r.recorded = to
		r.cond.Broadcast()
	}
}

// advance says that the outcomes before upTo are known (their slices must
// not change afterwards). It waits while more than orderedRecordLag known
// outcomes are not recorded yet, and returns false once recording failed
// (the round should stop sending: the database is in trouble).
func (r *orderedRecorder) advance(upTo int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ready = upTo
	r.cond.Broadcast()
	for r.err == nil && r.ready-r.recorded > orderedRecordLag {
		r.cond.Wait()
	}
	return r.err == nil
}

// wait records the outcomes before upTo, the round's last, and returns the
// first error once everything is recorded.
func (r *orderedRecorder) wait(upTo int) error {
	r.mu.Lock()
	r.ready, r.closed = upTo, true
	r.cond.Broadcast()
	r.mu.Unlock()
	<-r.done
	return r.err
}
