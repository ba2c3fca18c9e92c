package app

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/jobargs"
)

// WebhookDispatchConfig configures RunWebhookDispatch.
type WebhookDispatchConfig struct {
	// SendTimeout is the sender's total timeout per request, from which a
	// dispatched delivery's time limit follows (DeliveryJobTimeout);
	// default 15 s.
	SendTimeout time.Duration
	// RescueAfter is how long a rescue job waits before River runs the work
	// of a process that died: the fan-out's after RescueAfter, a dispatched
	// delivery's after RescueAfter or its time limit, whichever is larger
	// (River's rule for a job of a process that died: --job-rescue-after);
	// default two minutes.
	RescueAfter time.Duration
	// Linger is how long a project's run waits, before it takes the
	// project's waiting events, for more to come: events recorded within
	// it share the run's transactions (fan-out with the intent, outcome).
	// It is what a lone event waits at most, and an event after a quiet
	// time (dispatchQuiet) does not wait it; default dispatchLinger,
	// negative for none.
	Linger time.Duration
}

// dispatchLinger is the default WebhookDispatchConfig.Linger. At 200 events/s
// with one subscription a run without it covered one or two events, each run
// three transactions (docs/benchmarks.md, "Trickle rows: plans").
const dispatchLinger = 5 * time.Millisecond

// dispatchQuiet is how long the dispatcher must have been handed no event
// for the next one to run at once, without Linger: an event that follows
// none within it is most likely alone (at 20 events/s they are 50 ms
// apart), and its linger would only add a timer's wake-up of the process,
// and its time, to its delivery; at 200 events/s (5 ms apart) every run
// lingers. Events that come while a run is under way still go together
// into the next run, Linger after it.
const dispatchQuiet = 4 * dispatchLinger

// dispatchMaxSpan is the most events one dispatched fan-out covers: a larger
// span (a burst, or a dispatcher that fell behind) goes to River's fan-out
// workers, which run spans in parallel.
const dispatchMaxSpan = maxDeliveryBatch

// dispatchMaxJobs is the most delivery jobs one dispatched fan-out sends
// itself; a fan-out that makes more (many destinations, a burst) leaves them
// all to River's workers.
const dispatchMaxJobs = 4

// dispatchRescueMargin is added to a dispatched delivery's time limit to
// schedule its rescue: the time between the fan-out's commit and the start
// of the delivery's clock.
const dispatchRescueMargin = 5 * time.Second

// RunWebhookDispatch runs this process's webhook dispatcher until ctx
// ends: the fast path of the events this process records (River remains the
// outbox and the rescue).
//
// While it runs, recording an event of a project with subscriptions
// enqueues the project's webhook_fanout job in the recording transaction as
// before, but scheduled RescueAfter ahead instead of available, and once
// the transaction committed hands the events to the dispatcher. The
// dispatcher fans out each project's events in one transaction per run
// (runs of a project one at a time, each until its first attempts are
// answered, so events recorded while one runs go together into the next;
// each run starts Linger after the previous one, or after the first event
// of an idle project, so a lone event waits that long and no more; an
// event that follows a quiet time, dispatchQuiet, waits for none), deletes the fan-out jobs it did the work of in
// that transaction, enqueues each delivery job scheduled ahead as its
// rescue, and commits the jobs' first attempts DELIVERING when their
// destination takes them at once (beginFirstAttempts: the fan-out's durable
// commit is their intent); after the commit it sends them and records the
// outcomes (sendStarted), or runs the other delivery jobs itself
// (deliverWebhooks: durable intent, request, outcomes), and the outcome
// transaction deletes the rescue. So an event at a trickle costs no River
// fetch, no job run and no completion, and its first attempt does not wait
// for a fetch. If the process dies, the rescue jobs come due and River does
// the rest, as for any job of a dead process: deliveries found DELIVERING
// are recorded UNKNOWN and resent under the same webhook-id.
//
// Work the dispatcher does not do itself goes to River at once (its rescue
// job made due now): spans of more than dispatchMaxSpan events, fan-outs of
// more than dispatchMaxJobs delivery jobs, a destination at its limit of
// jobs, open breakers (due at the probe time), errors, and what is pending
// at shutdown. On return, the deliveries under way have finished.
func (a *App) RunWebhookDispatch(ctx context.Context, cfg WebhookDispatchConfig) error {
	if cfg.SendTimeout <= 0 {
		cfg.SendTimeout = 15 * time.Second
	}
	if cfg.RescueAfter <= 0 {
		cfg.RescueAfter = 2 * time.Minute
	}
	if cfg.Linger == 0 {
		cfg.Linger = dispatchLinger
	}
	d := &webhookDispatcher{a: a, cfg: cfg, ctx: context.WithoutCancel(ctx), stop: make(chan struct{}), projects: map[projectKey]*dispatchProject{}}
	if !a.dispatch.CompareAndSwap(nil, d) {
		return errors.New("webhook dispatch: already running")
	}
	<-ctx.Done()
	a.dispatch.CompareAndSwap(d, nil)
	d.mu.Lock()
	d.stopped = true
	close(d.stop)
	var pending []int64
	for key, p := range d.projects {
		if !p.running {
			pending = append(pending, p.rescue...)
			delete(d.projects, key)
		}
	}
	d.mu.Unlock()
	d.handOver(pending, time.Time{})
	d.wg.Wait()
	return nil
}

