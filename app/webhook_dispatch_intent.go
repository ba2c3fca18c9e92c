package app

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/aetheriot/aether-audit/domain"
)

// startedJob is a dispatched delivery job whose first attempts the
// dispatcher's fan-out transaction committed as DELIVERING: what is left
// is to send them and record their outcomes.
type startedJob struct {
	job   dispatchedJob
	dest  domain.WebhookDestination
	slots *destinationSlots
	// leave gives back the job's place among the destination's jobs.
	leave func()
	// preps are the attempts, in order of sequence.
	preps []*preparedAttempt
}

// beginFirstAttempts commits, in the dispatcher's fan-out transaction tx,
// the first attempts of the delivery job j as DELIVERING, so that the
// intent needs no commit of its own: the fan-out's commit is durable and
// comes before any request, and should the process die after it, j's
// rescue job finds the attempts DELIVERING, records them UNKNOWN and
// resends them under the same webhook-ids, as for any job of a dead
// process. It does so only when the job would send everything at once: a
// place among the destination's jobs in this process is free now, the
// destination takes requests (enabled, breaker closed, not tripped in this
// process, no rate limit), and its signing keys open. Otherwise it returns
// nil, and the job runs as any dispatched job does (deliver), which
// decides and records each of these cases. A non-nil result holds the
// place: the caller must leave it.
func (d *webhookDispatcher) beginFirstAttempts(ctx context.Context, tx Tx, j dispatchedJob) (*startedJob, error) {
	a := d.a
	if a.webhooks.Sender == nil || a.webhooks.Box == nil {
		return nil, nil
	}
	deliveryIDs, eventIDs, err := j.args.IDs()
	if err != nil {
		return nil, err
	}
	// A place now or none: the transaction does not wait for one.
	now0, stop := context.WithCancel(ctx)
	stop()
	slots, leave, ok := a.webhooks.enter(now0, j.args.DestinationID)
	if !ok {
		return nil, nil
	}
	s, err := d.prepareFirstAttempts(ctx, tx, j, slots, deliveryIDs, eventIDs)
	if s == nil || err != nil {
		leave()
		return nil, err
	}
	s.leave = leave
	return s, nil
}

// prepareFirstAttempts is beginFirstAttempts once the job holds its place
// among the destination's jobs.
func (d *webhookDispatcher) prepareFirstAttempts(ctx context.Context, tx Tx, j dispatchedJob, slots *destinationSlots, deliveryIDs, eventIDs []uuid.UUID) (*startedJob, error) {
	a := d.a
	now := a.storedNow()
	sc, err := tx.WebhookBatchSendContext(ctx, j.args.TenantID, j.args.DestinationID, deliveryIDs, eventIDs, now)
	if err != nil {
		return nil, err
	}
	dest := sc.Destination
	if gate, _ := dest.Gate(now); gate != domain.WebhookGateSend || dest.RateLimitPerSecond > 0 {
		return nil, nil
	}
	if _, tripped := slots.tripped(a.now()); tripped {
		return nil, nil
	}
	keys, err := a.openSigningKeys(dest, sc.Secrets)
	if err != nil {
		return nil, nil
	}
	slots.setLimit(a.webhooks.inFlightLimit(dest))
	header := destinationHeader(dest)
	changes := make([]domain.WebhookDeliveryChange, 0, len(sc.Deliveries))
	preps := make([]*preparedAttempt, 0, len(sc.Deliveries))
	batch := newAttemptBatch(len(sc.Deliveries))
	for _, dl := range sc.Deliveries {
		event := sc.Events[dl.EventID]
		if dl.State != domain.WebhookDeliveryPending || dl.AttemptCount != 0 || event == nil {
			// Not the job's fresh deliveries as fanned out: the job's
			// own run decides.
			return nil, nil
		}
		change, prep, err := a.beginAttempt(batch, dl, event, dest.URL, keys, nil, now)
		if err != nil {
			return nil, err
		}
		prep.header = header
		changes = append(changes, change)
		preps = append(preps, prep)
	}
	if len(preps) != len(deliveryIDs) {
		return nil, nil
	}
	saved, err := tx.SaveWebhookDeliveriesIf(ctx, changes)
	if err != nil {
		return nil, err
	}
	if len(saved) != len(changes) {
		// Changed by another writer since this transaction read them,
		// which its own inserts rule out: roll back rather than commit a
		// part.
		return nil, errors.New("webhook dispatch: fresh deliveries changed under the fan-out")
	}
	slices.SortFunc(preps, func(x, y *preparedAttempt) int {
		return cmp.Compare(x.delivery.EventSequence, y.delivery.EventSequence)
	})
	return &startedJob{job: j, dest: dest, slots: slots, preps: preps}, nil
}

// sendStarted sends the attempts s committed and records their outcomes
// in one transaction that also deletes s's rescue job; should that fail,
// the rescue job is made due at once, and River's run of it records the
// attempts still DELIVERING as UNKNOWN and resends them.
func (d *webhookDispatcher) sendStarted(s *startedJob) {
	a := d.a
	defer s.leave()
	ctx, cancel := context.WithTimeout(d.ctx, a.DeliveryJobTimeout(len(s.preps), d.cfg.SendTimeout))
	defer cancel()
	ctx, span := a.startCommand(ctx, "DeliverWebhooks")
	results, unsent := a.sendAll(ctx, s.slots, s.preps, true)
	fctx, fcancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer fcancel()
	err := a.finishWebhookAttempts(fctx, s.dest, s.preps, results, unsent, nil, []int64{s.job.rescue})
	a.endCommand(span, err)
	if err != nil {
		a.logger.WarnContext(ctx, "webhook dispatch: recording outcomes failed; left to the delivery's job", "destination", s.dest.ID, "err", err)
		d.handOver([]int64{s.job.rescue}, time.Time{})
	}
}
