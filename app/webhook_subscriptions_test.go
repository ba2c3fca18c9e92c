package app_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
)

func TestCreateWebhookSubscription(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	// testBundle has a destination in p1.
	type testBundle struct {
		*webhookBundle
		destID string
	}
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		b := &testBundle{webhookBundle: setupWebhooks(t, webhookOpts{})}
		b.destID = b.createDestination(t, "/hook").Destination.ID.String()
		return b
	}
	input := func(b *testBundle, change func(*app.CreateWebhookSubscriptionInput)) app.CreateWebhookSubscriptionInput {
		in := app.CreateWebhookSubscriptionInput{ProjectID: "p1", DestinationID: b.destID, EventTypes: []string{"device.*"}}
		if change != nil {
			change(&in)
		}
		return in
	}

	t.Run("StartsAfterItsOwnCreationEvent", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.record(t, "device.registered") // sequence 2, after the destination's event
		sub, err := b.app.CreateWebhookSubscription(ctx, b.admin, input(b, func(in *app.CreateWebhookSubscriptionInput) {
			in.EventTypes = []string{"device.*", "user.role.granted", "device.*"}
			in.Description = "firmware and roles"
		}))
		require.NoError(t, err)
		require.Equal(t, []string{"device.*", "user.role.granted"}, sub.EventTypes, "duplicates are removed")
		require.Equal(t, domain.WebhookSubscriptionActive, sub.State)
		require.Equal(t, b.clock.Now(), sub.CreatedAt)
		require.Equal(t, "ops", sub.CreatedBy)

		events := auditEvents(t, b.app, b.admin, "p1", "webhook.subscription.created")
		require.Len(t, events, 1)
		require.Equal(t, uint64(3), events[0].Sequence)
		require.Equal(t, events[0].Sequence, sub.AfterSequence, "afterSequence is the subscription's own creation event")
		require.Equal(t, domain.Resource{Type: "webhook_subscription", ID: sub.ID.String()}, events[0].Resource)
		require.JSONEq(t, fmt.Sprintf(`{"subscriptionId":%q,"destinationId":%q,"eventTypes":["device.*","user.role.granted"]}`,
			sub.ID, b.destID), string(events[0].Details))

		got, err := b.app.WebhookSubscription(ctx, b.admin, sub.ID.String())
		require.NoError(t, err)
		require.Equal(t, sub, got)
	})

	t.Run("IdempotencyKey", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		keyed := input(b, func(in *app.CreateWebhookSubscriptionInput) { in.IdempotencyKey = "ticketing-1" })
		first, err := b.app.CreateWebhookSubscription(ctx, b.admin, keyed)
		require.NoError(t, err)
		b.clock.Add(time.Second)
		again, err := b.app.CreateWebhookSubscription(ctx, b.admin, keyed)
		require.NoError(t, err)
		require.Equal(t, first, again, "the same key and input return the first subscription")

		for name, change := range map[string]func(*app.CreateWebhookSubscriptionInput){
			"event types": func(in *app.CreateWebhookSubscriptionInput) { in.EventTypes = []string{"user.*"} },
			"description": func(in *app.CreateWebhookSubscriptionInput) { in.Description = "other" },
			"project":     func(in *app.CreateWebhookSubscriptionInput) { in.ProjectID = "p2" },
		} {
			other := keyed
			change(&other)
			_, err := b.app.CreateWebhookSubscription(ctx, b.admin, other)
			requireCode(t, err, app.CodeIdempotencyConflict)
			require.Equal(t, "idempotencyKey", app.ErrorOf(err).Field, name)
		}
		page, err := b.app.WebhookSubscriptions(ctx, b.admin, "p1", nil, "")
		require.NoError(t, err)
		require.Len(t, page.Items, 1)
		require.Len(t, auditEvents(t, b.app, b.admin, "p1", "webhook.subscription.created"), 1, "a replay is not audited again")

		// Keys are per tenant: t2 has no such destination, so its use of the
		// same key is a new request that fails on its own.
		_, err = b.app.CreateWebhookSubscription(ctx, inTenant(b.admin, "t2"), keyed)
		require.Equal(t, app.ErrWebhookDestinationNotFound, err)
	})

	t.Run("DestinationMustBeVisibleInTheSameProject", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		inP2, err := b.app.CreateWebhookDestination(ctx, b.admin, app.CreateWebhookDestinationInput{ProjectID: "p2", URL: "https://example.com/"})
		require.NoError(t, err)
		for name, tc := range map[string]struct {
			id app.Identity
			in app.CreateWebhookSubscriptionInput
		}{
			"another project's": {b.admin, input(b, func(in *app.CreateWebhookSubscriptionInput) { in.DestinationID = inP2.Destination.ID.String() })},
			"another tenant's":  {inTenant(b.admin, "t2"), input(b, nil)},
			"a missing":         {b.admin, input(b, func(in *app.CreateWebhookSubscriptionInput) { in.DestinationID = uuid.NewString() })},
			"a malformed":       {b.admin, input(b, func(in *app.CreateWebhookSubscriptionInput) { in.DestinationID = "x" })},
		} {
			_, err := b.app.CreateWebhookSubscription(ctx, tc.id, tc.in)
			require.Equal(t, app.ErrWebhookDestinationNotFound, err, name)
		}
		require.Zero(t, countRows(t, b.pool, "webhook_subscriptions"))
		require.Empty(t, auditEvents(t, b.app, b.admin, "p1", "webhook.subscription.*"))
	})

	t.Run("BadInput", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		many := make([]string, domain.MaxWebhookEventTypes+1)
		for i := range many {
			many[i] = fmt.Sprintf("device.e%d", i)
		}
		for _, tc := range []struct {
			field  string
			change func(*app.CreateWebhookSubscriptionInput)
		}{
			{"eventTypes", func(in *app.CreateWebhookSubscriptionInput) { in.EventTypes = nil }},
			{"eventTypes", func(in *app.CreateWebhookSubscriptionInput) { in.EventTypes = many }},
			{"eventTypes[0]", func(in *app.CreateWebhookSubscriptionInput) { in.EventTypes = []string{"*"} }},
			{"eventTypes[1]", func(in *app.CreateWebhookSubscriptionInput) { in.EventTypes = []string{"device.*", "dev ice"} }},
			{"description", func(in *app.CreateWebhookSubscriptionInput) { in.Description = strings.Repeat("d", 1025) }},
			{"idempotencyKey", func(in *app.CreateWebhookSubscriptionInput) { in.IdempotencyKey = strings.Repeat("k", 256) }},
		} {
			_, err := b.app.CreateWebhookSubscription(ctx, b.admin, input(b, tc.change))
			requireCode(t, err, app.CodeBadUserInput)
			require.Equal(t, tc.field, app.ErrorOf(err).Field)
		}
		_, err := b.app.CreateWebhookSubscription(ctx, withPermissions(b.admin, app.PermissionWebhooksRead), input(b, nil))
		requireCode(t, err, app.CodeForbidden)
		require.Zero(t, countRows(t, b.pool, "webhook_subscriptions"))
	})

	t.Run("AtMostAHundredActivePerProject", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		var first domain.WebhookSubscription
		for i := range app.MaxActiveWebhookSubscriptionsPerProject {
			sub, err := b.app.CreateWebhookSubscription(ctx, b.admin, input(b, nil))
			require.NoError(t, err)
			if i == 0 {
				first = sub
			}
		}
		_, err := b.app.CreateWebhookSubscription(ctx, b.admin, input(b, nil))
		requireCode(t, err, app.CodeQuotaExceeded)
		_, err = b.app.DisableWebhookSubscription(ctx, b.admin, first.ID.String())
		require.NoError(t, err)
		_, err = b.app.CreateWebhookSubscription(ctx, b.admin, input(b, nil))
		require.NoError(t, err, "disabled subscriptions do not count")
	})
}

