package app_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
)

func TestWebhookDeliveryQueries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("FiltersPagesAndScope", func(t *testing.T) {
		t.Parallel()
		b := setupWebhooks(t, webhookOpts{})
		b.receiver.setRespond(func(n int, w http.ResponseWriter, r *http.Request) {
			status(map[bool]int{true: 200, false: 500}[r.URL.Path == "/ok"])(n, w, r)
		})
		ok := b.subscribe(t, b.createDestination(t, "/ok").Destination.ID.String(), "device.*")
		failing := b.subscribe(t, b.createDestination(t, "/failing").Destination.ID.String(), "device.*")
		first := b.record(t, "device.a")
		b.record(t, "device.b")
		require.Equal(t, 4, b.fanOut(t))
		b.deliver(t)

		all := b.deliveries(t, app.WebhookDeliveriesInput{})
		require.Len(t, all, 4)
		for i := 1; i < len(all); i++ {
			require.Greater(t, all[i-1].ID.String(), all[i].ID.String(), "newest first")
		}
		for _, d := range all {
			require.Len(t, d.Attempts, 1, "each with its attempts")
		}
		bySub := b.deliveries(t, app.WebhookDeliveriesInput{SubscriptionID: failing.ID.String()})
		require.Len(t, bySub, 2)
		for _, d := range bySub {
			require.Equal(t, failing.ID, d.SubscriptionID)
			require.Equal(t, domain.WebhookDeliveryRetrying, d.State)
		}
		byEvent := b.deliveries(t, app.WebhookDeliveriesInput{EventID: first.ID.String(), SubscriptionID: ok.ID.String()})
		require.Len(t, byEvent, 1)
		require.Equal(t, first.ID, byEvent[0].EventID)
		delivered := b.deliveries(t, app.WebhookDeliveriesInput{State: domain.WebhookDeliveryDelivered})
		require.Len(t, delivered, 2)
		for _, d := range delivered {
			require.Equal(t, ok.ID, d.SubscriptionID)
		}

		one := 1
		var paged []domain.WebhookDelivery
		after := ""
		for {
			page, err := b.app.WebhookDeliveries(ctx, b.admin, app.WebhookDeliveriesInput{ProjectID: "p1", First: &one, After: after})
			require.NoError(t, err)
			paged = append(paged, page.Items...)
			if !page.HasNextPage {
				break
			}
			after = app.IDCursor(page.Items[0].ID)
		}
		require.Equal(t, all, paged)

		for field, in := range map[string]app.WebhookDeliveriesInput{
			"filter.state":          {State: "LOST"},
			"filter.subscriptionId": {SubscriptionID: "x"},
			"filter.eventId":        {EventID: "x"},
			"after":                 {After: "?"},
		} {
			in.ProjectID = "p1"
			_, err := b.app.WebhookDeliveries(ctx, b.admin, in)
			requireCode(t, err, app.CodeBadUserInput)
			require.Equal(t, field, app.ErrorOf(err).Field)
		}

		requireHidden(t, b.admin, app.ErrWebhookDeliveryNotFound, all[0].ID.String(), func(who app.Identity, id string) error {
			_, err := b.app.WebhookDelivery(ctx, who, id)
			return err
		})
		page, err := b.app.WebhookDeliveries(ctx, inTenant(b.admin, "t2"), app.WebhookDeliveriesInput{ProjectID: "p1"})
		require.NoError(t, err)
		require.Empty(t, page.Items)
		onlyP2 := b.admin
		onlyP2.ProjectIDs = []string{"p2"}
		_, err = b.app.WebhookDeliveries(ctx, onlyP2, app.WebhookDeliveriesInput{ProjectID: "p1"})
		require.Equal(t, app.ErrProjectNotFound, err)
		_, err = b.app.WebhookDelivery(ctx, withPermissions(b.admin, app.PermissionWebhooksWrite), all[0].ID.String())
		requireCode(t, err, app.CodeForbidden)
	})
}

