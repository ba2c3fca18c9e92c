package jobs

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/riverqueue/river"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/jobargs"
)

// WebhookFanoutWorker turns the outbox fact of recorded events into
// webhook deliveries; see app.App.FanOutWebhookDeliveries. Jobs of one
// project that start within a few milliseconds of each other run as one
// (app.App.CoalesceWebhookFanout).
type WebhookFanoutWorker struct {
	river.WorkerDefaults[jobargs.WebhookFanoutArgs]
	App *app.App
}

// Timeout implements river.Worker.
func (w *WebhookFanoutWorker) Timeout(*river.Job[jobargs.WebhookFanoutArgs]) time.Duration {
	return defaultJobTimeout
}

// Work implements river.Worker.
func (w *WebhookFanoutWorker) Work(ctx context.Context, job *river.Job[jobargs.WebhookFanoutArgs]) error {
	_, err := w.App.CoalesceWebhookFanout(ctx, job.Args)
	return err
}

// WebhookDeliveryWorker runs the attempts of a delivery job; see
// app.App.DeliverWebhooks. The retry schedule is the deliveries' own (each
// retry is a new job committed with the failed attempt's outcome); River's
// retries of this job only cover errors of the database around attempts.
type WebhookDeliveryWorker struct {
	river.WorkerDefaults[jobargs.WebhookDeliveryArgs]
	App *app.App
	// SendTimeout is the sender's total timeout per request.
	SendTimeout time.Duration
}

// Timeout implements river.Worker; see app.App.DeliveryJobTimeout.
func (w *WebhookDeliveryWorker) Timeout(job *river.Job[jobargs.WebhookDeliveryArgs]) time.Duration {
	return w.App.DeliveryJobTimeout(job.Args.Len(), w.SendTimeout)
}

// Work implements river.Worker.
func (w *WebhookDeliveryWorker) Work(ctx context.Context, job *river.Job[jobargs.WebhookDeliveryArgs]) error {
	err := w.App.DeliverWebhooks(ctx, job.Args)
	if errors.Is(err, app.ErrDestinationBusy) {
		// Give the worker back and try again soon, without using an attempt.
		return river.JobSnooze(250*time.Millisecond + rand.N(250*time.Millisecond))
	}
	var wait *app.DestinationWaitError
	if errors.As(err, &wait) {
		// The destination takes no request yet (breaker open, rate limit
		// spent): come back then, a little spread, without using an attempt.
		return river.JobSnooze(max(time.Until(wait.Until), 0) + rand.N(100*time.Millisecond))
	}
	return err
}
