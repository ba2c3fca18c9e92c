package app

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"gocloud.dev/gcerrors"

	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/export"
	"github.com/aetheriot/aether-audit/jobargs"
)

// DataExportRun is one run of an export's job, as River gives it.
type DataExportRun struct {
	Args jobargs.DataExportJobArgs
	// Attempt is River's attempt number of the job (1-based). From attempt
	// MaxAttempts on (default 3), a run that fails fails the export rather
	// than leave it to another run.
	Attempt, MaxAttempts int
	// Complete, when set, completes the run's River job in the transaction
	// that settles the export (a worker calls Tx.CompleteJob with its job),
	// so that an export turns READY together with its job's completion; an
	// error rolls the settlement back. Nil leaves the job alone.
	Complete func(ctx context.Context, tx Tx) error
}

// RunDataExport runs an export: QUEUED -> RUNNING, then it streams the rows
// in order from PostgreSQL through the encoder, optional gzip, a SHA-256
// hasher and a byte counter into a fresh object (leftover objects of earlier
// crashed attempts are deleted first; an object is written once and never
// overwritten), reporting progress while it runs. On success, in one
// transaction with the job's completion: READY with the object's reference,
// digest, length and row count. On failure the object is discarded: a
// failure the user can act on (the size bound) fails the export at once with
// its reason; any other error is retried by River and fails the export on
// the last attempt. A run of an export that is no longer QUEUED or RUNNING
// does nothing.
func (a *App) RunDataExport(ctx context.Context, run DataExportRun) (err error) {
	ctx, span := a.startCommand(ctx, "RunDataExport")
	defer func() { a.endCommand(span, err) }()
	cfg := a.exports
	if cfg.Bucket == nil {
		return errors.New("exports: no object storage configured")
	}
	var e domain.DataExport
	proceed := false
	err = a.retryTx(ctx, func(ctx context.Context, tx Tx) error {
		var err error
		e, err = tx.GetDataExport(ctx, run.Args.TenantID, run.Args.ExportID, true)
		if err != nil {
			return err
		}
		switch e.State {
		case domain.DataExportQueued:
			if err := e.Start(a.storedNow()); err != nil {
				return err
			}
			proceed = true
			return tx.UpdateDataExport(ctx, e)
		case domain.DataExportRunning:
			proceed = true // a rerun after a crash or an error: start over
		}
		return nil
	})
	if errors.Is(err, domain.ErrNotFound) {
		return nil
	}
	if err != nil || !proceed {
		return err
	}
	start, ready, size := time.Now(), false, uint64(0)
	defer func() {
		outcome := ExportRunReady
		switch {
		case err != nil:
			outcome = ExportRunError
		case !ready:
			outcome = ExportRunFailed // exportError failed the export
		}
		a.observer.DataExportRun(strings.ToLower(string(e.Kind)), outcome, time.Since(start), size)
	}()

	prefix := export.KeyPrefix(e.TenantID, e.ProjectID, e.ID)
	if err := export.DeletePrefix(ctx, cfg.Bucket, prefix, ""); err != nil {
		return a.exportError(ctx, run, e, err)
	}
	key := export.Key(e.TenantID, e.ProjectID, e.ID, run.Attempt, e.Format, e.Compression)
	res, last, err := a.writeExportObject(ctx, e, key)
	if err != nil {
		return a.exportError(ctx, run, e, err)
	}
	// An AUDIT export records the checkpoint at its last exported sequence,
	// signing it now if there is none. A filtered one does not: its rows are
	// not a contiguous piece of the chain, so no checkpoint can vouch for
	// the file (verify the unfiltered export, or use verifyAuditChain).
	var cp *domain.ExportCheckpoint
	if e.Kind == domain.DataExportAudit && e.Filter == nil && res.Rows > 0 && a.checkpoints != nil {
		c, err := a.signCheckpoint(ctx, e.TenantID, e.ProjectID, last, 0)
		if err != nil {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
			_ = cfg.Bucket.Delete(rctx, key)
			cancel()
			return a.exportError(ctx, run, e, err)
		}
		cp = &domain.ExportCheckpoint{Sequence: c.Sequence, JWS: c.JWS}
	}
	err = a.settleExport(ctx, run, e, func(cur *domain.DataExport, now time.Time) error {
		return cur.Complete(now, key, res.Digest, res.Bytes, res.Rows, now.Add(cfg.TTL), cp)
	})
	if err != nil {
		// Unless the commit went through after all (an ambiguous failure),
		// the export is not READY and its object must not stay behind.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
		defer cancel()
		if cur, rerr := a.store.GetDataExport(rctx, e.TenantID, e.ID, false); rerr == nil &&
			!(cur.State == domain.DataExportReady && cur.ObjectRef == key) {
			_ = cfg.Bucket.Delete(rctx, key)
		}
		return err
	}
	ready, size = true, res.Bytes
	return nil
}

// errExportRangeGone fails an export by sequence range whose events are
// no longer all there (retention purged some after the request).
var errExportRangeGone = errors.New("export: events of the sequence range are missing")

