package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/jobargs"
	"github.com/aetheriot/aether-audit/secrets"
)

// webhookBundle is a server whose app can create webhook destinations (it
// has a master key), with the app itself at hand to run the fan-out job,
// which this server runs no worker for.
type webhookBundle struct {
	*testBundle
}

// setupWebhooks serves a fresh server over a fresh database, like setup,
// with an app configured for webhooks.
func setupWebhooks(t *testing.T) *webhookBundle {
	t.Helper()
	box, err := secrets.NewBox(make([]byte, secrets.KeySize))
	require.NoError(t, err)
	return &webhookBundle{testBundle: setupApp(t, app.Config{Webhooks: app.WebhookConfig{Box: box}}, nil)}
}

// allWebhookPerms is every permission the webhook API and its setup use.
var allWebhookPerms = []app.Permission{
	app.PermissionAuditRead, app.PermissionAuditWrite,
	app.PermissionWebhooksRead, app.PermissionWebhooksWrite, app.PermissionDeliveriesRedrive,
}

const (
	whDestinationFields  = `id projectId url description createdAt secretRotatedAt activeSecrets ` + whLifecycleFields
	whSubscriptionFields = `id projectId destinationId eventTypes description state afterSequence createdAt disabledAt
  ordering pausedByDeliveryId`
	whDeliveryFields = `id projectId subscriptionId destinationId eventId eventSequence eventType idempotencyKey
  state attemptCount maxAttempts nextAttemptAt createdAt updatedAt deliveredAt deadLetteredAt lastError replayOf
  attempts { number outcome startedAt finishedAt statusCode latencyMs errorClass error responseBody }`

	createDestinationMutation = `mutation($in: CreateWebhookDestinationInput!) {
  createWebhookDestination(input: $in) { destination { ` + whDestinationFields + ` } signingSecret }
}`
	rotateSecretMutation = `mutation($in: RotateWebhookDestinationSecretInput!) {
  rotateWebhookDestinationSecret(input: $in) { destination { ` + whDestinationFields + ` } signingSecret previousSecretsExpireAt }
}`
	createSubscriptionMutation = `mutation($in: CreateWebhookSubscriptionInput!) {
  createWebhookSubscription(input: $in) { subscription { ` + whSubscriptionFields + ` } }
}`
	disableSubscriptionMutation = `mutation($in: DisableWebhookSubscriptionInput!) {
  disableWebhookSubscription(input: $in) { subscription { ` + whSubscriptionFields + ` } }
}`
	redriveDeliveryMutation = `mutation($in: RedriveWebhookDeliveryInput!) {
  redriveWebhookDelivery(input: $in) { delivery { ` + whDeliveryFields + ` } }
}`
	destinationQuery   = `query($id: ID!) { webhookDestination(id: $id) { ` + whDestinationFields + ` } }`
	destinationsQuery  = `query($p: ID!) { webhookDestinations(projectId: $p) { ` + whDestinationFields + ` } }`
	subscriptionQuery  = `query($id: ID!) { webhookSubscription(id: $id) { ` + whSubscriptionFields + ` } }`
	subscriptionsQuery = `query($p: ID!, $first: Int, $after: String) {
  webhookSubscriptions(projectId: $p, first: $first, after: $after) {
    edges { cursor node { ` + whSubscriptionFields + ` } }
    pageInfo { hasNextPage endCursor }
  }
}`
	deliveryQuery   = `query($id: ID!) { webhookDelivery(id: $id) { ` + whDeliveryFields + ` } }`
	deliveriesQuery = `query($p: ID!, $first: Int, $after: String, $filter: WebhookDeliveryFilter) {
  webhookDeliveries(projectId: $p, first: $first, after: $after, filter: $filter) {
    edges { cursor node { ` + whDeliveryFields + ` } }
    pageInfo { hasNextPage endCursor }
  }
}`
)

type whDestination struct {
	ID              string  `json:"id"`
	ProjectID       string  `json:"projectId"`
	URL             string  `json:"url"`
	Description     string  `json:"description"`
	CreatedAt       string  `json:"createdAt"`
	SecretRotatedAt *string `json:"secretRotatedAt"`
	ActiveSecrets   int     `json:"activeSecrets"`
}

