package app

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/streamsink"
	"github.com/aetheriot/aether-audit/webhook"
)

// RunAuditStreams delivers audit streams until ctx ends: this process's
// stream worker. Several processes may run it on one database; each
// project's cursor is worked by one of them at a time (a lease, taken over
// when it expires: its process died).
//
// It looks for work at once whenever wake receives (the live hub signals
// each committed append), and every StreamConfig.Poll; while no stream
// cursor exists (no stream on the database) it only looks, every Poll,
// whether one does. For each cursor it
// leases, it reads the events after the cursor that the stream's filter
// keeps, delivers them in batches (up to BatchEvents per HTTP request, up
// to ObjectEvents per S3 object, an S3 object waiting up to ObjectMaxAge
// for more) and moves the cursor after each batch the sink acknowledged:
// never before, so that after a crash the stream resumes right after the
// cursor, and only the batch in flight may arrive twice. A failed batch
// leaves the cursor where it is, records lastError and is retried with
// exponential backoff (or the sink's Retry-After).
func (a *App) RunAuditStreams(ctx context.Context, wake <-chan struct{}) error {
	w := &streamWorker{a: a, cfg: a.streams, owner: uuid.Must(uuid.NewV7()), sinks: map[uuid.UUID]*cachedSink{}, done: make(chan struct{}, a.streams.Workers)}
	defer w.closeSinks()
	tick := time.NewTicker(w.cfg.Poll)
	defer tick.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	inFlight := 0
	var lastEnsure time.Time
	// cursors is whether any stream cursor existed at the last look: a
	// process of a database without streams claims nothing, neither at
	// each append nor at each poll (one statement a second instead of two
	// and none per append); a stream created since is found at the next
	// poll.
	cursors := true
	for {
		if ctx.Err() != nil {
			return nil
		}
		// Reap finished workers without blocking.
		for drained := false; !drained; {
			select {
			case <-w.done:
				inFlight--
			default:
				drained = true
			}
		}
		if time.Since(lastEnsure) >= w.cfg.Poll {
			exist, err := a.store.EnsureAuditStreamCursors(ctx)
			if err != nil && ctx.Err() == nil {
				a.logger.Warn("audit streams: creating cursors", "err", err)
			}
			cursors = exist || err != nil
			lastEnsure = time.Now()
			w.pruneSinks(lastEnsure)
		}
		if free := w.cfg.Workers - inFlight; free > 0 && cursors {
			now := a.now()
			cursors, err := a.store.ClaimAuditStreamCursors(ctx, w.owner, now, now.Add(w.cfg.Lease), free)
			if err != nil && ctx.Err() == nil {
				a.logger.Warn("audit streams: claiming work", "err", err)
			}
			for _, c := range cursors {
				inFlight++
				wg.Add(1)
				go func() {
					defer wg.Done()
					w.work(ctx, c)
					w.done <- struct{}{}
				}()
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-wake:
		case <-tick.C:
		case <-w.done:
			inFlight--
		}
	}
}

// streamWorker is one process's stream worker.
type streamWorker struct {
	a     *App
	cfg   StreamConfig
	owner uuid.UUID
	// done receives when a cursor's work ends; it has room for every
	// worker, so that none blocks.
	done chan struct{}

	mu    sync.Mutex
	sinks map[uuid.UUID]*cachedSink
}

// cachedSink is the sink of a stream as of its UpdatedAt.
type cachedSink struct {
	updatedAt time.Time
	sink      streamsink.Sink
	// used is when a worker last took it.
	used time.Time
}

// sinkIdle is how long a cached sink stays unused before it is closed
// (its stream caught up long ago, or was deleted).
const sinkIdle = 10 * time.Minute

// pruneSinks closes the sinks unused for sinkIdle.
func (w *streamWorker) pruneSinks(now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for id, c := range w.sinks {
		if now.Sub(c.used) > sinkIdle {
			_ = c.sink.Close()
			delete(w.sinks, id)
		}
	}
}

// closeSinks closes every cached sink.
func (w *streamWorker) closeSinks() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for id, c := range w.sinks {
		_ = c.sink.Close()
		delete(w.sinks, id)
	}
}

// maxCursorTurn bounds how long one worker keeps a cursor that always has
// more work, so that a backfill does not starve other streams.
const maxCursorTurn = 20 * time.Second

