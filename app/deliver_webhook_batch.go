package app

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/google/uuid"

	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/webhook"
)

// maxDeliveryBatch bounds the deliveries of one batch job.
const maxDeliveryBatch = 50

// WebhookDeliveryBatchArgs asks for the first attempts of new deliveries to
// one destination, created by one fan-out: the fan-out's delivery jobs,
// batched so that their intents and outcomes are written with one
// statement each. Retries, redrives and resends are single jobs
// (WebhookDeliveryArgs).
type WebhookDeliveryBatchArgs struct {
	TenantID      string      `json:"tenant_id"`
	DestinationID uuid.UUID   `json:"destination_id"`
	DeliveryIDs   []uuid.UUID `json:"delivery_ids"`
	EventIDs      []uuid.UUID `json:"event_ids"`
}

// Kind names the job.
func (WebhookDeliveryBatchArgs) Kind() string { return "webhook_delivery_batch" }

// webhookBatchJobs groups new deliveries (all PENDING, no attempt yet) by
// destination into batch jobs of at most maxDeliveryBatch.
func webhookBatchJobs(ds []*domain.WebhookDelivery) []domain.OutboxJob {
	byDest := map[uuid.UUID][]*domain.WebhookDelivery{}
	var order []uuid.UUID
	for _, d := range ds {
		if _, ok := byDest[d.DestinationID]; !ok {
			order = append(order, d.DestinationID)
		}
		byDest[d.DestinationID] = append(byDest[d.DestinationID], d)
	}
	var jobs []domain.OutboxJob
	for _, dest := range order {
		list := byDest[dest]
		for start := 0; start < len(list); start += maxDeliveryBatch {
			part := list[start:min(start+maxDeliveryBatch, len(list))]
			args := WebhookDeliveryBatchArgs{TenantID: part[0].TenantID, DestinationID: dest}
			for _, d := range part {
				args.DeliveryIDs = append(args.DeliveryIDs, d.ID)
				args.EventIDs = append(args.EventIDs, d.EventID)
			}
			jobs = append(jobs, domain.OutboxJob{Args: args, Queue: QueueWebhooks})
		}
	}
	return jobs
}

// DeliverWebhookBatch runs the first attempts of a batch: it commits every
// due attempt as DELIVERING in one statement, sends them (at most
// MaxInFlightPerDestination at a time), then records every outcome in one
// transaction, with the retries' jobs. A delivery of the batch already
// DELIVERING is a rerun after a crash: its attempt is recorded as unknown
// and resent by a job of its own. Deliveries past their first attempt are
// left to their own jobs.
func (a *App) DeliverWebhookBatch(ctx context.Context, args WebhookDeliveryBatchArgs) error {
	if a.webhooks.Sender == nil || a.webhooks.Box == nil {
		return errors.New("webhooks: delivery needs a sender and a master key")
	}
	if len(args.DeliveryIDs) == 0 || len(args.DeliveryIDs) > maxDeliveryBatch {
		return fmt.Errorf("webhook delivery batch of %d deliveries", len(args.DeliveryIDs))
	}
	// The batch's requests go through the destination's in-flight slots it
	// can get now (at least one, waiting briefly for it): a busy
	// destination gives the worker back rather than hold it.
	slots, err := a.takeSlots(ctx, args.DestinationID, len(args.DeliveryIDs))
	if err != nil {
		return err
	}
	defer func() {
		for _, release := range slots {
			release()
		}
	}()
	now := a.storedNow()
	sc, err := a.store.WebhookBatchSendContext(ctx, args.TenantID, args.DestinationID, args.DeliveryIDs, args.EventIDs, now)
	if errors.Is(err, domain.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	keys, keyErr := a.openSigningKeys(sc.Destination, sc.Secrets)
	if keyErr != nil {
		a.logger.ErrorContext(ctx, "webhook signing secret unavailable", "destination", sc.Destination.ID, "err", keyErr)
	}
	var (
		changes []domain.WebhookDeliveryChange
		preps   = map[uuid.UUID]*preparedAttempt{}
	)
	for _, d := range sc.Deliveries {
		switch {
		case d.State == domain.WebhookDeliveryPending && d.AttemptCount == 0:
			event := sc.Events[d.EventID]
			if event == nil {
				return fmt.Errorf("event %s of delivery %s is missing", d.EventID, d.ID)
			}
			change, prep, err := a.beginAttempt(d, event, sc.Destination.URL, keys, keyErr, now)
			if err != nil {
				return err
			}
			changes = append(changes, change)
			preps[d.ID] = prep
		case d.State == domain.WebhookDeliveryDelivering && d.AttemptCount == 1:
			lost := WebhookDeliveryArgs{TenantID: d.TenantID, DeliveryID: d.ID, Attempt: 1}
			if err := a.retryTx(ctx, func(ctx context.Context) error { return a.recordLostAttempt(ctx, lost) }); err != nil {
				return err
			}
		}
	}
	saved, err := a.store.SaveWebhookDeliveriesIf(ctx, changes)
	if err != nil || len(saved) == 0 {
		return err
	}
	sent := make([]*preparedAttempt, len(saved))
	for i, id := range saved {
		sent[i] = preps[id]
	}
	results := a.sendAll(ctx, sent, len(slots))
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	return a.finishWebhookAttempts(fctx, sent, results)
}

// takeSlots takes up to n of the destination's in-flight slots: the first
// waiting briefly (else ErrDestinationBusy), the others only if free now.
func (a *App) takeSlots(ctx context.Context, destinationID uuid.UUID, n int) ([]func(), error) {
	release, ok := a.webhooks.acquire(ctx, destinationID)
	if !ok {
		return nil, ErrDestinationBusy
	}
	slots := []func(){release}
	for len(slots) < n {
		release, ok := a.webhooks.acquireNow(ctx, destinationID)
		if !ok {
			break
		}
		slots = append(slots, release)
	}
	return slots, nil
}

// sendAll sends prepared attempts, parallel at most at a time.
func (a *App) sendAll(ctx context.Context, preps []*preparedAttempt, parallel int) []webhook.Result {
	results := make([]webhook.Result, len(preps))
	next := make(chan int, len(preps))
	for i := range preps {
		next <- i
	}
	close(next)
	var wg sync.WaitGroup
	for range max(parallel, 1) {
		wg.Go(func() {
			for i := range next {
				prep := preps[i]
				if prep.unsendable != nil {
					results[i] = *prep.unsendable
					continue
				}
				results[i] = a.webhooks.Sender.Send(ctx, webhook.Request{
					URL: prep.url, ID: prep.delivery.IdempotencyKey, Timestamp: a.now(), Body: prep.body, Keys: prep.keys,
				})
			}
		})
	}
	wg.Wait()
	return results
}
