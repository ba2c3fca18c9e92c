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

// failOn answers 500 to requests on path while *broken is set, 200
// otherwise.
func failOn(broken *bool, path string) func(int, http.ResponseWriter, *http.Request) {
	return func(n int, w http.ResponseWriter, r *http.Request) {
		status(map[bool]int{true: 500, false: 200}[*broken && r.URL.Path == path])(n, w, r)
	}
}

func TestRecoverWebhookDeliveries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	// testBundle has, on the destination /down, one dead letter (its three
	// attempts failed) and one RETRYING delivery (its first attempt failed,
	// its retry scheduled in an hour); and a dead letter on /other.
	type testBundle struct {
		*webhookBundle
		down, other    app.WebhookDestinationWithSecret
		dead, retrying domain.WebhookDelivery
		otherDead      domain.WebhookDelivery
		broken         bool
		failedAt       time.Time
		retryJobID     int64
	}
	schedule := domain.RetrySchedule{time.Hour, 5 * time.Hour}
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		b := &testBundle{webhookBundle: setupWebhooks(t, webhookOpts{schedule: schedule}), broken: true}
		b.receiver.setRespond(func(n int, w http.ResponseWriter, r *http.Request) {
			status(map[bool]int{true: 500, false: 200}[b.broken || r.URL.Path == "/other"])(n, w, r)
		})
		b.down, b.other = b.createDestination(t, "/down"), b.createDestination(t, "/other")
		b.subscribe(t, b.down.Destination.ID.String(), "device.*")
		b.subscribe(t, b.other.Destination.ID.String(), "device.*")
		b.failedAt = b.clock.Now()
		b.record(t, "device.first")
		b.fanOut(t)
		for range schedule.MaxAttempts() {
			b.deliver(t)
			for _, d := range b.deliveries(t, app.WebhookDeliveriesInput{}) {
				if d.NextAttemptAt != nil {
					b.clock.Set(*d.NextAttemptAt)
				}
			}
		}
		for _, d := range b.deliveries(t, app.WebhookDeliveriesInput{}) {
			require.Equal(t, domain.WebhookDeliveryDeadLettered, d.State)
			if d.DestinationID == b.down.Destination.ID {
				b.dead = d
			} else {
				b.otherDead = d
			}
		}
		b.clock.Add(time.Minute)
		b.subscribe(t, b.down.Destination.ID.String(), "door.*")
		e := b.record(t, "door.opened")
		b.fanOut(t)
		b.deliver(t)
		b.retrying = b.deliveries(t, app.WebhookDeliveriesInput{EventID: e.ID.String()})[0]
		require.Equal(t, domain.WebhookDeliveryRetrying, b.retrying.State)
		retries := b.deliveryJobs(t)
		require.Len(t, retries, 1)
		require.True(t, retries[0].ScheduledAt.After(time.Now().Add(30*time.Minute)), "the retry waits its hour")
		b.retryJobID = retries[0].ID
		return b
	}

	t.Run("RequeuesDeadLettersAndRetriesOfTheDestination", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.broken = false
		n, err := b.app.RecoverWebhookDeliveries(ctx, b.admin, app.RecoverWebhookDeliveriesInput{
			DestinationID: b.down.Destination.ID.String(), Since: b.failedAt, Confirm: true})
		require.NoError(t, err)
		require.Equal(t, 2, n)

		dead := b.delivery(t, b.dead.ID.String())
		require.Equal(t, domain.WebhookDeliveryPending, dead.State)
		require.Equal(t, 3+schedule.MaxAttempts(), dead.MaxAttempts, "a dead letter gets a fresh budget")
		retrying := b.delivery(t, b.retrying.ID.String())
		require.Equal(t, domain.WebhookDeliveryRetrying, retrying.State)
		require.Equal(t, b.retrying.MaxAttempts, retrying.MaxAttempts, "a retry keeps its budget")
		require.Equal(t, b.clock.Now(), *retrying.NextAttemptAt, "and is due now")
		require.Equal(t, b.otherDead, b.delivery(t, b.otherDead.ID.String()), "another destination's dead letter stays")

		// The retry's own job runs now; the dead letter got a new one.
		var state string
		var scheduled time.Time
		require.NoError(t, b.pool.QueryRow(ctx, "SELECT state::text, scheduled_at FROM river_job WHERE id = $1", b.retryJobID).Scan(&state, &scheduled))
		require.Equal(t, "available", state)
		require.False(t, scheduled.After(time.Now()))
		jobs := b.deliveryJobs(t)
		require.Len(t, jobs, 1)
		require.Equal(t, 4, jobs[0].Args.Attempt(0))

		events := auditEvents(t, b.app, b.admin, "p1", "webhook.deliveries.recovered")
		require.Len(t, events, 1)
		require.Equal(t, domain.Resource{Type: "webhook_destination", ID: b.down.Destination.ID.String()}, events[0].Resource)
		var details map[string]any
		require.NoError(t, json.Unmarshal(events[0].Details, &details))
		require.EqualValues(t, 2, details["count"])

		before := len(b.receiver.requests())
		b.lastDelivery = b.retryJobID - 1
		b.deliver(t)
		require.Equal(t, domain.WebhookDeliveryDelivered, b.delivery(t, b.dead.ID.String()).State)
		require.Equal(t, domain.WebhookDeliveryDelivered, b.delivery(t, b.retrying.ID.String()).State)
		got := map[string]bool{}
		for _, req := range b.receiver.requests()[before:] {
			got[req.Header.Get("webhook-id")] = true
		}
		require.Equal(t, map[string]bool{b.dead.IdempotencyKey: true, b.retrying.IdempotencyKey: true}, got,
			"each sent again under its own webhook-id")

		n, err = b.app.RecoverWebhookDeliveries(ctx, b.admin, app.RecoverWebhookDeliveriesInput{
			DestinationID: b.down.Destination.ID.String(), Since: b.failedAt, Confirm: true})
		require.NoError(t, err)
		require.Zero(t, n, "nothing failed any more")
	})

	t.Run("Since", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		n, err := b.app.RecoverWebhookDeliveries(ctx, b.admin, app.RecoverWebhookDeliveriesInput{
			DestinationID: b.down.Destination.ID.String(), Since: b.retrying.UpdatedAt, Confirm: true})
		require.NoError(t, err)
		require.Equal(t, 1, n, "only the delivery that failed since")
		require.Equal(t, b.dead, b.delivery(t, b.dead.ID.String()))
		n, err = b.app.RecoverWebhookDeliveries(ctx, b.admin, app.RecoverWebhookDeliveriesInput{
			DestinationID: b.down.Destination.ID.String(), Since: b.clock.Now().Add(time.Second), Confirm: true})
		require.NoError(t, err)
		require.Zero(t, n)
	})

	t.Run("Refusals", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		in := func(id string) app.RecoverWebhookDeliveriesInput {
			return app.RecoverWebhookDeliveriesInput{DestinationID: id, Since: b.failedAt, Confirm: true}
		}
		id := b.down.Destination.ID.String()
		noConfirm := in(id)
		noConfirm.Confirm = false
		_, err := b.app.RecoverWebhookDeliveries(ctx, b.admin, noConfirm)
		requireCode(t, err, app.CodeConfirmationRequired)
		noSince := in(id)
		noSince.Since = time.Time{}
		_, err = b.app.RecoverWebhookDeliveries(ctx, b.admin, noSince)
		requireCode(t, err, app.CodeBadUserInput)
		require.Equal(t, "since", app.ErrorOf(err).Field)
		_, err = b.app.RecoverWebhookDeliveries(ctx, withPermissions(b.admin, app.PermissionWebhooksRead, app.PermissionWebhooksWrite), in(id))
		requireCode(t, err, app.CodeForbidden)
		requireHidden(t, b.admin, app.ErrWebhookDestinationNotFound, id, func(who app.Identity, id string) error {
			_, err := b.app.RecoverWebhookDeliveries(ctx, who, in(id))
			return err
		})
		require.Equal(t, b.dead, b.delivery(t, b.dead.ID.String()), "nothing changed")
		require.Empty(t, b.deliveryJobs(t), "nothing was enqueued")
		require.Empty(t, auditEvents(t, b.app, b.admin, "p1", "webhook.deliveries.recovered"))
	})
}