// work delivers one leased cursor's events until it is caught up, fails,
// loses its lease or has had its turn, and gives the lease back.
func (w *streamWorker) work(ctx context.Context, c domain.AuditStreamCursor) {
	a := w.a
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := a.store.ReleaseAuditStreamCursor(rctx, c, w.owner); err != nil {
			a.logger.Warn("audit streams: releasing a cursor", "stream", c.StreamID, "err", err)
		}
	}()
	s, err := a.store.GetAuditStream(ctx, c.TenantID, c.StreamID, false)
	if errors.Is(err, domain.ErrNotFound) {
		w.forgetSink(c.StreamID)
		return
	}
	if err != nil || s.Paused {
		return
	}
	sink, err := w.sinkOf(ctx, s)
	if err != nil {
		w.fail(ctx, c, err)
		return
	}
	limit := w.cfg.BatchEvents
	if s.SinkType == domain.AuditStreamS3 {
		limit = w.cfg.ObjectEvents
	}
	// The next batch is read and encoded while the sink takes the
	// current one: one batch ahead at most.
	rctx, stopReading := context.WithCancel(ctx)
	defer stopReading()
	batches := make(chan *streamsink.Batch, 1)
	var readErr error
	go func() {
		defer close(batches)
		readErr = w.read(rctx, c, s.Filter, sink.Format(), limit, time.Now().Add(maxCursorTurn), batches)
	}()
	defer func() {
		stopReading()
		for b := range batches {
			b.Release()
		}
	}()
	for b := range batches {
		dctx, cancel := context.WithTimeout(ctx, w.cfg.Lease/2)
		err := sink.Deliver(dctx, b)
		cancel()
		through := b.Through
		b.Release()
		if err != nil {
			if ctx.Err() == nil {
				w.fail(ctx, c, err)
			}
			return
		}
		now := a.now()
		ok, err := a.store.AdvanceAuditStreamCursor(ctx, c, through, w.owner, now, now.Add(w.cfg.Lease))
		if err != nil || !ok {
			// Deleted, or the lease passed to another process: it resumes
			// after the cursor it finds, so at most this batch repeats.
			return
		}
		c.Acked, c.Failures, c.LastError = through, 0, ""
	}
	if readErr != nil && ctx.Err() == nil {
		w.fail(ctx, c, readErr)
	}
}

// read reads the batches of c after its cursor, each of up to limit events
// that the stream's filter (nil: none) keeps, encoded in format, and sends
// them to out, until the project's head is reached, ctx ends or the turn
// ends. Each batch's Through is where the cursor moves once it is
// acknowledged: its last event after a full batch, else the head (or the
// end of the range read), so that the cursor passes events the filter
// left out. A smaller S3 object waits for more events, up to ObjectMaxAge
// after its first was recorded.
func (w *streamWorker) read(ctx context.Context, c domain.AuditStreamCursor, filter *domain.AuditEventFilter, format streamsink.Format, limit int, turnEnds time.Time, out chan<- *streamsink.Batch) error {
	a := w.a
	after, head := c.Acked, uint64(0)
	for ctx.Err() == nil && time.Now().Before(turnEnds) {
		if after >= head {
			h, err := a.store.AuditHead(ctx, c.TenantID, c.ProjectID)
			if err != nil {
				return err
			}
			if head = h.Sequence; head <= after {
				return nil
			}
		}
		// Every event the filter keeps up to the head read above is
		// committed (sequences commit in order), so a batch short of
		// limit covers the whole range read.
		bound := head
		if filter == nil {
			bound = min(head, after+uint64(limit))
		}
		b := streamsink.NewBatch(format, c.TenantID, c.ProjectID)
		err := a.store.StreamAuditEventsAfter(ctx, c.TenantID, c.ProjectID, after, bound, filter, limit, b.Append)
		if err == nil {
			err = b.Finish()
		}
		if err != nil {
			b.Release()
			return err
		}
		b.Through = bound
		if b.Events == limit {
			b.Through = b.Last
		}
		if format == streamsink.FormatGzipNDJSON && b.Events > 0 && b.Events < limit {
			if due := b.FirstRecordedAt.Add(w.cfg.ObjectMaxAge); a.now().Before(due) {
				b.Release()
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(due.Sub(a.now())):
				}
				head = 0 // read the head again
				continue
			}
		}
		select {
		case out <- b:
		case <-ctx.Done():
			b.Release()
			return nil
		}
		after = b.Through
	}
	return nil
}

