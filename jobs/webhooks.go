package jobs

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/riverqueue/river"

	"github.com/aetheriot/aether-audit/app"
)

// WebhookFanoutWorker turns the outbox fact of recorded events into
// webhook deliveries; see app.App.FanOutWebhookDeliveries.
type WebhookFanoutWorker struct {
	river.WorkerDefaults[app.WebhookFanoutArgs]
	App *app.App
}

// Work implements river.Worker.
func (w *WebhookFanoutWorker) Work(ctx context.Context, job *river.Job[app.WebhookFanoutArgs]) error {
	_, err := w.App.FanOutWebhookDeliveries(ctx, job.Args)
	return err
}

// WebhookDeliveryWorker runs one attempt of a delivery; see
// app.App.DeliverWebhook. The retry schedule is the delivery's own (each
// retry is a new job committed with the failed attempt's outcome); River's
// retries of this job only cover errors of the database around an attempt.
type WebhookDeliveryWorker struct {
	river.WorkerDefaults[app.WebhookDeliveryArgs]
	App *app.App
	// SendTimeout is the sender's total timeout; the job's timeout leaves
	// room for the transactions around the request.
	SendTimeout time.Duration
}

// Timeout implements river.Worker: the request's bound plus time to record
// its outcome.
func (w *WebhookDeliveryWorker) Timeout(*river.Job[app.WebhookDeliveryArgs]) time.Duration {
	return w.SendTimeout + 30*time.Second
}

// Work implements river.Worker.
func (w *WebhookDeliveryWorker) Work(ctx context.Context, job *river.Job[app.WebhookDeliveryArgs]) error {
	return snoozeIfBusy(w.App.DeliverWebhook(ctx, job.Args))
}

// WebhookDeliveryBatchWorker runs the first attempts of a fan-out's new
// deliveries to one destination; see app.App.DeliverWebhookBatch.
type WebhookDeliveryBatchWorker struct {
	river.WorkerDefaults[app.WebhookDeliveryBatchArgs]
	App *app.App
	// SendTimeout is the sender's total timeout per request.
	SendTimeout time.Duration
}

// Timeout implements river.Worker: a batch sends its requests at least one
// at a time, each within SendTimeout.
func (w *WebhookDeliveryBatchWorker) Timeout(job *river.Job[app.WebhookDeliveryBatchArgs]) time.Duration {
	return time.Duration(len(job.Args.DeliveryIDs))*w.SendTimeout + 30*time.Second
}

// Work implements river.Worker.
func (w *WebhookDeliveryBatchWorker) Work(ctx context.Context, job *river.Job[app.WebhookDeliveryBatchArgs]) error {
	return snoozeIfBusy(w.App.DeliverWebhookBatch(ctx, job.Args))
}

// snoozeIfBusy turns app.ErrDestinationBusy into a short snooze: the worker
// goes back to the pool and the job returns soon, without using an attempt.
func snoozeIfBusy(err error) error {
	if errors.Is(err, app.ErrDestinationBusy) {
		return river.JobSnooze(250*time.Millisecond + rand.N(250*time.Millisecond))
	}
	return err
}