type whSubscription struct {
	ID            string   `json:"id"`
	ProjectID     string   `json:"projectId"`
	DestinationID string   `json:"destinationId"`
	EventTypes    []string `json:"eventTypes"`
	Description   string   `json:"description"`
	State         string   `json:"state"`
	AfterSequence string   `json:"afterSequence"`
	CreatedAt     string   `json:"createdAt"`
	DisabledAt    *string  `json:"disabledAt"`
}

type whSubscriptionConnection struct {
	Edges []struct {
		Cursor string         `json:"cursor"`
		Node   whSubscription `json:"node"`
	} `json:"edges"`
	PageInfo struct {
		HasNextPage bool    `json:"hasNextPage"`
		EndCursor   *string `json:"endCursor"`
	} `json:"pageInfo"`
}

// createDestination registers https://hooks.example.com/x for project A and
// returns it with its signing secret.
func (b *webhookBundle) createDestination(t *testing.T, token string) (whDestination, string) {
	t.Helper()
	res := b.graphql(t, token, createDestinationMutation, map[string]any{"in": map[string]any{
		"projectId": projectA, "url": "https://hooks.example.com/x", "description": "receiver",
	}})
	var data struct {
		CreateWebhookDestination struct {
			Destination   whDestination `json:"destination"`
			SigningSecret string        `json:"signingSecret"`
		} `json:"createWebhookDestination"`
	}
	res.decode(t, &data)
	return data.CreateWebhookDestination.Destination, data.CreateWebhookDestination.SigningSecret
}

// createSubscription subscribes destinationID (of project A) to in's event
// types; extra holds further input fields.
func (b *webhookBundle) createSubscription(t *testing.T, token, destinationID string, eventTypes []string, extra map[string]any) whSubscription {
	t.Helper()
	in := map[string]any{"projectId": projectA, "destinationId": destinationID, "eventTypes": eventTypes}
	for k, v := range extra {
		in[k] = v
	}
	res := b.graphql(t, token, createSubscriptionMutation, map[string]any{"in": in})
	var data struct {
		CreateWebhookSubscription struct {
			Subscription whSubscription `json:"subscription"`
		} `json:"createWebhookSubscription"`
	}
	res.decode(t, &data)
	return data.CreateWebhookSubscription.Subscription
}

// requireNoSecret fails when raw contains the secret or its key part.
func requireNoSecret(t *testing.T, raw []byte, secret string) {
	t.Helper()
	require.NotContains(t, string(raw), secret)
	key, ok := strings.CutPrefix(secret, "whsec_")
	require.True(t, ok, "secret %q", secret)
	require.NotContains(t, string(raw), key)
}

