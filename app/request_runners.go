package app

import "time"

// runnerIdle is how long a request runner waits for its next request
// before its goroutine ends.
const runnerIdle = 2 * time.Second

// requestRunners run webhook requests on goroutines that outlive one
// request: a runner that finished a request takes the next one handed
// out within runnerIdle, else its goroutine ends. A request's goroutine
// grows its stack deep in net/http (the pool's lookup of an idle
// connection); a fresh goroutine per request copied its stack while
// growing it, about 6 % of the bench process's CPU in the webhook-delivery
// fan-out rows (docs/benchmarks.md). There are never more runners than
// requests under way plus the ones idle since less than runnerIdle.
type requestRunners struct {
	// work hands a request to an idle runner: unbuffered, so that a send
	// succeeds only when a runner waits.
	work chan func()
}

func newRequestRunners() *requestRunners {
	return &requestRunners{work: make(chan func())}
}

// run runs f on an idle runner, or on a new one when none is idle. It does
// not wait for f.
func (r *requestRunners) run(f func()) {
	select {
	case r.work <- f:
	default:
		go r.loop(f)
	}
}

// loop runs f, then the requests handed to it, until it was idle for
// runnerIdle.
func (r *requestRunners) loop(f func()) {
	idle := time.NewTimer(runnerIdle)
	defer idle.Stop()
	for {
		f()
		idle.Reset(runnerIdle)
		select {
		case f = <-r.work:
		case <-idle.C:
			return
		}
	}
}