func TestSendWebhookTestEvent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupWebhooks(t, webhookOpts{})
	broken := false
	b.receiver.setRespond(failOn(&broken, "/hook"))
	dest := b.createDestination(t, "/hook")
	id := dest.Destination.ID.String()

	out, err := b.app.SendWebhookTestEvent(ctx, b.admin, id)
	require.NoError(t, err)
	require.Equal(t, domain.WebhookAttemptSucceeded, out.Attempt.Outcome)
	require.Equal(t, 200, *out.Attempt.StatusCode)
	require.Regexp(t, `^msg_test_[0-9a-f]{32}$`, out.WebhookID)
	reqs := b.receiver.requests()
	require.Len(t, reqs, 1)
	require.Equal(t, "/hook", reqs[0].Path)
	require.Equal(t, out.WebhookID, reqs[0].Header.Get("webhook-id"))
	require.Equal(t, []int{0}, signatures(t, dest.SigningSecret, reqs[0]), "signed with the destination's secret")
	var body struct {
		Type string
		Data map[string]string
	}
	require.NoError(t, json.Unmarshal(reqs[0].Body, &body))
	require.Equal(t, "webhook.test", body.Type)
	require.Equal(t, id, body.Data["destinationId"])

	events := auditEvents(t, b.app, b.admin, "p1", "webhook.destination.test_sent")
	require.Len(t, events, 1)
	var details map[string]string
	require.NoError(t, json.Unmarshal(events[0].Details, &details))
	require.Equal(t, out.WebhookID, details["webhookId"])
	require.Empty(t, b.deliveries(t, app.WebhookDeliveriesInput{}), "a test event is not a delivery")

	broken = true
	out, err = b.app.SendWebhookTestEvent(ctx, b.admin, id)
	require.NoError(t, err)
	require.Equal(t, domain.WebhookAttemptFailed, out.Attempt.Outcome)
	require.Equal(t, 500, *out.Attempt.StatusCode)
	require.Equal(t, "ok", out.Attempt.ResponseBody)

	_, err = b.app.SendWebhookTestEvent(ctx, withPermissions(b.admin, app.PermissionWebhooksRead), id)
	requireCode(t, err, app.CodeForbidden)
	requireHidden(t, b.admin, app.ErrWebhookDestinationNotFound, id, func(who app.Identity, id string) error {
		_, err := b.app.SendWebhookTestEvent(ctx, who, id)
		return err
	})
	require.Len(t, b.receiver.requests(), 2, "refusals send nothing")
}