func TestWebhookGraphQLHappyPath(t *testing.T) {
	t.Parallel()
	b := setupWebhooks(t)
	tok := b.token(t, tokenOpts{perms: allWebhookPerms})
	start := time.Now()

	// Create: the secret is shown once, in Standard Webhooks format.
	dest, secret := b.createDestination(t, tok)
	require.True(t, strings.HasPrefix(secret, "whsec_"), "secret %q", secret)
	require.Greater(t, len(secret), len("whsec_")+16)
	require.NotEmpty(t, dest.ID)
	require.Equal(t, projectA, dest.ProjectID)
	require.Equal(t, "https://hooks.example.com/x", dest.URL)
	require.Equal(t, "receiver", dest.Description)
	require.Equal(t, 1, dest.ActiveSecrets)
	require.Nil(t, dest.SecretRotatedAt)

	// Reads never show it.
	res := b.graphql(t, tok, destinationQuery, map[string]any{"id": dest.ID})
	requireNoSecret(t, res.Raw, secret)
	var one struct {
		WebhookDestination *whDestination `json:"webhookDestination"`
	}
	res.decode(t, &one)
	require.NotNil(t, one.WebhookDestination)
	require.Equal(t, dest, *one.WebhookDestination)

	res = b.graphql(t, tok, destinationsQuery, map[string]any{"p": projectA})
	requireNoSecret(t, res.Raw, secret)
	var list struct {
		WebhookDestinations []whDestination `json:"webhookDestinations"`
	}
	res.decode(t, &list)
	require.Equal(t, []whDestination{dest}, list.WebhookDestinations)

	// Rotation: a new secret, the old one valid for the default grace period.
	res = b.graphql(t, tok, rotateSecretMutation, map[string]any{"in": map[string]any{"destinationId": dest.ID}})
	var rotated struct {
		RotateWebhookDestinationSecret struct {
			Destination             whDestination `json:"destination"`
			SigningSecret           string        `json:"signingSecret"`
			PreviousSecretsExpireAt string        `json:"previousSecretsExpireAt"`
		} `json:"rotateWebhookDestinationSecret"`
	}
	res.decode(t, &rotated)
	rot := rotated.RotateWebhookDestinationSecret
	secret2 := rot.SigningSecret
	require.True(t, strings.HasPrefix(secret2, "whsec_"), "secret %q", secret2)
	require.NotEqual(t, secret, secret2)
	requireNoSecret(t, res.Raw, secret)
	require.Equal(t, dest.ID, rot.Destination.ID)
	require.Equal(t, 2, rot.Destination.ActiveSecrets)
	require.NotNil(t, rot.Destination.SecretRotatedAt)
	expires, err := time.Parse(time.RFC3339Nano, rot.PreviousSecretsExpireAt)
	require.NoError(t, err)
	require.WithinRange(t, expires, start.Add(24*time.Hour-time.Minute), time.Now().Add(24*time.Hour+time.Minute))

	res = b.graphql(t, tok, destinationQuery, map[string]any{"id": dest.ID})
	requireNoSecret(t, res.Raw, secret)
	requireNoSecret(t, res.Raw, secret2)
	res.decode(t, &one)
	require.NotNil(t, one.WebhookDestination)
	require.Equal(t, 2, one.WebhookDestination.ActiveSecrets)
	res = b.graphql(t, tok, destinationsQuery, map[string]any{"p": projectA})
	requireNoSecret(t, res.Raw, secret)
	requireNoSecret(t, res.Raw, secret2)
	res.decode(t, &list)
	require.Len(t, list.WebhookDestinations, 1)
	require.Equal(t, 2, list.WebhookDestinations[0].ActiveSecrets)

	// Subscriptions: idempotent by key.
	keyed := map[string]any{"idempotencyKey": "sub-key-1", "description": "devices"}
	sub := b.createSubscription(t, tok, dest.ID, []string{"device.*"}, keyed)
	require.Equal(t, "ACTIVE", sub.State)
	require.Equal(t, []string{"device.*"}, sub.EventTypes)
	require.Equal(t, dest.ID, sub.DestinationID)
	require.Equal(t, projectA, sub.ProjectID)
	require.Equal(t, "devices", sub.Description)
	require.Nil(t, sub.DisabledAt)
	require.NotEmpty(t, sub.AfterSequence)

	again := b.createSubscription(t, tok, dest.ID, []string{"device.*"}, keyed)
	require.Equal(t, sub, again, "a repeat returns the first call's subscription")

	res = b.graphql(t, tok, createSubscriptionMutation, map[string]any{"in": map[string]any{
		"projectId": projectA, "destinationId": dest.ID, "eventTypes": []string{"user.*"},
		"description": "devices", "idempotencyKey": "sub-key-1",
	}})
	require.Equal(t, "IDEMPOTENCY_CONFLICT", res.code(t), "%s", res.Raw)
	require.Equal(t, "null", string(res.Data))

	sub2 := b.createSubscription(t, tok, dest.ID, []string{"user.login", "device.*"}, nil)
	require.NotEqual(t, sub.ID, sub2.ID)

	// Pagination, oldest first: exactly the two subscriptions.
	var pagedIDs []string
	var after any
	for page := 0; ; page++ {
		require.Less(t, page, 5, "pagination does not end")
		res := b.graphql(t, tok, subscriptionsQuery, map[string]any{"p": projectA, "first": 1, "after": after})
		var data struct {
			WebhookSubscriptions whSubscriptionConnection `json:"webhookSubscriptions"`
		}
		res.decode(t, &data)
		conn := data.WebhookSubscriptions
		require.Len(t, conn.Edges, 1)
		require.NotNil(t, conn.PageInfo.EndCursor)
		require.Equal(t, conn.Edges[0].Cursor, *conn.PageInfo.EndCursor)
		pagedIDs = append(pagedIDs, conn.Edges[0].Node.ID)
		if !conn.PageInfo.HasNextPage {
			break
		}
		after = *conn.PageInfo.EndCursor
	}
	require.Equal(t, []string{sub.ID, sub2.ID}, pagedIDs)

	// Disabling twice: DISABLED both times, audited once.
	var disabledAt string
	for i := 0; i < 2; i++ {
		res := b.graphql(t, tok, disableSubscriptionMutation, map[string]any{"in": map[string]any{"subscriptionId": sub.ID}})
		var data struct {
			DisableWebhookSubscription struct {
				Subscription whSubscription `json:"subscription"`
			} `json:"disableWebhookSubscription"`
		}
		res.decode(t, &data)
		got := data.DisableWebhookSubscription.Subscription
		require.Equal(t, sub.ID, got.ID)
		require.Equal(t, "DISABLED", got.State, "call %d", i+1)
		require.NotNil(t, got.DisabledAt)
		if i == 0 {
			disabledAt = *got.DisabledAt
		}
		require.Equal(t, disabledAt, *got.DisabledAt, "a second disable changes nothing")
	}
	res = b.graphql(t, tok, subscriptionQuery, map[string]any{"id": sub2.ID})
	var s2 struct {
		WebhookSubscription *whSubscription `json:"webhookSubscription"`
	}
	res.decode(t, &s2)
	require.NotNil(t, s2.WebhookSubscription)
	require.Equal(t, "ACTIVE", s2.WebhookSubscription.State, "only the one subscription is disabled")

	// The audit trail of the project: every command once, no secrets.
	res = b.graphql(t, tok, listEventsQuery, map[string]any{"p": projectA, "first": 500})
	requireNoSecret(t, res.Raw, secret)
	requireNoSecret(t, res.Raw, secret2)
	var events struct {
		AuditEvents struct {
			Edges []struct {
				Node struct {
					Action  string          `json:"action"`
					Details json.RawMessage `json:"details"`
				} `json:"node"`
			} `json:"edges"`
		} `json:"auditEvents"`
	}
	res.decode(t, &events)
	actions := map[string]int{}
	for _, e := range events.AuditEvents.Edges {
		actions[e.Node.Action]++
		require.NotContains(t, string(e.Node.Details), "whsec_", e.Node.Action)
	}
	require.Equal(t, map[string]int{
		"webhook.destination.created":        1,
		"webhook.destination.secret_rotated": 1,
		"webhook.subscription.created":       2, // the idempotent repeat records nothing
		"webhook.subscription.disabled":      1,
	}, actions)
}

