package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/client"
	"github.com/aetheriot/aether-audit/internal/aethertest"
)

func TestWebhookCommands(t *testing.T) {
	b := setup(t)
	ctx := context.Background()

	created, err := b.client.CreateWebhookDestination(ctx, client.CreateWebhookDestinationInput{
		ProjectID: "p", URL: "https://receiver.example.com/hooks", Description: "ops"})
	require.NoError(t, err)
	require.Regexp(t, `^whsec_`, created.SigningSecret)
	dest := created.Destination
	require.Equal(t, "ops", dest.Description)
	require.Equal(t, 1, dest.ActiveSecrets)

	got, err := b.client.WebhookDestination(ctx, dest.ID)
	require.NoError(t, err)
	require.Equal(t, dest, got)
	all, err := b.client.WebhookDestinations(ctx, "p")
	require.NoError(t, err)
	require.Len(t, all, 1)

	grace := time.Hour
	rotated, err := b.client.RotateWebhookDestinationSecret(ctx, dest.ID, &grace)
	require.NoError(t, err)
	require.NotEqual(t, created.SigningSecret, rotated.SigningSecret)
	require.Equal(t, 2, rotated.Destination.ActiveSecrets)
	require.WithinDuration(t, time.Now().Add(time.Hour), rotated.PreviousSecretsExpireAt, time.Minute)

	in := client.CreateWebhookSubscriptionInput{ProjectID: "p", DestinationID: dest.ID, EventTypes: []string{"device.*"}, IdempotencyKey: "sub-1"}
	sub, err := b.client.CreateWebhookSubscription(ctx, in)
	require.NoError(t, err)
	require.Equal(t, "ACTIVE", sub.State)
	again, err := b.client.CreateWebhookSubscription(ctx, in)
	require.NoError(t, err)
	require.Equal(t, sub.ID, again.ID, "the idempotency key returns the first subscription")
	in.EventTypes = []string{"other.*"}
	_, err = b.client.CreateWebhookSubscription(ctx, in)
	require.Equal(t, client.CodeIdempotencyConflict, client.ErrorCode(err))

	subs, page, err := b.client.WebhookSubscriptions(ctx, "p", client.ListOptions{First: 10})
	require.NoError(t, err)
	require.Len(t, subs, 1)
	require.False(t, page.HasNextPage)
	one, err := b.client.WebhookSubscription(ctx, sub.ID)
	require.NoError(t, err)
	require.Equal(t, sub.ID, one.ID)

	// An event the subscription matches makes a delivery.
	_, err = b.client.Record(ctx, event("p", "dev-1"))
	require.NoError(t, err)
	var deliveries []client.WebhookDelivery
	aethertest.Await(t, 30*time.Second, "a delivery", func() bool {
		deliveries, _, err = b.client.WebhookDeliveries(ctx, "p", &client.WebhookDeliveryFilter{SubscriptionID: sub.ID}, client.ListOptions{})
		require.NoError(t, err)
		return len(deliveries) == 1
	})
	d, err := b.client.WebhookDelivery(ctx, deliveries[0].ID)
	require.NoError(t, err)
	require.Equal(t, "device.firmware.updated", d.EventType)
	_, err = b.client.RedriveWebhookDelivery(ctx, d.ID, false)
	require.Equal(t, client.CodeConfirmationRequired, client.ErrorCode(err))

	disabled, err := b.client.DisableWebhookSubscription(ctx, sub.ID)
	require.NoError(t, err)
	require.Equal(t, "DISABLED", disabled.State)
	require.NotNil(t, disabled.DisabledAt)

	_, err = b.client.WebhookDestination(ctx, "0190a0b4-0000-7000-8000-000000000000")
	require.Equal(t, client.CodeNotFound, client.ErrorCode(err))
	_, err = b.client.CreateWebhookDestination(ctx, client.CreateWebhookDestinationInput{ProjectID: "p", URL: "http://10.0.0.5/x"})
	var ae *client.Error
	require.ErrorAs(t, err, &ae)
	require.Equal(t, client.CodeBadUserInput, ae.Code)
	require.Equal(t, "url", ae.Field)
}

func TestExportCommands(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	record(t, b.client, "p", 5)

	from, to := time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	in := client.RequestDataExportInput{ProjectID: "p", Kind: "AUDIT", From: &from, To: &to, Format: "NDJSON",
		Compression: "NONE", Confirm: false}
	_, err := b.client.RequestDataExport(ctx, in)
	require.Equal(t, client.CodeConfirmationRequired, client.ErrorCode(err))

	in.Confirm, in.IdempotencyKey = true, "export-1"
	exp, err := b.client.RequestDataExport(ctx, in)
	require.NoError(t, err)
	require.Equal(t, "QUEUED", exp.State)
	again, err := b.client.RequestDataExport(ctx, in)
	require.NoError(t, err)
	require.Equal(t, exp.ID, again.ID)

	aethertest.Await(t, 60*time.Second, "the export is READY", func() bool {
		exp, err = b.client.DataExport(ctx, exp.ID)
		require.NoError(t, err)
		require.NotEqual(t, "FAILED", exp.State)
		return exp.State == "READY"
	})
	require.Equal(t, uint64(6), *exp.RowCount, "the 5 events and the export.requested event")
	require.Regexp(t, `^sha256:[0-9a-f]{64}$`, *exp.ContentDigest)

	link, err := b.client.CreateDataExportDownload(ctx, exp.ID, 2*time.Minute)
	require.NoError(t, err)
	require.Contains(t, link.URL, "/api/v1/exports/download/")
	require.WithinDuration(t, time.Now().Add(2*time.Minute), link.ExpiresAt, 10*time.Second)

	list, _, err := b.client.DataExports(ctx, "p", &client.DataExportFilter{State: "READY"}, client.ListOptions{})
	require.NoError(t, err)
	require.Len(t, list, 1)

	// A sequence range instead of a time range.
	bySeq, err := b.client.RequestDataExport(ctx, client.RequestDataExportInput{ProjectID: "p", Kind: "AUDIT",
		FromSequence: 2, ToSequence: 4, Format: "CSV", Compression: "GZIP", Confirm: true})
	require.NoError(t, err)
	require.Nil(t, bySeq.From)

	expired, err := b.client.ExpireDataExport(ctx, exp.ID, true)
	require.NoError(t, err)
	require.Equal(t, "EXPIRED", expired.State)
	_, err = b.client.CreateDataExportDownload(ctx, exp.ID, 0)
	require.Equal(t, client.CodeInvalidState, client.ErrorCode(err))
	_, err = b.client.DataExport(ctx, "0190a0b4-0000-7000-8000-000000000000")
	require.Equal(t, client.CodeNotFound, client.ErrorCode(err))
}
