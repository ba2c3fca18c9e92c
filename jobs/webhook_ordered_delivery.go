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

// WebhookOrderedDeliveryWorker sends the next deliveries of a subscription
// with ordering SEQUENCE, one after the other; see
// app.App.DeliverOrderedWebhooks.
type WebhookOrderedDeliveryWorker struct {
	river.WorkerDefaults[jobargs.WebhookOrderedDeliveryArgs]
	App *app.App
	// SendTimeout is the sender's total timeout per request.
	SendTimeout time.Duration
}

// Timeout implements river.Worker; see app.OrderedDeliveryJobTimeout.
func (w *WebhookOrderedDeliveryWorker) Timeout(*river.Job[jobargs.WebhookOrderedDeliveryArgs]) time.Duration {
	return app.OrderedDeliveryJobTimeout(w.SendTimeout)
}

// Work implements river.Worker.
func (w *WebhookOrderedDeliveryWorker) Work(ctx context.Context, job *river.Job[jobargs.WebhookOrderedDeliveryArgs]) error {
	err := w.App.DeliverOrderedWebhooks(ctx, job.Args)
	if errors.Is(err, app.ErrSubscriptionBusy) || errors.Is(err, app.ErrDestinationBusy) {
		// Another job sends the subscription's deliveries (or the
		// destination is busy): look again soon, without using an attempt.
		return river.JobSnooze(100*time.Millisecond + rand.N(200*time.Millisecond))
	}
	var wait *app.DestinationWaitError
	if errors.As(err, &wait) {
		// The destination takes no request yet (breaker open, rate limit
		// spent): come back then, without using an attempt.
		return river.JobSnooze(max(time.Until(wait.Until), 0) + rand.N(100*time.Millisecond))
	}
	return err
}