func TestWebhookGraphQLBadInput(t *testing.T) {
	t.Parallel()
	b := setupWebhooks(t)
	tok := b.token(t, tokenOpts{perms: allWebhookPerms})
	dest, _ := b.createDestination(t, tok)

	fiftyOne := make([]string, 51)
	for i := range fiftyOne {
		fiftyOne[i] = fmt.Sprintf("device.kind%d", i)
	}
	createDest := func(url string) map[string]any {
		return map[string]any{"in": map[string]any{"projectId": projectA, "url": url}}
	}
	createSub := func(types []string) map[string]any {
		return map[string]any{"in": map[string]any{"projectId": projectA, "destinationId": dest.ID, "eventTypes": types}}
	}
	rotate := func(grace int) map[string]any {
		return map[string]any{"in": map[string]any{"destinationId": dest.ID, "gracePeriodSeconds": grace}}
	}

	for _, tc := range []struct {
		name  string
		query string
		vars  map[string]any
		code  string
		field string // the extensions.field, when the use case names one
	}{
		{"HTTPURL", createDestinationMutation, createDest("http://x.example.com"), "BAD_USER_INPUT", "url"},
		{"LoopbackURL", createDestinationMutation, createDest("https://127.0.0.1/"), "BAD_USER_INPUT", "url"},
		{"LocalhostURL", createDestinationMutation, createDest("https://localhost/"), "BAD_USER_INPUT", "url"},
		{"NoEventTypes", createSubscriptionMutation, createSub([]string{}), "BAD_USER_INPUT", ""},
		{"TooManyEventTypes", createSubscriptionMutation, createSub(fiftyOne), "BAD_USER_INPUT", ""},
		{"BadEventType", createSubscriptionMutation, createSub([]string{"Bad Type"}), "BAD_USER_INPUT", ""},
		{"NegativeGrace", rotateSecretMutation, rotate(-1), "BAD_USER_INPUT", "gracePeriodSeconds"},
		{"GraceTooLong", rotateSecretMutation, rotate(604801), "BAD_USER_INPUT", "gracePeriodSeconds"},
		{"RedriveUnconfirmed", redriveDeliveryMutation,
			map[string]any{"in": map[string]any{"deliveryId": uuid.NewString(), "confirm": false}}, "CONFIRMATION_REQUIRED", "confirm"},
		{"DeliveriesFirstZero", deliveriesQuery, map[string]any{"p": projectA, "first": 0}, "BAD_USER_INPUT", "first"},
		{"DeliveriesFirstTooLarge", deliveriesQuery, map[string]any{"p": projectA, "first": 101}, "BAD_USER_INPUT", "first"},
		{"DeliveriesGarbageCursor", deliveriesQuery, map[string]any{"p": projectA, "after": "garbage"}, "BAD_USER_INPUT", "after"},
		{"DeliveriesNonBase64Cursor", deliveriesQuery, map[string]any{"p": projectA, "after": "!!not a cursor!!"}, "BAD_USER_INPUT", "after"},
		{"SubscriptionsFirstZero", subscriptionsQuery, map[string]any{"p": projectA, "first": 0}, "BAD_USER_INPUT", "first"},
		{"SubscriptionsFirstTooLarge", subscriptionsQuery, map[string]any{"p": projectA, "first": 101}, "BAD_USER_INPUT", "first"},
		{"SubscriptionsGarbageCursor", subscriptionsQuery, map[string]any{"p": projectA, "after": "garbage"}, "BAD_USER_INPUT", "after"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := b.graphql(t, tok, tc.query, tc.vars)
			require.NotEqual(t, http.StatusInternalServerError, res.Status, "%s", res.Raw)
			require.Equal(t, tc.code, res.code(t), "%s", res.Raw)
			require.NotEmpty(t, res.Errors[0].Message)
			if tc.field != "" {
				require.Equal(t, tc.field, res.Errors[0].Extensions["field"], "%s", res.Raw)
			}
		})
	}

	// Nothing of the refused commands was stored.
	res := b.graphql(t, tok, destinationsQuery, map[string]any{"p": projectA})
	var list struct {
		WebhookDestinations []whDestination `json:"webhookDestinations"`
	}
	res.decode(t, &list)
	require.Len(t, list.WebhookDestinations, 1)
	require.Equal(t, 1, list.WebhookDestinations[0].ActiveSecrets)
	require.Empty(t, b.subscriptionsOf(t, tok, projectA))

	// A malformed id names nothing: null, not an error.
	for field, query := range map[string]string{
		"webhookDelivery":     deliveryQuery,
		"webhookDestination":  destinationQuery,
		"webhookSubscription": subscriptionQuery,
	} {
		res := b.graphql(t, tok, query, map[string]any{"id": "nope"})
		require.Equal(t, http.StatusOK, res.Status)
		require.Empty(t, res.Errors, "%s", res.Raw)
		require.JSONEq(t, `{"`+field+`": null}`, string(res.Data))
	}
}