func TestReplayWebhookEvents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupWebhooks(t, webhookOpts{})
	dest := b.createDestination(t, "/hook")
	before := b.record(t, "device.early")
	sub := b.subscribe(t, dest.Destination.ID.String(), "device.*")
	delivered, _ := b.send(t, "device.rebooted")
	other := b.record(t, "door.opened")
	b.fanOut(t)
	original := b.deliveries(t, app.WebhookDeliveriesInput{EventID: delivered.ID.String()})[0]
	require.Equal(t, domain.WebhookDeliveryDelivered, original.State)
	require.Nil(t, original.ReplayOf)

	in := app.ReplayWebhookEventsInput{SubscriptionID: sub.ID.String(), FromSequence: before.Sequence,
		ToSequence: other.Sequence + 1000, Confirm: true}
	out, err := b.app.ReplayWebhookEvents(ctx, b.admin, in)
	require.NoError(t, err)
	require.Equal(t, 2, out.Count, "the matching events of the range, including one before the subscription")

	replayed := b.deliveries(t, app.WebhookDeliveriesInput{SubscriptionID: sub.ID.String()})
	require.Len(t, replayed, 3)
	byEvent := map[string]domain.WebhookDelivery{}
	for _, d := range replayed {
		if d.ReplayOf != nil {
			require.Equal(t, out.ReplayOf, *d.ReplayOf)
			require.Equal(t, domain.WebhookDeliveryPending, d.State)
			byEvent[d.EventID.String()] = d
		}
	}
	require.Len(t, byEvent, 2)
	require.Contains(t, byEvent, before.ID.String())
	again := byEvent[delivered.ID.String()]
	require.NotEqual(t, original.IdempotencyKey, again.IdempotencyKey, "a new webhook-id")

	events := auditEvents(t, b.app, b.admin, "p1", "webhook.events.replayed")
	require.Len(t, events, 1)
	require.Equal(t, out.ReplayOf, events[0].ID)

	n := len(b.receiver.requests())
	b.deliver(t)
	got := map[string]bool{}
	for _, req := range b.receiver.requests()[n:] {
		got[req.Header.Get("webhook-id")] = true
	}
	require.Len(t, got, 2)
	require.True(t, got[again.IdempotencyKey])
	require.Zero(t, b.fanOut(t), "the fan-out stays exactly once beside replays")

	for _, c := range []struct {
		field  string
		change func(*app.ReplayWebhookEventsInput)
	}{
		{"fromSequence", func(in *app.ReplayWebhookEventsInput) { in.FromSequence = 0 }},
		{"toSequence", func(in *app.ReplayWebhookEventsInput) { in.ToSequence = in.FromSequence - 1 }},
		{"toSequence", func(in *app.ReplayWebhookEventsInput) { in.ToSequence = in.FromSequence + app.MaxReplaySequences }},
	} {
		bad := in
		c.change(&bad)
		_, err := b.app.ReplayWebhookEvents(ctx, b.admin, bad)
		requireCode(t, err, app.CodeBadUserInput)
		require.Equal(t, c.field, app.ErrorOf(err).Field)
	}
	noConfirm := in
	noConfirm.Confirm = false
	_, err = b.app.ReplayWebhookEvents(ctx, b.admin, noConfirm)
	requireCode(t, err, app.CodeConfirmationRequired)
	_, err = b.app.ReplayWebhookEvents(ctx, withPermissions(b.admin, app.PermissionWebhooksWrite), in)
	requireCode(t, err, app.CodeForbidden)
	requireHidden(t, b.admin, app.ErrWebhookSubscriptionNotFound, sub.ID.String(), func(who app.Identity, id string) error {
		in := in
		in.SubscriptionID = id
		_, err := b.app.ReplayWebhookEvents(ctx, who, in)
		return err
	})
	_, err = b.app.DisableWebhookSubscription(ctx, b.admin, sub.ID.String())
	require.NoError(t, err)
	_, err = b.app.ReplayWebhookEvents(ctx, b.admin, in)
	requireCode(t, err, app.CodeInvalidState)
	require.Len(t, auditEvents(t, b.app, b.admin, "p1", "webhook.events.replayed"), 1, "refusals are not audited")
}

