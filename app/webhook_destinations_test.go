package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/webhook"
)

func TestCreateWebhookDestination(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	type testBundle struct {
		*webhookBundle
	}
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		return &testBundle{webhookBundle: setupWebhooks(t, webhookOpts{})}
	}
	create := func(b *testBundle, url string) (app.WebhookDestinationWithSecret, error) {
		return b.app.CreateWebhookDestination(ctx, b.admin, app.CreateWebhookDestinationInput{ProjectID: "p1", URL: url, Description: "ticketing"})
	}

	t.Run("ShowsTheSecretOnceAndAuditsOnlyTheHost", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		created, err := create(b, "https://Hooks.Example.com/aether?token=abc")
		require.NoError(t, err)

		key, err := webhook.ParseSecret(created.SigningSecret)
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(created.SigningSecret, "whsec_"))
		require.Len(t, key, 32)
		require.Nil(t, created.PreviousSecretsExpireAt)
		d := created.Destination
		require.Equal(t, "https://hooks.example.com/aether?token=abc", d.URL, "scheme and host in lower case")
		require.Equal(t, "p1", d.ProjectID)
		require.Equal(t, "ops", d.CreatedBy)
		require.Equal(t, b.clock.Now(), d.CreatedAt)
		require.Equal(t, 1, d.ActiveSecrets)

		// No query shows the secret again: they return the destination only.
		one, err := b.app.WebhookDestination(ctx, b.admin, d.ID.String())
		require.NoError(t, err)
		require.Equal(t, d, one)
		all, err := b.app.WebhookDestinations(ctx, b.admin, "p1")
		require.NoError(t, err)
		require.Equal(t, []domain.WebhookDestination{d}, all)
		shown, err := json.Marshal([]any{one, all})
		require.NoError(t, err)
		encodedKey := strings.TrimPrefix(created.SigningSecret, "whsec_")
		require.NotContains(t, string(shown), encodedKey)

		// At rest the secret is sealed.
		var sealed []byte
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT sealed FROM webhook_destination_secrets`).Scan(&sealed))
		require.NotContains(t, string(sealed), encodedKey)
		require.NotContains(t, string(sealed), string(key))

		events := auditEvents(t, b.app, b.admin, "p1", "webhook.destination.created")
		require.Len(t, events, 1)
		require.Equal(t, domain.Resource{Type: "webhook_destination", ID: d.ID.String()}, events[0].Resource)
		require.Equal(t, domain.Subject{Type: domain.SubjectUser, ID: "ops"}, events[0].Subject)
		require.JSONEq(t, fmt.Sprintf(`{"destinationId":%q,"host":"hooks.example.com"}`, d.ID), string(events[0].Details),
			"the event records the host: not the path, the query or the secret")
	})

	t.Run("RefusesURLsTheProductionPolicyForbids", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		strict := &testBundle{webhookBundle: &webhookBundle{admin: b.admin,
			app: b.otherApp(func(c *app.Config) { c.Webhooks.URLPolicy = webhook.URLPolicy{} })}}
		for _, url := range []string{
			"http://example.com/hook", "https://localhost/hook", "https://api.localhost/hook", "https://127.0.0.1/hook",
			"https://10.0.0.8/hook", "https://192.168.1.1/hook", "https://169.254.169.254/latest", "https://[::1]/hook",
			"https://[::ffff:127.0.0.1]/hook", "https://[64:ff9b::a00:1]/hook", "https://100.64.0.1/", "https://2130706433/",
			"https://0x7f.1/", "https://user:pw@example.com/", "https://example.com/#frag", "https:///nohost",
			"/relative", "not a url", "https://example.com/" + strings.Repeat("a", 2048),
		} {
			_, err := create(strict, url)
			requireCode(t, err, app.CodeBadUserInput)
			require.Equal(t, "url", app.ErrorOf(err).Field, url)
		}
		require.Zero(t, countRows(t, b.pool, "webhook_destinations"))
		require.Zero(t, countRows(t, b.pool, "audit_events"), "a refused command is not audited")
	})

	t.Run("RelaxedPolicyAllowsOnlyWhatItNames", func(t *testing.T) {
		t.Parallel()
		b := setup(t) // https to 127.0.0.0/8 allowed; http not
		_, err := create(b, "https://127.0.0.1:8443/hook")
		require.NoError(t, err)
		for _, url := range []string{"http://127.0.0.1/hook", "https://localhost/hook", "https://10.0.0.8/hook", "https://[::1]/hook"} {
			_, err := create(b, url)
			requireCode(t, err, app.CodeBadUserInput)
		}
		withHTTP := &testBundle{webhookBundle: &webhookBundle{admin: b.admin, app: b.otherApp(func(c *app.Config) {
			c.Webhooks.URLPolicy.AllowHTTP = true
		})}}
		_, err = create(withHTTP, "http://127.0.0.1/hook")
		require.NoError(t, err)
		_, err = create(withHTTP, "http://localhost/hook")
		requireCode(t, err, app.CodeBadUserInput)
		require.Equal(t, 2, countRows(t, b.pool, "webhook_destinations"))
	})

	t.Run("NeedsWritePermissionAndTheProject", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		reader := withPermissions(b.admin, app.PermissionWebhooksRead)
		_, err := b.app.CreateWebhookDestination(ctx, reader, app.CreateWebhookDestinationInput{ProjectID: "p1", URL: "https://example.com/"})
		requireCode(t, err, app.CodeForbidden)
		_, err = b.app.CreateWebhookDestination(ctx, b.admin, app.CreateWebhookDestinationInput{ProjectID: "p3", URL: "https://example.com/"})
		require.Equal(t, app.ErrProjectNotFound, err)
		_, err = b.app.CreateWebhookDestination(ctx, b.admin, app.CreateWebhookDestinationInput{ProjectID: "p1", URL: "https://example.com/",
			Description: strings.Repeat("d", domain.MaxWebhookDescriptionLength+1)})
		requireCode(t, err, app.CodeBadUserInput)
		require.Zero(t, countRows(t, b.pool, "webhook_destinations"))
	})

	t.Run("AtMostAHundredPerProject", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for i := range app.MaxWebhookDestinationsPerProject {
			_, err := create(b, fmt.Sprintf("https://example.com/%d", i))
			require.NoError(t, err)
		}
		_, err := create(b, "https://example.com/one-more")
		requireCode(t, err, app.CodeQuotaExceeded)
		_, err = b.app.CreateWebhookDestination(ctx, b.admin, app.CreateWebhookDestinationInput{ProjectID: "p2", URL: "https://example.com/"})
		require.NoError(t, err, "the quota is per project")
		require.Equal(t, app.MaxWebhookDestinationsPerProject, len(auditEvents(t, b.app, b.admin, "p1", "webhook.destination.created")),
			"the refused creation left no event")
	})
}

func TestRotateWebhookDestinationSecret(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	// testBundle has a destination at the receiver subscribed to device.*.
	type testBundle struct {
		*webhookBundle
		dest app.WebhookDestinationWithSecret
	}
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		b := &testBundle{webhookBundle: setupWebhooks(t, webhookOpts{})}
		b.dest = b.createDestination(t, "/hook")
		b.subscribe(t, b.dest.Destination.ID.String(), "device.*")
		return b
	}
	rotate := func(t *testing.T, b *testBundle, grace time.Duration) app.WebhookDestinationWithSecret {
		t.Helper()
		r, err := b.app.RotateWebhookDestinationSecret(ctx, b.admin, app.RotateWebhookDestinationSecretInput{
			DestinationID: b.dest.Destination.ID.String(), GracePeriod: &grace})
		require.NoError(t, err)
		return r
	}
	// send records an event, runs its fan-out and delivery and returns the
	// request the receiver got.
	send := func(t *testing.T, b *testBundle) receivedRequest {
		t.Helper()
		before := len(b.receiver.requests())
		b.webhookBundle.send(t, "device.rebooted")
		reqs := b.receiver.requests()
		require.Len(t, reqs, before+1)
		return reqs[before]
	}

	t.Run("GraceKeepsTheOldSecretSigningUntilItExpires", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		old := b.dest.SigningSecret
		rotated := rotate(t, b, time.Hour)
		now := b.clock.Now()
		require.NotEqual(t, old, rotated.SigningSecret)
		_, err := webhook.ParseSecret(rotated.SigningSecret)
		require.NoError(t, err)
		require.Equal(t, now.Add(time.Hour), *rotated.PreviousSecretsExpireAt)
		require.Equal(t, 2, rotated.Destination.ActiveSecrets)
		require.Equal(t, now, *rotated.Destination.SecretRotatedAt)

		req := send(t, b)
		require.Len(t, strings.Fields(req.Header.Get("webhook-signature")), 2)
		require.Equal(t, []int{0}, signatures(t, rotated.SigningSecret, req), "the new secret signs first")
		require.Equal(t, []int{1}, signatures(t, old, req), "the old one still signs")

		b.clock.Add(time.Hour - time.Microsecond)
		req = send(t, b)
		require.Equal(t, []int{1}, signatures(t, old, req), "valid until its expiry")

		b.clock.Add(time.Microsecond)
		req = send(t, b)
		require.Len(t, strings.Fields(req.Header.Get("webhook-signature")), 1)
		require.Equal(t, []int{0}, signatures(t, rotated.SigningSecret, req))
		require.Empty(t, signatures(t, old, req), "from its expiry on only the new secret signs")

		events := auditEvents(t, b.app, b.admin, "p1", "webhook.destination.secret_rotated")
		require.Len(t, events, 1)
		require.Equal(t, domain.RiskHigh, events[0].Governance.Risk)
		require.JSONEq(t, fmt.Sprintf(`{"destinationId":%q,"gracePeriodSeconds":3600}`, b.dest.Destination.ID), string(events[0].Details))
	})

	t.Run("ZeroGraceRetiresTheOldSecretAtOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		rotated := rotate(t, b, 0)
		require.Equal(t, 1, rotated.Destination.ActiveSecrets)
		req := send(t, b)
		require.Equal(t, []int{0}, signatures(t, rotated.SigningSecret, req))
		require.Empty(t, signatures(t, b.dest.SigningSecret, req))
	})

	t.Run("ARotationNeverExtendsAnEarlierGrace", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		first := rotate(t, b, time.Hour) // the original secret ends in 1 h
		b.clock.Add(10 * time.Minute)
		second := rotate(t, b, 7*24*time.Hour)
		require.Equal(t, 3, second.Destination.ActiveSecrets)

		b.clock.Add(49 * time.Minute)
		req := send(t, b)
		require.Equal(t, []int{0}, signatures(t, second.SigningSecret, req))
		require.Equal(t, []int{1}, signatures(t, first.SigningSecret, req))
		require.Equal(t, []int{2}, signatures(t, b.dest.SigningSecret, req))

		b.clock.Add(time.Minute) // 1 h after the first rotation
		req = send(t, b)
		require.Equal(t, []int{0}, signatures(t, second.SigningSecret, req))
		require.Equal(t, []int{1}, signatures(t, first.SigningSecret, req))
		require.Empty(t, signatures(t, b.dest.SigningSecret, req), "the second rotation's longer grace did not extend the original secret")
	})

	t.Run("Refusals", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := b.dest.Destination.ID.String()
		for _, grace := range []time.Duration{-time.Second, app.MaxSecretGracePeriod + time.Second} {
			_, err := b.app.RotateWebhookDestinationSecret(ctx, b.admin, app.RotateWebhookDestinationSecretInput{DestinationID: id, GracePeriod: &grace})
			requireCode(t, err, app.CodeBadUserInput)
			require.Equal(t, "gracePeriodSeconds", app.ErrorOf(err).Field)
		}
		_, err := b.app.RotateWebhookDestinationSecret(ctx, withPermissions(b.admin, app.PermissionWebhooksRead),
			app.RotateWebhookDestinationSecretInput{DestinationID: id})
		requireCode(t, err, app.CodeForbidden)
		requireHidden(t, b.admin, app.ErrWebhookDestinationNotFound, id, func(who app.Identity, id string) error {
			_, err := b.app.RotateWebhookDestinationSecret(ctx, who, app.RotateWebhookDestinationSecretInput{DestinationID: id})
			return err
		})

		d, err := b.app.WebhookDestination(ctx, b.admin, id)
		require.NoError(t, err)
		require.Nil(t, d.SecretRotatedAt, "nothing was rotated")
		require.Empty(t, auditEvents(t, b.app, b.admin, "p1", "webhook.destination.secret_rotated"))
	})
}

func TestWebhookDestinationQueries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("ScopedToTenantAndProject", func(t *testing.T) {
		t.Parallel()
		b := setupWebhooks(t, webhookOpts{})
		first := b.createDestination(t, "/a").Destination
		second := b.createDestination(t, "/b").Destination
		_, err := b.app.CreateWebhookDestination(ctx, b.admin, app.CreateWebhookDestinationInput{ProjectID: "p2", URL: "https://example.com/"})
		require.NoError(t, err)

		all, err := b.app.WebhookDestinations(ctx, b.admin, "p1")
		require.NoError(t, err)
		require.Equal(t, []domain.WebhookDestination{first, second}, all, "a project's destinations, oldest first")

		requireHidden(t, b.admin, app.ErrWebhookDestinationNotFound, first.ID.String(), func(who app.Identity, id string) error {
			_, err := b.app.WebhookDestination(ctx, who, id)
			return err
		})
		list, err := b.app.WebhookDestinations(ctx, inTenant(b.admin, "t2"), "p1")
		require.NoError(t, err)
		require.Empty(t, list, "another tenant's p1 is another project")
		onlyP2 := b.admin
		onlyP2.ProjectIDs = []string{"p2"}
		_, err = b.app.WebhookDestinations(ctx, onlyP2, "p1")
		require.Equal(t, app.ErrProjectNotFound, err)
		_, err = b.app.WebhookDestinations(ctx, withPermissions(b.admin, app.PermissionWebhooksWrite), "p1")
		requireCode(t, err, app.CodeForbidden)
	})
}