// subscriptionsOf lists (the first 100 of) a project's subscriptions.
func (b *webhookBundle) subscriptionsOf(t *testing.T, token, project string) []whSubscription {
	t.Helper()
	res := b.graphql(t, token, subscriptionsQuery, map[string]any{"p": project, "first": 100})
	var data struct {
		WebhookSubscriptions whSubscriptionConnection `json:"webhookSubscriptions"`
	}
	res.decode(t, &data)
	out := make([]whSubscription, len(data.WebhookSubscriptions.Edges))
	for i, e := range data.WebhookSubscriptions.Edges {
		out[i] = e.Node
	}
	return out
}

// webhookFixture is one of everything, owned by tenant A, project A.
type webhookFixture struct {
	owner        string // tenant A, project A, every permission
	destination  whDestination
	subscription whSubscription
	event        event // the recorded event the delivery carries
	deliveryID   string
}

// seedWebhooks creates a destination, a subscription to device.* and one
// delivery of a recorded device event, running the fan-out job directly.
func (b *webhookBundle) seedWebhooks(t *testing.T) webhookFixture {
	t.Helper()
	f := webhookFixture{owner: b.token(t, tokenOpts{perms: allWebhookPerms})}
	f.destination, _ = b.createDestination(t, f.owner)
	f.subscription = b.createSubscription(t, f.owner, f.destination.ID, []string{"device.*"}, nil)

	res := b.graphql(t, f.owner, recordEventMutation, map[string]any{"in": eventInput(projectA, "device.firmware.updated")})
	var rec struct {
		RecordAuditEvent struct{ Event event } `json:"recordAuditEvent"`
	}
	res.decode(t, &rec)
	f.event = rec.RecordAuditEvent.Event

	created, err := b.app.FanOutWebhookDeliveries(context.Background(), jobargs.WebhookFanoutArgs{
		TenantID: tenantA, ProjectID: projectA, FromSequence: 1, ToSequence: 1000,
	})
	require.NoError(t, err)
	require.Equal(t, 1, created, "one matching event after the subscription")

	res = b.graphql(t, f.owner, deliveriesQuery, map[string]any{"p": projectA})
	var list struct {
		WebhookDeliveries struct {
			Edges []struct {
				Node struct {
					ID    string `json:"id"`
					State string `json:"state"`
				} `json:"node"`
			} `json:"edges"`
		} `json:"webhookDeliveries"`
	}
	res.decode(t, &list)
	require.Len(t, list.WebhookDeliveries.Edges, 1, "%s", res.Raw)
	require.Equal(t, "PENDING", list.WebhookDeliveries.Edges[0].Node.State)
	f.deliveryID = list.WebhookDeliveries.Edges[0].Node.ID
	return f
}