// webhookDispatcher is the state of RunWebhookDispatch.
type webhookDispatcher struct {
	a   *App
	cfg WebhookDispatchConfig
	// ctx is the dispatcher's context without its cancellation: work under
	// way finishes within its own time limits.
	ctx context.Context
	wg  sync.WaitGroup
	// stop is closed when the dispatcher stops: lingering runs end then.
	stop chan struct{}

	mu       sync.Mutex
	stopped  bool
	projects map[projectKey]*dispatchProject
	// last is when the dispatcher was last handed events (dispatchQuiet).
	last time.Time
}

// dispatchProject is one project's events waiting for the dispatcher:
// [from, to] spans them, rescue are their fan-out jobs; running tells that
// a goroutine works the project.
type dispatchProject struct {
	from, to uint64
	rescue   []int64
	running  bool
}

// fanoutRescue returns the fan-out job of the events [from, to] of a
// project for a recording transaction, and whether the dispatcher takes
// them: then the job is scheduled RescueAfter ahead, and the recording
// hands the events over with dispatched once it committed.
func (a *App) fanoutRescue(tenantID, projectID string, from, to uint64) (domain.OutboxJob, *webhookDispatcher) {
	job := webhookFanoutJob(tenantID, projectID, from, to)
	d := a.dispatch.Load()
	if d == nil || to-from+1 > dispatchMaxSpan {
		return job, nil
	}
	job.ScheduledAt = time.Now().Add(d.cfg.RescueAfter)
	return job, d
}

// dispatched takes the committed events [from, to] of a project, whose
// fan-out job is rescue.
func (d *webhookDispatcher) dispatched(tenantID, projectID string, from, to uint64, rescue int64) {
	key := projectKey{tenantID: tenantID, projectID: projectID}
	d.mu.Lock()
	if d.stopped {
		d.mu.Unlock()
		go d.handOver([]int64{rescue}, time.Time{})
		return
	}
	p := d.projects[key]
	switch {
	case p == nil:
		p = &dispatchProject{from: from, to: to}
		d.projects[key] = p
	case len(p.rescue) == 0:
		p.from, p.to = from, to
	default:
		p.from, p.to = min(p.from, from), max(p.to, to)
	}
	p.rescue = append(p.rescue, rescue)
	now := time.Now()
	quiet := now.Sub(d.last) >= dispatchQuiet
	d.last = now
	if !p.running {
		p.running = true
		d.wg.Add(1)
		go d.run(key, p, quiet)
	}
	d.mu.Unlock()
}

// run works the project's waiting events until none are left, each run
// after cfg.Linger, the first at once when the events came after a quiet
// time (dispatchQuiet).
func (d *webhookDispatcher) run(key projectKey, p *dispatchProject, quiet bool) {
	defer d.wg.Done()
	for {
		if d.cfg.Linger > 0 && !quiet {
			t := time.NewTimer(d.cfg.Linger)
			select {
			case <-t.C:
			case <-d.stop:
				t.Stop()
			}
		}
		quiet = false
		d.mu.Lock()
		from, to, rescue := p.from, p.to, p.rescue
		p.rescue = nil
		if len(rescue) == 0 || d.stopped {
			p.running = false
			delete(d.projects, key)
			d.mu.Unlock()
			d.handOver(rescue, time.Time{})
			return
		}
		d.mu.Unlock()
		if to-from+1 > dispatchMaxSpan {
			d.handOver(rescue, time.Time{})
		} else {
			d.fanOut(key, from, to, rescue)
		}
		// Nothing came meanwhile: end now rather than after one more
		// linger (a timer's wake-up per lone event); the project's next
		// event starts a run of its own, Linger after it.
		d.mu.Lock()
		if len(p.rescue) == 0 && !d.stopped {
			p.running = false
			delete(d.projects, key)
			d.mu.Unlock()
			return
		}
		d.mu.Unlock()
	}
}

// dispatchedJob is a delivery job the dispatcher runs itself, and the id
// of its rescue job.
type dispatchedJob struct {
	args   jobargs.WebhookDeliveryArgs
	rescue int64
}

