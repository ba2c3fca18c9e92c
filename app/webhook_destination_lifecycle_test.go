package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
)

// lifecycleBundle has a destination at the receiver's /hook subscribed to
// device.*.
type lifecycleBundle struct {
	*webhookBundle
	dest domain.WebhookDestination
	sub  domain.WebhookSubscription
}

func setupLifecycle(t *testing.T, o webhookOpts) *lifecycleBundle {
	t.Helper()
	b := &lifecycleBundle{webhookBundle: setupWebhooks(t, o)}
	b.dest = b.createDestination(t, "/hook").Destination
	b.sub = b.subscribe(t, b.dest.ID.String(), "device.*")
	return b
}

// sequences returns the data.sequence of each request the receiver got, in
// order of arrival.
func sequences(t *testing.T, reqs []receivedRequest) []string {
	t.Helper()
	out := make([]string, len(reqs))
	for i, r := range reqs {
		var p struct {
			Data struct {
				Sequence string `json:"sequence"`
			} `json:"data"`
		}
		require.NoError(t, json.Unmarshal(r.Body, &p))
		out[i] = p.Data.Sequence
	}
	return out
}

func TestUpdateWebhookDestination(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ptr := func(s string) *string { return &s }
	num := func(n int) *int { return &n }

	t.Run("ChangesSettingsAuditsThemAndSendsTheHeaders", func(t *testing.T) {
		t.Parallel()
		b := setupLifecycle(t, webhookOpts{})
		headers := []domain.WebhookHeader{{Name: "X-Tenant-Route", Value: "eu-1"}, {Name: "X-Api-Key", Value: "k3y-value"}}
		got, err := b.app.UpdateWebhookDestination(ctx, b.admin, app.UpdateWebhookDestinationInput{
			DestinationID: b.dest.ID.String(), URL: ptr(b.receiver.srv.URL + "/v2"), Description: ptr("ledger"),
			RateLimitPerSecond: num(50), MaxInFlight: num(2), Headers: &headers})
		require.NoError(t, err)
		require.Equal(t, b.receiver.srv.URL+"/v2", got.URL)
		require.Equal(t, "ledger", got.Description)
		require.Equal(t, 50, got.RateLimitPerSecond)
		require.Equal(t, 2, got.MaxInFlight)
		require.Equal(t, headers, got.Headers)
		read, err := b.app.WebhookDestination(ctx, b.admin, b.dest.ID.String())
		require.NoError(t, err)
		require.Equal(t, got.URL, read.URL)
		require.Equal(t, headers, read.Headers)
		require.Equal(t, 50, read.RateLimitPerSecond)
		require.Equal(t, 2, read.MaxInFlight)

		events := auditEvents(t, b.app, b.admin, "p1", "webhook.destination.updated")
		require.Len(t, events, 1)
		require.Equal(t, domain.Subject{Type: domain.SubjectUser, ID: "ops"}, events[0].Subject)
		require.Contains(t, string(events[0].Details), `"headerNames":["X-Tenant-Route","X-Api-Key"]`)
		require.NotContains(t, string(events[0].Details), "k3y-value", "header values are never audited")
		require.Contains(t, string(events[0].Details), `"changed":["url","description","rateLimitPerSecond","maxInFlight","headers"]`)

		b.send(t, "device.rebooted")
		reqs := b.receiver.requests()
		require.Len(t, reqs, 1)
		require.Equal(t, "/v2", reqs[0].Path, "the new URL")
		require.Equal(t, "eu-1", reqs[0].Header.Get("X-Tenant-Route"))
		require.Equal(t, "k3y-value", reqs[0].Header.Get("X-Api-Key"))

		// The same settings again change nothing and record nothing.
		_, err = b.app.UpdateWebhookDestination(ctx, b.admin, app.UpdateWebhookDestinationInput{
			DestinationID: b.dest.ID.String(), Description: ptr("ledger"), Headers: &headers})
		require.NoError(t, err)
		require.Len(t, auditEvents(t, b.app, b.admin, "p1", "webhook.destination.updated"), 1)

		// Zero lifts the limits, an empty list removes the headers.
		none := []domain.WebhookHeader{}
		got, err = b.app.UpdateWebhookDestination(ctx, b.admin, app.UpdateWebhookDestinationInput{
			DestinationID: b.dest.ID.String(), RateLimitPerSecond: num(0), MaxInFlight: num(0), Headers: &none})
		require.NoError(t, err)
		require.Zero(t, got.RateLimitPerSecond)
		require.Zero(t, got.MaxInFlight)
		require.Empty(t, got.Headers)
	})

	t.Run("RefusesBadSettings", func(t *testing.T) {
		t.Parallel()
		b := setupLifecycle(t, webhookOpts{})
		many := make([]domain.WebhookHeader, 11)
		for i := range many {
			many[i] = domain.WebhookHeader{Name: fmt.Sprintf("X-H%d", i), Value: "v"}
		}
		for _, c := range []struct {
			field string
			in    app.UpdateWebhookDestinationInput
		}{
			{"url", app.UpdateWebhookDestinationInput{URL: ptr("http://example.com/hook")}},
			{"url", app.UpdateWebhookDestinationInput{URL: ptr("https://10.0.0.5/hook")}},
			{"rateLimitPerSecond", app.UpdateWebhookDestinationInput{RateLimitPerSecond: num(-1)}},
			{"rateLimitPerSecond", app.UpdateWebhookDestinationInput{RateLimitPerSecond: num(domain.MaxWebhookRateLimit + 1)}},
			{"maxInFlight", app.UpdateWebhookDestinationInput{MaxInFlight: num(domain.MaxWebhookMaxInFlight + 1)}},
			{"headers", app.UpdateWebhookDestinationInput{Headers: &many}},
			{"headers[0].name", app.UpdateWebhookDestinationInput{Headers: &[]domain.WebhookHeader{{Name: "webhook-signature", Value: "x"}}}},
			{"headers[0].name", app.UpdateWebhookDestinationInput{Headers: &[]domain.WebhookHeader{{Name: "Content-Type", Value: "x"}}}},
			{"headers[0].name", app.UpdateWebhookDestinationInput{Headers: &[]domain.WebhookHeader{{Name: "Authorization", Value: "x"}}}},
			{"headers[0].name", app.UpdateWebhookDestinationInput{Headers: &[]domain.WebhookHeader{{Name: "Host", Value: "x"}}}},
			{"headers[0].name", app.UpdateWebhookDestinationInput{Headers: &[]domain.WebhookHeader{{Name: "Bad Name", Value: "x"}}}},
			{"headers[1].name", app.UpdateWebhookDestinationInput{Headers: &[]domain.WebhookHeader{{Name: "X-A", Value: "1"}, {Name: "x-a", Value: "2"}}}},
			{"headers[0].value", app.UpdateWebhookDestinationInput{Headers: &[]domain.WebhookHeader{{Name: "X-A", Value: "a\r\nX-Evil: 1"}}}},
			{"headers[0].value", app.UpdateWebhookDestinationInput{Headers: &[]domain.WebhookHeader{{Name: "X-A", Value: strings.Repeat("v", 1025)}}}},
		} {
			c.in.DestinationID = b.dest.ID.String()
			_, err := b.app.UpdateWebhookDestination(ctx, b.admin, c.in)
			requireCode(t, err, app.CodeBadUserInput)
			require.Equal(t, c.field, app.ErrorOf(err).Field, "%+v", c.in)
		}
		require.Empty(t, auditEvents(t, b.app, b.admin, "p1", "webhook.destination.updated"))
	})

	t.Run("HiddenDestinationsLookMissing", func(t *testing.T) {
		t.Parallel()
		b := setupLifecycle(t, webhookOpts{})
		requireHidden(t, b.admin, app.ErrWebhookDestinationNotFound, b.dest.ID.String(), func(who app.Identity, id string) error {
			_, err := b.app.UpdateWebhookDestination(ctx, who, app.UpdateWebhookDestinationInput{DestinationID: id, Description: ptr("x")})
			return err
		})
		_, err := b.app.UpdateWebhookDestination(ctx, withPermissions(b.admin, app.PermissionWebhooksRead),
			app.UpdateWebhookDestinationInput{DestinationID: b.dest.ID.String(), Description: ptr("x")})
		requireCode(t, err, app.CodeForbidden)
	})
}