func TestWebhookGraphQLDeliveryShape(t *testing.T) {
	t.Parallel()
	b := setupWebhooks(t)
	f := b.seedWebhooks(t)

	res := b.graphql(t, f.owner, deliveryQuery, map[string]any{"id": f.deliveryID})
	require.Empty(t, res.Errors, "%s", res.Raw)
	var raw struct {
		WebhookDelivery map[string]any `json:"webhookDelivery"`
	}
	require.NoError(t, json.Unmarshal(res.Data, &raw))
	d := raw.WebhookDelivery
	require.NotNil(t, d, "%s", res.Raw)

	require.Equal(t, f.deliveryID, d["id"])
	require.Equal(t, projectA, d["projectId"])
	require.Equal(t, f.subscription.ID, d["subscriptionId"])
	require.Equal(t, f.destination.ID, d["destinationId"])
	require.Equal(t, f.event.ID, d["eventId"])
	require.Equal(t, "device.firmware.updated", d["eventType"])
	// The sequence is a decimal string, the recorded event's.
	require.IsType(t, "", d["eventSequence"])
	require.Regexp(t, `^[1-9][0-9]*$`, d["eventSequence"])
	require.Equal(t, f.event.Sequence, d["eventSequence"])
	key, _ := d["idempotencyKey"].(string)
	require.True(t, strings.HasPrefix(key, "msg_"), "idempotencyKey %q", key)
	require.Equal(t, "msg_"+strings.ReplaceAll(f.deliveryID, "-", ""), key)
	require.Equal(t, "PENDING", d["state"])
	require.Equal(t, []any{}, d["attempts"], "no attempt yet: an empty list, not null")
	require.Equal(t, float64(0), d["attemptCount"])
	require.Greater(t, d["maxAttempts"], float64(0))
	require.Equal(t, "", d["lastError"])
	require.Nil(t, d["deliveredAt"])
	require.Nil(t, d["deadLetteredAt"])

	// The list shows the same delivery.
	res = b.graphql(t, f.owner, deliveriesQuery, map[string]any{"p": projectA, "filter": map[string]any{"state": "PENDING"}})
	var list struct {
		WebhookDeliveries struct {
			Edges []struct {
				Node map[string]any `json:"node"`
			} `json:"edges"`
		} `json:"webhookDeliveries"`
	}
	res.decode(t, &list)
	require.Len(t, list.WebhookDeliveries.Edges, 1)
	require.Equal(t, d, list.WebhookDeliveries.Edges[0].Node)
}

// TestWebhookRedriveOfPendingIsInvalidState: the owner may redrive only a
// dead letter (another tenant's redrive is in the isolation matrix).
func TestWebhookRedriveOfPendingIsInvalidState(t *testing.T) {
	t.Parallel()
	b := setupWebhooks(t)
	f := b.seedWebhooks(t)
	res := b.graphql(t, f.owner, redriveDeliveryMutation, map[string]any{"in": map[string]any{"deliveryId": f.deliveryID, "confirm": true}})
	require.Equal(t, "INVALID_STATE", res.code(t), "%s", res.Raw)
	require.Contains(t, res.Errors[0].Message, "PENDING")
}