// fanOut fans out the events [from, to] of the project in one transaction
// that deletes their fan-out jobs rescue, then runs the delivery jobs it
// made, or leaves them to River (see RunWebhookDispatch).
func (d *webhookDispatcher) fanOut(key projectKey, from, to uint64, rescue []int64) {
	a := d.a
	ctx, cancel := context.WithTimeout(d.ctx, defaultDispatchTxTimeout)
	defer cancel()
	var (
		direct  []dispatchedJob
		started []*startedJob
	)
	leaveStarted := func() {
		for _, s := range started {
			s.leave()
		}
		started = started[:0]
	}
	var fan fanoutTries
	err := a.retryTx(ctx, func(ctx context.Context, tx Tx) error {
		direct = direct[:0]
		leaveStarted()
		_, jobs, err := fan.chunk(ctx, a, tx, key.tenantID, key.projectID, from, to)
		if err != nil {
			return err
		}
		tx.DropScheduledJobs(rescue)
		var mine []int
		for i, j := range jobs {
			if _, ok := j.Args.(jobargs.WebhookDeliveryArgs); ok {
				mine = append(mine, i)
			}
		}
		if len(mine) == 0 || len(mine) > dispatchMaxJobs {
			return tx.EnqueueJobs(ctx, jobs...)
		}
		now := time.Now()
		for _, i := range mine {
			n := jobs[i].Args.(jobargs.WebhookDeliveryArgs).Len()
			jobs[i].ScheduledAt = now.Add(max(d.cfg.RescueAfter, a.DeliveryJobTimeout(n, d.cfg.SendTimeout)) + dispatchRescueMargin)
		}
		ids, err := tx.EnqueueJobIDs(ctx, jobs...)
		if err != nil {
			return err
		}
		for _, i := range mine {
			j := dispatchedJob{args: jobs[i].Args.(jobargs.WebhookDeliveryArgs), rescue: ids[i]}
			s, err := d.beginFirstAttempts(ctx, tx, j)
			if err != nil {
				return err
			}
			if s != nil {
				started = append(started, s)
			} else {
				direct = append(direct, j)
			}
		}
		return nil
	})
	if err != nil {
		leaveStarted()
		a.logger.WarnContext(ctx, "webhook dispatch: fan-out failed; left to the fan-out jobs",
			"tenant", key.tenantID, "project", key.projectID, "from", from, "to", to, "err", err)
		d.handOver(rescue, time.Time{})
		return
	}
	// The project's next run waits for these: events recorded meanwhile go
	// together into it (one fan-out, one job per destination), as appends
	// to a project do while its transaction runs.
	// The last job runs on this goroutine: a lone event's costs no
	// hand-over to another goroutine and back.
	var wg sync.WaitGroup
	for i, s := range started {
		if i == len(started)-1 && len(direct) == 0 {
			d.sendStarted(s)
			break
		}
		wg.Go(func() { d.sendStarted(s) })
	}
	for i, j := range direct {
		if i == len(direct)-1 {
			d.deliver(j)
			break
		}
		wg.Go(func() { d.deliver(j) })
	}
	wg.Wait()
}

// defaultDispatchTxTimeout bounds a dispatched fan-out's transaction and a
// hand-over to River.
const defaultDispatchTxTimeout = 30 * time.Second

// deliver runs a dispatched delivery job within its time limit; what it
// leaves undone goes to River through the job's rescue.
func (d *webhookDispatcher) deliver(j dispatchedJob) {
	a := d.a
	ctx, cancel := context.WithTimeout(d.ctx, a.DeliveryJobTimeout(j.args.Len(), d.cfg.SendTimeout))
	defer cancel()
	ctx, span := a.startCommand(ctx, "DeliverWebhooks")
	dropped, err := a.deliverWebhooks(ctx, j.args, []int64{j.rescue})
	a.endCommand(span, err)
	if dropped {
		return
	}
	var at time.Time
	var wait *DestinationWaitError
	switch {
	case errors.As(err, &wait):
		at = wait.Until
	case err != nil && !errors.Is(err, ErrDestinationBusy):
		a.logger.WarnContext(ctx, "webhook dispatch: delivery failed; left to its job", "destination", j.args.DestinationID, "err", err)
	}
	d.handOver([]int64{j.rescue}, at)
}

// handOver makes the rescue jobs ids due at at (zero: now), so that River
// does their work. Should that fail, they still come due when scheduled.
func (d *webhookDispatcher) handOver(ids []int64, at time.Time) {
	if len(ids) == 0 {
		return
	}
	if at.IsZero() {
		at = time.Now()
	}
	a := d.a
	ctx, cancel := context.WithTimeout(d.ctx, defaultDispatchTxTimeout)
	defer cancel()
	if err := a.retryTx(ctx, func(ctx context.Context, tx Tx) error {
		return tx.RescheduleJobs(ctx, ids, at)
	}); err != nil {
		a.logger.WarnContext(ctx, "webhook dispatch: handing jobs to River failed; they run when scheduled", "jobs", len(ids), "err", err)
	}
}