func TestDisableAndEnableWebhookDestination(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("DeliveriesWaitPausedAndResumeInOrderOfSequence", func(t *testing.T) {
		t.Parallel()
		b := setupLifecycle(t, webhookOpts{})
		one := 1
		_, err := b.app.UpdateWebhookDestination(ctx, b.admin, app.UpdateWebhookDestinationInput{
			DestinationID: b.dest.ID.String(), MaxInFlight: &one})
		require.NoError(t, err)
		// A delivery that failed once waits RETRYING for its retry.
		b.receiver.setRespond(status(http.StatusInternalServerError))
		first, _ := b.send(t, "device.rebooted")
		b.receiver.setRespond(status(http.StatusOK))
		retrying := b.deliveries(t, app.WebhookDeliveriesInput{EventID: first.ID.String()})[0]
		require.Equal(t, domain.WebhookDeliveryRetrying, retrying.State)
		b.record(t, "device.rebooted")
		b.fanOut(t) // a PENDING delivery with its job not run yet

		disabled, err := b.app.DisableWebhookDestination(ctx, b.admin, app.DisableWebhookDestinationInput{
			DestinationID: b.dest.ID.String(), Reason: "receiver maintenance"})
		require.NoError(t, err)
		require.Equal(t, domain.WebhookDestinationDisabled, disabled.State)
		require.Equal(t, "receiver maintenance", disabled.DisabledReason)
		require.Equal(t, b.clock.Now(), *disabled.DisabledAt)
		events := auditEvents(t, b.app, b.admin, "p1", "webhook.destination.disabled")
		require.Len(t, events, 1)
		require.JSONEq(t, fmt.Sprintf(`{"destinationId":%q,"reason":"receiver maintenance","paused":2}`, b.dest.ID), string(events[0].Details))

		// Events recorded while disabled wait too; their jobs send nothing.
		for range 3 {
			b.record(t, "device.rebooted")
		}
		b.fanOut(t)
		b.clock.Set(*retrying.NextAttemptAt)
		b.deliver(t)
		for _, d := range b.deliveries(t, app.WebhookDeliveriesInput{}) {
			require.Equal(t, domain.WebhookDeliveryPaused, d.State, "delivery of %d", d.EventSequence)
			require.Nil(t, d.NextAttemptAt)
		}
		require.Len(t, b.receiver.requests(), 1, "only the attempt before the disable")
		require.Equal(t, 1, b.delivery(t, retrying.ID.String()).AttemptCount, "waiting uses no attempt")

		// Disabling again changes nothing.
		again, err := b.app.DisableWebhookDestination(ctx, b.admin, app.DisableWebhookDestinationInput{DestinationID: b.dest.ID.String()})
		require.NoError(t, err)
		require.Equal(t, disabled, again)
		require.Len(t, auditEvents(t, b.app, b.admin, "p1", "webhook.destination.disabled"), 1)

		enabled, err := b.app.EnableWebhookDestination(ctx, b.admin, b.dest.ID.String())
		require.NoError(t, err)
		require.Equal(t, domain.WebhookDestinationEnabled, enabled.State)
		require.Empty(t, enabled.DisabledReason)
		require.Nil(t, enabled.DisabledAt)
		enabledEvents := auditEvents(t, b.app, b.admin, "p1", "webhook.destination.enabled")
		require.Len(t, enabledEvents, 1)
		require.Contains(t, string(enabledEvents[0].Details), `"resumed":5`)
		_, err = b.app.EnableWebhookDestination(ctx, b.admin, b.dest.ID.String())
		require.NoError(t, err)
		require.Len(t, auditEvents(t, b.app, b.admin, "p1", "webhook.destination.enabled"), 1, "enabled once, audited once")

		b.deliver(t)
		ds := b.deliveries(t, app.WebhookDeliveriesInput{})
		require.Len(t, ds, 5)
		for _, d := range ds {
			require.Equal(t, domain.WebhookDeliveryDelivered, d.State)
		}
		require.Equal(t, 2, b.delivery(t, retrying.ID.String()).AttemptCount, "the retried delivery kept its place and its first attempt")
		got := sequences(t, b.receiver.requests()[1:])
		// The list is newest first by id, which orders deliveries by their
		// event's recording time only to the millisecond (the fan-out's ids,
		// domain.FanoutDeliveryID): the expected order is by sequence.
		seqs := make([]uint64, 0, 5)
		for _, d := range ds {
			seqs = append(seqs, d.EventSequence)
		}
		slices.Sort(seqs)
		want := make([]string, 0, 5)
		for _, s := range seqs {
			want = append(want, fmt.Sprint(s))
		}
		require.Equal(t, want, got, "resumed in order of sequence")
	})

	t.Run("HiddenDestinationsLookMissing", func(t *testing.T) {
		t.Parallel()
		b := setupLifecycle(t, webhookOpts{})
		requireHidden(t, b.admin, app.ErrWebhookDestinationNotFound, b.dest.ID.String(), func(who app.Identity, id string) error {
			_, err := b.app.DisableWebhookDestination(ctx, who, app.DisableWebhookDestinationInput{DestinationID: id})
			return err
		})
		requireHidden(t, b.admin, app.ErrWebhookDestinationNotFound, b.dest.ID.String(), func(who app.Identity, id string) error {
			_, err := b.app.EnableWebhookDestination(ctx, who, id)
			return err
		})
		_, err := b.app.DisableWebhookDestination(ctx, withPermissions(b.admin, app.PermissionWebhooksRead),
			app.DisableWebhookDestinationInput{DestinationID: b.dest.ID.String()})
		requireCode(t, err, app.CodeForbidden)
	})
}