// writeExportObject streams e's rows into a new object at key, reporting
// progress every exportProgressInterval. For an AUDIT export it also
// returns the sequence of the last row written.
func (a *App) writeExportObject(ctx context.Context, e domain.DataExport, key string) (_ export.ObjectResult, last uint64, _ error) {
	w, err := export.CreateObject(ctx, a.exports.Bucket, key, e.Kind, e.Format, e.Compression, a.exports.MaxBytes)
	if err != nil {
		return export.ObjectResult{}, 0, err
	}
	defer w.Abort()

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(exportProgressInterval)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				rows, bytes := w.Progress()
				if err := a.store.UpdateDataExportProgress(ctx, e.TenantID, e.ID, rows, bytes, a.storedNow()); err != nil && ctx.Err() == nil {
					a.logger.WarnContext(ctx, "export progress not recorded", "export", e.ID, "err", err)
				}
			}
		}
	})
	defer func() { close(stop); wg.Wait() }()

	// A write that fails (the size bound) cancels the query, rather than
	// read its remaining rows for nothing.
	sctx, stopQuery := context.WithCancel(ctx)
	defer stopQuery()
	writeAudit := func(ev *domain.AuditEvent) error {
		last = ev.Sequence
		return w.WriteAudit(ev)
	}
	switch {
	case e.Kind == domain.DataExportAudit && e.FromSequence != nil && e.Filter != nil:
		// The events of FromSequence..ToSequence that pass the filter: not
		// dense, so a purge is found by the purged prefix instead, read
		// after the rows (a purge that ran before or while they were read
		// has moved it).
		err = a.store.StreamAuditEventsBySequence(sctx, e.TenantID, e.ProjectID, *e.FromSequence, *e.ToSequence,
			e.Filter, stopOnError(stopQuery, writeAudit))
		if err == nil {
			var purged domain.PurgedPrefix
			if purged, err = a.store.AuditPurgedPrefix(ctx, e.TenantID, e.ProjectID); err == nil && *e.FromSequence <= purged.Through {
				err = errExportRangeGone
			}
		}
	case e.Kind == domain.DataExportAudit && e.FromSequence != nil:
		// Exactly the events FromSequence..ToSequence, dense.
		next := *e.FromSequence
		err = a.store.StreamAuditEventsBySequence(sctx, e.TenantID, e.ProjectID, *e.FromSequence, *e.ToSequence,
			nil, stopOnError(stopQuery, func(ev *domain.AuditEvent) error {
				if ev.Sequence != next {
					return errExportRangeGone
				}
				next++
				return writeAudit(ev)
			}))
		if err == nil && next <= *e.ToSequence {
			err = errExportRangeGone
		}
	case e.Kind == domain.DataExportAudit:
		err = a.store.StreamAuditEventsByTime(sctx, e.TenantID, e.ProjectID, e.From, e.To, e.Filter, stopOnError(stopQuery, writeAudit))
	case e.Kind == domain.DataExportAlarm:
		err = a.store.StreamAlarmHistory(sctx, e.TenantID, e.ProjectID, e.From, e.To, stopOnError(stopQuery, w.WriteAlarm))
	case e.Kind == domain.DataExportTelemetry:
		err = a.store.StreamTelemetryHistory(sctx, e.TenantID, e.ProjectID, e.From, e.To, stopOnError(stopQuery, w.WriteTelemetry))
	default:
		err = fmt.Errorf("unknown export kind %q", e.Kind)
	}
	if err != nil {
		return export.ObjectResult{}, 0, err
	}
	res, err := w.Commit()
	return res, last, err
}

// exportError decides what an export's failure means: a reason the user
// can act on fails it now; a cancellation (shutdown) leaves it RUNNING for
// the job's retry; another error fails it on the job's last attempt and is
// retried before that.
func (a *App) exportError(ctx context.Context, run DataExportRun, e domain.DataExport, cause error) error {
	var reason string
	last := run.MaxAttempts
	if last <= 0 {
		last = dataExportFailingRuns
	}
	switch {
	case errors.Is(cause, export.ErrTooLarge):
		reason = fmt.Sprintf("the export would exceed %d bytes; request a shorter time range", a.exports.MaxBytes)
	case errors.Is(cause, errExportRangeGone):
		reason = "events of the sequence range were purged by retention before the export ran; request the range that remains"
	case errors.Is(cause, ErrChainDoesNotRecompute):
		reason = "the audit chain does not recompute, so no checkpoint could be signed for the export; run verifyAuditChain"
	case ctx.Err() != nil && run.Attempt < dataExportJobAttempts:
		return cause // cut short (shutdown): not the export's failure; a later run resumes
	case run.Attempt >= last:
		a.logger.ErrorContext(ctx, "export failed", "export", e.ID, "err", cause)
		reason = fmt.Sprintf("the export failed after %d attempts because of an internal error; request it again", run.Attempt)
	default:
		return cause // a later run tries again
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	return a.settleExport(ctx, run, e, func(cur *domain.DataExport, now time.Time) error {
		return cur.Fail(now, reason)
	})
}

// settleExport ends a run: in one transaction it moves the export (locked)
// by the domain's transition move, records its outcome's operational event
// (export.ready, export.failed) and completes the run's job.
func (a *App) settleExport(ctx context.Context, run DataExportRun, e domain.DataExport, move func(*domain.DataExport, time.Time) error) error {
	return a.retryTx(ctx, func(ctx context.Context, tx Tx) error {
		cur, err := tx.GetDataExport(ctx, e.TenantID, e.ID, true)
		if err != nil {
			return err
		}
		now := a.storedNow()
		if err := move(&cur, now); err != nil {
			return err
		}
		if err := tx.UpdateDataExport(ctx, cur); err != nil {
			return err
		}
		if err := a.recordExportOutcome(ctx, tx, cur, now); err != nil {
			return err
		}
		if run.Complete != nil {
			return run.Complete(ctx, tx)
		}
		return nil
	})
}

func isBlobNotFound(err error) bool { return gcerrors.Code(err) == gcerrors.NotFound }

// stopOnError wraps a row writer so that its first error also calls stop.
func stopOnError[T any](stop func(), write func(T) error) func(T) error {
	return func(v T) error {
		if err := write(v); err != nil {
			stop()
			return err
		}
		return nil
	}
}