func TestDisableWebhookSubscription(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	// testBundle has a subscription of the receiver to device.*, whose
	// first answer is a 500 and later ones 200.
	type testBundle struct {
		*webhookBundle
		sub domain.WebhookSubscription
	}
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		b := &testBundle{webhookBundle: setupWebhooks(t, webhookOpts{})}
		b.receiver.setRespond(func(n int, w http.ResponseWriter, r *http.Request) {
			status(map[bool]int{true: 500, false: 200}[n == 1])(n, w, r)
		})
		b.sub = b.subscribe(t, b.createDestination(t, "/hook").Destination.ID.String(), "device.*")
		return b
	}

	t.Run("StopsNewDeliveriesButKeepsEarlierOnes", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		early := b.record(t, "device.rebooted")
		require.Equal(t, 1, b.fanOut(t))
		b.deliver(t)
		retrying := b.deliveries(t, app.WebhookDeliveriesInput{EventID: early.ID.String()})
		require.Len(t, retrying, 1)
		require.Equal(t, domain.WebhookDeliveryRetrying, retrying[0].State)
		late := b.record(t, "device.rebooted") // recorded before the disable, fanned out after it

		disabled, err := b.app.DisableWebhookSubscription(ctx, b.admin, b.sub.ID.String())
		require.NoError(t, err)
		require.Equal(t, domain.WebhookSubscriptionDisabled, disabled.State)
		require.Equal(t, b.clock.Now(), *disabled.DisabledAt)
		events := auditEvents(t, b.app, b.admin, "p1", "webhook.subscription.disabled")
		require.Len(t, events, 1)
		require.Equal(t, events[0].Sequence, disabled.DisabledSequence)

		after := b.record(t, "device.rebooted")
		require.Equal(t, 1, b.fanOut(t), "the event recorded before the disable still gets its delivery, the one after it none")
		require.Empty(t, b.deliveries(t, app.WebhookDeliveriesInput{EventID: after.ID.String()}))

		b.clock.Set(*retrying[0].NextAttemptAt)
		b.deliver(t)
		for _, e := range []domain.AuditEvent{early, late} {
			d := b.deliveries(t, app.WebhookDeliveriesInput{EventID: e.ID.String()})
			require.Len(t, d, 1)
			require.Equal(t, domain.WebhookDeliveryDelivered, d[0].State, "deliveries of the subscription go on after the disable")
		}
	})

	t.Run("DisablingAgainChangesNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		first, err := b.app.DisableWebhookSubscription(ctx, b.admin, b.sub.ID.String())
		require.NoError(t, err)
		b.clock.Add(time.Second)
		again, err := b.app.DisableWebhookSubscription(ctx, b.admin, b.sub.ID.String())
		require.NoError(t, err)
		require.Equal(t, first, again)
		require.Len(t, auditEvents(t, b.app, b.admin, "p1", "webhook.subscription.disabled"), 1, "disabled once, audited once")
	})

	t.Run("HiddenSubscriptionsLookMissing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		requireHidden(t, b.admin, app.ErrWebhookSubscriptionNotFound, b.sub.ID.String(), func(who app.Identity, id string) error {
			_, err := b.app.DisableWebhookSubscription(ctx, who, id)
			return err
		})
		_, err := b.app.DisableWebhookSubscription(ctx, withPermissions(b.admin, app.PermissionWebhooksRead), b.sub.ID.String())
		requireCode(t, err, app.CodeForbidden)
		got, err := b.app.WebhookSubscription(ctx, b.admin, b.sub.ID.String())
		require.NoError(t, err)
		require.Equal(t, domain.WebhookSubscriptionActive, got.State)
	})
}

