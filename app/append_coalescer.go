package app

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/aetheriot/aether-audit/domain"
)

// maxCoalescedEvents bounds the events one coalesced transaction appends.
const maxCoalescedEvents = 5000

// projectKey names one tenant's project.
type projectKey struct{ tenantID, projectID string }

// appendCoalescer turns concurrent appends to one project into shared
// transactions. Appends to a project are serialised by its head lock anyway;
// rather than queueing at the database, one commit at a time, requests that
// arrive while a transaction runs wait in memory and go together into the
// next one: one lock, one insert, one commit for all of them. A request
// arriving at an idle project starts a transaction at once, so coalescing
// adds no latency.
//
// It also remembers the head each project's last coalesced transaction
// committed (knownHeads): the next transaction of that project expects it
// (Tx.ExpectAuditHead) instead of reading it first, which saves the
// append a round trip; when another process or a command moved the head
// meanwhile, that transaction fails before writing anything and runs again
// with the head read under its lock.
type appendCoalescer struct {
	mu     sync.Mutex
	queues map[projectKey]*projectQueue
	heads  knownHeads
}

type projectQueue struct {
	waiting []*coalescedAppend
}

type coalescedAppend struct {
	*appendRequest
	// deadline is when the append's wait ends: its arrival plus the
	// append timeout (Config.AppendTimeout).
	deadline time.Time
	done     chan struct{}
}

// appendCoalesced appends req, all of one project, in a transaction shared
// with concurrent appends to that project. Each request succeeds or fails on
// its own: an IDEMPOTENCY_CONFLICT of one does not affect the others.
//
// A request to an idle project runs its transaction on the caller's
// goroutine (a lone event at a trickle costs no goroutine and no hand-over
// between threads: docs/benchmarks.md, "Trickle rows: the idle floor"),
// and hands the requests that arrived meanwhile to a goroutine that drains
// them. A request that finds a transaction of its project under way waits
// for the next one. When ctx ends first the caller gets ctx's error, but
// the append may still commit: a dropped client does not change the
// outcome. Only a transaction of the caller's request alone runs under
// ctx; one shared with others runs detached from every caller.
//
// Every request's wait is bounded by the append timeout from its arrival
// (a.appendTimeout, see boundedAppendTx): a transaction is bounded by the
// earliest deadline of its requests, and a request still waiting for one
// at its deadline leaves the queue, unwritten. Either way the request
// fails with UNAVAILABLE, and the project's next append starts afresh.
func (a *App) appendCoalesced(ctx context.Context, tenantID, projectID string, req *appendRequest) ([]domain.AuditEvent, error) {
	call := &coalescedAppend{appendRequest: req, deadline: time.Now().Add(a.appendTimeout), done: make(chan struct{})}
	key := projectKey{tenantID, projectID}
	c := &a.coalescer
	c.mu.Lock()
	if c.queues == nil {
		c.queues = map[projectKey]*projectQueue{}
	}
	q, running := c.queues[key]
	if !running {
		q = &projectQueue{}
		c.queues[key] = q
	}
	q.waiting = append(q.waiting, call)
	c.mu.Unlock()
	if !running {
		calls := c.next(key, q)
		parent := context.Background()
		if len(calls) == 1 {
			parent = ctx
		}
		a.appendTx(parent, key, calls)
		if c.more(key, q) {
			go a.drainAppends(key, q)
		}
		return call.events, call.err
	}
	timer := time.NewTimer(time.Until(call.deadline))
	defer timer.Stop()
	select {
	case <-call.done:
		return call.events, call.err
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-timer.C:
		if c.withdraw(q, call) {
			return nil, appendUnavailable(errAppendDeadline, false)
		}
	}
	// The call is in a transaction, which ends by the call's deadline
	// (plus appendGrace).
	select {
	case <-call.done:
		return call.events, call.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// withdraw takes call off q if no transaction has taken it yet, and
// reports whether it did.
func (c *appendCoalescer) withdraw(q *projectQueue, call *coalescedAppend) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := slices.Index(q.waiting, call)
	if i < 0 {
		return false
	}
	q.waiting = slices.Delete(q.waiting, i, i+1)
	return true
}

// next takes the calls of the project's next transaction off q, or, when
// none are waiting, ends q's run and returns none.
func (c *appendCoalescer) next(key projectKey, q *projectQueue) []*coalescedAppend {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, events := 0, 0
	for n < len(q.waiting) && (n == 0 || events+len(q.waiting[n].drafts) <= maxCoalescedEvents) {
		events += len(q.waiting[n].drafts)
		n++
	}
	if n == 0 {
		delete(c.queues, key)
		return nil
	}
	calls := q.waiting[:n:n]
	q.waiting = q.waiting[n:]
	return calls
}

// more reports whether calls are waiting on q; if none are, it ends q's
// run.
func (c *appendCoalescer) more(key projectKey, q *projectQueue) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(q.waiting) > 0 {
		return true
	}
	delete(c.queues, key)
	return false
}

// drainAppends runs transactions for the project's waiting appends until
// none are left.
func (a *App) drainAppends(key projectKey, q *projectQueue) {
	for calls := a.coalescer.next(key, q); calls != nil; calls = a.coalescer.next(key, q) {
		a.appendTx(context.Background(), key, calls)
	}
}

// appendTx appends calls, all of the project key, in one transaction under
// parent, bounded by the earliest of the calls' deadlines
// (boundedAppendTx), and closes each call's done.
func (a *App) appendTx(parent context.Context, key projectKey, calls []*coalescedAppend) {
	c := &a.coalescer
	reqs := make([]*appendRequest, len(calls))
	deadline := calls[0].deadline
	for i, call := range calls {
		reqs[i] = call.appendRequest
		if call.deadline.Before(deadline) {
			deadline = call.deadline
		}
	}
	known, expect := c.heads.get(key)
	var left lockedHead
	err := a.boundedAppendTx(parent, deadline, func(ctx context.Context, tx Tx) error {
		locked := known
		if expect {
			// Only the first attempt expects: a retry reads the head.
			expect = false
			if err := tx.ExpectAuditHead(ctx, key.tenantID, key.projectID, known.head, known.webhooks); err != nil {
				return err
			}
		} else {
			head, webhooks, err := tx.LockAuditHead(ctx, key.tenantID, key.projectID)
			if err != nil {
				return err
			}
			locked = lockedHead{head, webhooks}
		}
		existing, err := a.findExisting(ctx, tx, key.tenantID, reqs)
		if err != nil {
			return err
		}
		for _, r := range reqs {
			r.reset()
		}
		head, err := a.sealAndInsert(ctx, tx, key.tenantID, key.projectID, locked, newSealBatch(existing), reqs, a.now())
		left = lockedHead{head, locked.webhooks}
		return err
	})
	c.heads.committed(key, left, err == nil)
	for _, call := range calls {
		if err != nil {
			call.err = err
		}
		close(call.done)
	}
}