func TestRedriveWebhookDelivery(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	// testBundle has one delivery to the receiver, dead-lettered after the
	// three attempts of its schedule (1 h, 5 h) failed with 500s. The
	// receiver fails one request more, then answers 200.
	type testBundle struct {
		*webhookBundle
		dead domain.WebhookDelivery
	}
	schedule := domain.RetrySchedule{time.Hour, 5 * time.Hour}
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		b := &testBundle{webhookBundle: setupWebhooks(t, webhookOpts{schedule: schedule})}
		b.receiver.setRespond(func(n int, w http.ResponseWriter, r *http.Request) {
			status(map[bool]int{true: 500, false: 200}[n <= 4])(n, w, r)
		})
		b.subscribe(t, b.createDestination(t, "/hook").Destination.ID.String(), "device.*")
		e := b.record(t, "device.rebooted")
		b.fanOut(t)
		for range schedule.MaxAttempts() {
			b.deliver(t)
			d := b.deliveries(t, app.WebhookDeliveriesInput{EventID: e.ID.String()})[0]
			if d.NextAttemptAt != nil {
				b.clock.Set(*d.NextAttemptAt)
			}
		}
		b.dead = b.deliveries(t, app.WebhookDeliveriesInput{EventID: e.ID.String()})[0]
		require.Equal(t, domain.WebhookDeliveryDeadLettered, b.dead.State)
		return b
	}

	t.Run("ResetsTheBudgetAndKeepsTheWebhookID", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.clock.Add(24 * time.Hour)
		redriven, err := b.app.RedriveWebhookDelivery(ctx, b.admin, b.dead.ID.String(), true)
		require.NoError(t, err)
		require.Equal(t, domain.WebhookDeliveryPending, redriven.State)
		require.Equal(t, 3, redriven.AttemptCount)
		require.Equal(t, 6, redriven.MaxAttempts, "a fresh budget of the schedule's attempts")
		require.Equal(t, b.dead.IdempotencyKey, redriven.IdempotencyKey)
		require.Equal(t, b.dead.Attempts, redriven.Attempts, "the attempt history stays")
		require.Nil(t, redriven.DeadLetteredAt)
		require.Equal(t, b.clock.Now(), *redriven.NextAttemptAt)
		require.Equal(t, redriven, b.delivery(t, b.dead.ID.String()))

		events := auditEvents(t, b.app, b.admin, "p1", "webhook.delivery.redriven")
		require.Len(t, events, 1)
		require.Equal(t, domain.Resource{Type: "webhook_delivery", ID: b.dead.ID.String()}, events[0].Resource)
		var details map[string]string
		require.NoError(t, json.Unmarshal(events[0].Details, &details))
		require.Equal(t, b.dead.IdempotencyKey, details["idempotencyKey"])

		// Its job was committed with it, due at once; the first retry after
		// it waits the schedule's first delay again, not its last.
		jobs := b.deliveryJobs(t)
		require.Len(t, jobs, 1)
		require.Equal(t, 4, jobs[0].Args.Attempt(0))
		require.NoError(t, b.app.DeliverWebhooks(ctx, jobs[0].Args))
		d := b.delivery(t, b.dead.ID.String())
		require.Equal(t, domain.WebhookDeliveryRetrying, d.State)
		wait := d.NextAttemptAt.Sub(b.clock.Now())
		require.GreaterOrEqual(t, wait, schedule[0]*8/10)
		require.LessOrEqual(t, wait, schedule[0]*12/10)

		b.clock.Set(*d.NextAttemptAt)
		b.deliver(t)
		d = b.delivery(t, b.dead.ID.String())
		require.Equal(t, domain.WebhookDeliveryDelivered, d.State)
		require.Len(t, d.Attempts, 5)
		reqs := b.receiver.requests()
		require.Len(t, reqs, 5)
		for _, req := range reqs {
			require.Equal(t, b.dead.IdempotencyKey, req.Header.Get("webhook-id"), "one webhook-id across retries and the redrive")
		}

		_, err = b.app.RedriveWebhookDelivery(ctx, b.admin, b.dead.ID.String(), true)
		requireCode(t, err, app.CodeInvalidState)
		require.Contains(t, app.ErrorOf(err).Message, "DELIVERED")
	})

	t.Run("Refusals", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := b.dead.ID.String()
		_, err := b.app.RedriveWebhookDelivery(ctx, b.admin, id, false)
		requireCode(t, err, app.CodeConfirmationRequired)
		require.Equal(t, "confirm", app.ErrorOf(err).Field)
		_, err = b.app.RedriveWebhookDelivery(ctx, withPermissions(b.admin, app.PermissionWebhooksRead, app.PermissionWebhooksWrite), id, true)
		requireCode(t, err, app.CodeForbidden)
		requireHidden(t, b.admin, app.ErrWebhookDeliveryNotFound, id, func(who app.Identity, id string) error {
			_, err := b.app.RedriveWebhookDelivery(ctx, who, id, true)
			return err
		})

		require.Equal(t, b.dead, b.delivery(t, id), "nothing changed")
		require.Empty(t, b.deliveryJobs(t), "nothing was enqueued")
		require.Empty(t, auditEvents(t, b.app, b.admin, "p1", "webhook.delivery.redriven"))
	})

	t.Run("OnlyADeadLetter", func(t *testing.T) {
		t.Parallel()
		b := setupWebhooks(t, webhookOpts{})
		b.subscribe(t, b.createDestination(t, "/hook").Destination.ID.String(), "device.*")
		e := b.record(t, "device.rebooted")
		b.fanOut(t)
		pending := b.deliveries(t, app.WebhookDeliveriesInput{EventID: e.ID.String()})[0]
		_, err := b.app.RedriveWebhookDelivery(ctx, b.admin, pending.ID.String(), true)
		requireCode(t, err, app.CodeInvalidState)
		require.Contains(t, app.ErrorOf(err).Message, "PENDING")
	})
}