func TestWebhookSubscriptionQueries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("PagesOldestFirstWithinTheScope", func(t *testing.T) {
		t.Parallel()
		b := setupWebhooks(t, webhookOpts{})
		dest := b.createDestination(t, "/hook").Destination.ID.String()
		var subs []domain.WebhookSubscription
		for range 3 {
			subs = append(subs, b.subscribe(t, dest, "device.*"))
		}
		disabled, err := b.app.DisableWebhookSubscription(ctx, b.admin, subs[1].ID.String())
		require.NoError(t, err)
		subs[1] = disabled

		two := 2
		page, err := b.app.WebhookSubscriptions(ctx, b.admin, "p1", &two, "")
		require.NoError(t, err)
		require.Equal(t, subs[:2], page.Items, "active and disabled, oldest first")
		require.True(t, page.HasNextPage)
		page, err = b.app.WebhookSubscriptions(ctx, b.admin, "p1", &two, app.IDCursor(page.Items[1].ID))
		require.NoError(t, err)
		require.Equal(t, subs[2:], page.Items)
		require.False(t, page.HasNextPage)

		for _, first := range []int{0, app.MaxWebhookPageSize + 1} {
			_, err := b.app.WebhookSubscriptions(ctx, b.admin, "p1", &first, "")
			requireCode(t, err, app.CodeBadUserInput)
			require.Equal(t, "first", app.ErrorOf(err).Field)
		}
		_, err = b.app.WebhookSubscriptions(ctx, b.admin, "p1", nil, "not a cursor")
		requireCode(t, err, app.CodeBadUserInput)

		page, err = b.app.WebhookSubscriptions(ctx, inTenant(b.admin, "t2"), "p1", nil, "")
		require.NoError(t, err)
		require.Empty(t, page.Items)
		requireHidden(t, b.admin, app.ErrWebhookSubscriptionNotFound, subs[0].ID.String(), func(who app.Identity, id string) error {
			_, err := b.app.WebhookSubscription(ctx, who, id)
			return err
		})
		onlyP2 := b.admin
		onlyP2.ProjectIDs = []string{"p2"}
		_, err = b.app.WebhookSubscriptions(ctx, onlyP2, "p1", nil, "")
		require.Equal(t, app.ErrProjectNotFound, err)
	})
}