func TestSkipWebhookDelivery(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupWebhooks(t, webhookOpts{schedule: domain.RetrySchedule{time.Hour}})
	b.receiver.setRespond(status(500))
	b.subscribe(t, b.createDestination(t, "/hook").Destination.ID.String(), "device.*")
	e, _ := b.send(t, "device.rebooted")
	d := b.deliveries(t, app.WebhookDeliveriesInput{EventID: e.ID.String()})[0]
	_, err := b.app.SkipWebhookDelivery(ctx, b.admin, d.ID.String(), true)
	requireCode(t, err, app.CodeInvalidState)
	b.clock.Set(*d.NextAttemptAt)
	b.deliver(t)
	require.Equal(t, domain.WebhookDeliveryDeadLettered, b.delivery(t, d.ID.String()).State)

	_, err = b.app.SkipWebhookDelivery(ctx, b.admin, d.ID.String(), false)
	requireCode(t, err, app.CodeConfirmationRequired)
	_, err = b.app.SkipWebhookDelivery(ctx, withPermissions(b.admin, app.PermissionWebhooksWrite), d.ID.String(), true)
	requireCode(t, err, app.CodeForbidden)
	requireHidden(t, b.admin, app.ErrWebhookDeliveryNotFound, d.ID.String(), func(who app.Identity, id string) error {
		_, err := b.app.SkipWebhookDelivery(ctx, who, id, true)
		return err
	})
	skipped, err := b.app.SkipWebhookDelivery(ctx, b.admin, d.ID.String(), true)
	require.NoError(t, err)
	require.Equal(t, domain.WebhookDeliverySkipped, skipped.State)
	require.Len(t, skipped.Attempts, 2, "its evidence stays")
	require.Len(t, auditEvents(t, b.app, b.admin, "p1", "webhook.delivery.skipped"), 1)
	_, err = b.app.RedriveWebhookDelivery(ctx, b.admin, d.ID.String(), true)
	requireCode(t, err, app.CodeInvalidState)
	_, err = b.app.SkipWebhookDelivery(ctx, b.admin, d.ID.String(), true)
	requireCode(t, err, app.CodeInvalidState)
}