func TestDeleteWebhookDestination(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("EndsSubscriptionsCancelsPendingDeliveriesKeepsEvidence", func(t *testing.T) {
		t.Parallel()
		b := setupLifecycle(t, webhookOpts{})
		delivered, _ := b.send(t, "device.rebooted")
		b.receiver.setRespond(status(http.StatusInternalServerError))
		failing, _ := b.send(t, "device.rebooted") // RETRYING, its retry job enqueued
		pending := b.record(t, "device.rebooted")
		b.fanOut(t)                            // PENDING, its job not run
		late := b.record(t, "device.rebooted") // recorded before the delete, fanned out after it
		retryJobs := b.deliveryJobs(t)

		_, err := b.app.DeleteWebhookDestination(ctx, b.admin, b.dest.ID.String(), false)
		requireCode(t, err, app.CodeConfirmationRequired)

		gone, err := b.app.DeleteWebhookDestination(ctx, b.admin, b.dest.ID.String(), true)
		require.NoError(t, err)
		require.Equal(t, b.clock.Now(), *gone.DeletedAt)
		events := auditEvents(t, b.app, b.admin, "p1", "webhook.destination.deleted")
		require.Len(t, events, 1)
		require.Equal(t, domain.RiskHigh, events[0].Governance.Risk)
		require.Contains(t, string(events[0].Details), `"deliveriesCancelled":2`)
		require.Contains(t, string(events[0].Details), b.sub.ID.String())

		sub, err := b.app.WebhookSubscription(ctx, b.admin, b.sub.ID.String())
		require.NoError(t, err)
		require.Equal(t, domain.WebhookSubscriptionDisabled, sub.State)
		require.Equal(t, events[0].Sequence, sub.DisabledSequence)
		_, err = b.app.WebhookDestination(ctx, b.admin, b.dest.ID.String())
		require.ErrorIs(t, err, app.ErrWebhookDestinationNotFound)
		all, err := b.app.WebhookDestinations(ctx, b.admin, "p1")
		require.NoError(t, err)
		require.Empty(t, all)
		_, err = b.app.DeleteWebhookDestination(ctx, b.admin, b.dest.ID.String(), true)
		require.ErrorIs(t, err, app.ErrWebhookDestinationNotFound, "deleted once")

		// The late event's delivery, and the jobs still queued, end
		// cancelled without a request.
		b.fanOut(t)
		for _, j := range append(retryJobs, b.deliveryJobs(t)...) {
			require.NoError(t, b.app.DeliverWebhooks(ctx, j.Args))
		}
		require.Len(t, b.receiver.requests(), 2, "nothing sent after the delete")
		want := map[string]domain.WebhookDeliveryState{delivered.ID.String(): domain.WebhookDeliveryDelivered,
			failing.ID.String(): domain.WebhookDeliveryCancelled, pending.ID.String(): domain.WebhookDeliveryCancelled,
			late.ID.String(): domain.WebhookDeliveryCancelled}
		for event, state := range want {
			ds := b.deliveries(t, app.WebhookDeliveriesInput{EventID: event})
			require.Len(t, ds, 1)
			require.Equal(t, state, ds[0].State)
			if state == domain.WebhookDeliveryCancelled {
				require.Contains(t, ds[0].LastError, "deleted")
			}
		}
		require.Len(t, b.deliveries(t, app.WebhookDeliveriesInput{EventID: failing.ID.String()})[0].Attempts, 1, "attempts are kept")
	})

	t.Run("HiddenDestinationsLookMissing", func(t *testing.T) {
		t.Parallel()
		b := setupLifecycle(t, webhookOpts{})
		requireHidden(t, b.admin, app.ErrWebhookDestinationNotFound, b.dest.ID.String(), func(who app.Identity, id string) error {
			_, err := b.app.DeleteWebhookDestination(ctx, who, id, true)
			return err
		})
		_, err := b.app.DeleteWebhookDestination(ctx, withPermissions(b.admin, app.PermissionWebhooksRead), b.dest.ID.String(), true)
		requireCode(t, err, app.CodeForbidden)
		_, err = b.app.WebhookDestination(ctx, b.admin, b.dest.ID.String())
		require.NoError(t, err, "still there")
	})
}