// fail records a failed delivery of c and schedules its retry: after the
// stream's backoff, or once the failures in a row reach the breaker's
// threshold, after the breaker's (domain.AuditStreamCursor.RetryAfterFailure).
func (w *streamWorker) fail(ctx context.Context, c domain.AuditStreamCursor, err error) {
	a := w.a
	msg, wait := "internal error", time.Duration(0)
	var derr *streamsink.DeliveryError
	var aerr *Error
	switch {
	case errors.As(err, &derr):
		msg, wait = derr.Message, derr.RetryAfter
	case errors.As(err, &aerr):
		msg = aerr.Message
	default:
		a.logger.Warn("audit streams: delivery failed", "stream", c.StreamID, "project", c.ProjectID, "err", err)
	}
	wait = max(wait, streamBackoff(c.Failures+1, w.cfg.MaxBackoff))
	now := a.now()
	retryAt, opened := c.RetryAfterFailure(now, wait, a.webhooks.Breaker)
	if opened {
		a.logger.Warn("audit streams: circuit opened", "stream", c.StreamID, "project", c.ProjectID,
			"failures", c.Failures+1, "until", retryAt)
	}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := a.store.FailAuditStreamCursor(fctx, c, w.owner, msg, now, retryAt); err != nil {
		a.logger.Warn("audit streams: recording a failure", "stream", c.StreamID, "err", err)
	}
}

// streamBackoff is the wait after the n-th failure in a row: 1 s doubling
// up to limit, with ±20% jitter.
func streamBackoff(n int, limit time.Duration) time.Duration {
	d := time.Second
	for i := 1; i < n && d < limit; i++ {
		d *= 2
	}
	d = min(d, limit)
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}

// forgetSink closes and drops the cached sink of a deleted stream.
func (w *streamWorker) forgetSink(id uuid.UUID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if c := w.sinks[id]; c != nil {
		_ = c.sink.Close()
		delete(w.sinks, id)
	}
}

// sinkOf returns the sink of s, built once per version of the stream.
func (w *streamWorker) sinkOf(ctx context.Context, s domain.AuditStream) (streamsink.Sink, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if c := w.sinks[s.ID]; c != nil {
		if c.updatedAt.Equal(s.UpdatedAt) {
			c.used = time.Now()
			return c.sink, nil
		}
		_ = c.sink.Close()
		delete(w.sinks, s.ID)
	}
	sink, err := w.a.buildSink(ctx, s)
	if err != nil {
		return nil, err
	}
	w.sinks[s.ID] = &cachedSink{updatedAt: s.UpdatedAt, sink: sink, used: time.Now()}
	return sink, nil
}

// buildSink makes the sink of s, opening its credential with the master
// key.
func (a *App) buildSink(ctx context.Context, s domain.AuditStream) (streamsink.Sink, error) {
	var secret string
	if s.SinkType.HasSecret() {
		if a.webhooks.Box == nil {
			return nil, &streamsink.DeliveryError{Message: "the service has no master key to open the stream's credential"}
		}
		plain, err := a.webhooks.Box.Open(s.SealedSecret, streamSecretAAD(s.ID))
		if err != nil {
			return nil, &streamsink.DeliveryError{Message: "the stream's credential cannot be opened (master key changed?)"}
		}
		secret = string(plain)
	}
	sender := a.webhooks.Sender
	if s.SinkType != domain.AuditStreamS3 && sender == nil {
		return nil, &streamsink.DeliveryError{Message: "the service has no sender configured"}
	}
	switch s.SinkType {
	case domain.AuditStreamS3:
		if a.streams.OpenBucket == nil {
			return nil, &streamsink.DeliveryError{Message: "S3 streams are off: the service has no bucket opener"}
		}
		b, err := a.streams.OpenBucket(ctx, s.SinkURL)
		if err != nil {
			return nil, &streamsink.DeliveryError{Message: "opening the bucket: " + err.Error()}
		}
		return &streamsink.S3{Bucket: b, StreamID: s.ID.String()}, nil
	case domain.AuditStreamHTTPS:
		key, err := webhook.ParseSecret(secret)
		if err != nil {
			return nil, &streamsink.DeliveryError{Message: "the stream's signing secret is unreadable"}
		}
		return &streamsink.HTTPS{Sender: sender, URL: s.SinkURL, StreamID: s.ID.String(), Keys: [][]byte{key}}, nil
	case domain.AuditStreamSplunkHEC:
		return &streamsink.SplunkHEC{Sender: sender, URL: s.SinkURL, StreamID: s.ID.String(), Token: secret}, nil
	case domain.AuditStreamDatadogLogs:
		return &streamsink.DatadogLogs{Sender: sender, URL: s.SinkURL, StreamID: s.ID.String(), APIKey: secret}, nil
	}
	return nil, &streamsink.DeliveryError{Message: "unknown sink type " + string(s.SinkType)}
}
