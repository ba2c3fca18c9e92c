package app

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/webhook"
)

// WebhookTestEventType is the type of the event sendWebhookTestEvent sends.
const WebhookTestEventType = "webhook.test"

// WebhookTestEvent is the outcome of a test event: the webhook-id it was
// sent with and its one attempt.
type WebhookTestEvent struct {
	WebhookID string
	Attempt   domain.WebhookDeliveryAttempt
}

// webhookTestPayload is the body of a test event.
type webhookTestPayload struct {
	Type      string          `json:"type"`
	Timestamp time.Time       `json:"timestamp"`
	Data      webhookTestData `json:"data"`
}

type webhookTestData struct {
	DestinationID string `json:"destinationId"`
	ProjectID     string `json:"projectId"`
	Message       string `json:"message"`
}

// SendWebhookTestEvent sends one signed webhook.test event to a destination
// (with every signing secret, like a delivery) and returns its attempt; the
// event is neither retried nor stored as a delivery. The command's audit
// event (webhook.destination.test_sent, with the webhook-id) is committed
// before the request is sent. Needs webhooks:write.
func (a *App) SendWebhookTestEvent(ctx context.Context, id Identity, destinationID string) (_ WebhookTestEvent, err error) {
	ctx, span := a.startCommand(ctx, "SendWebhookTestEvent")
	defer func() { a.endCommand(span, err) }()
	if err := a.authorizeCommand(id, PermissionWebhooksWrite, tenantScope); err != nil {
		return WebhookTestEvent{}, err
	}
	destID, err := parseID(destinationID, ErrWebhookDestinationNotFound)
	if err != nil {
		return WebhookTestEvent{}, err
	}
	if _, err := a.visibleDestination(ctx, a.store, id, destID, false); err != nil {
		return WebhookTestEvent{}, err
	}
	if a.webhooks.Sender == nil || a.webhooks.Box == nil {
		return WebhookTestEvent{}, errors.New("webhooks: sending needs a sender and a master key")
	}
	webhookID := "msg_test_" + strings.ReplaceAll(uuid.Must(uuid.NewV7()).String(), "-", "")
	now := a.storedNow()
	var dest domain.WebhookDestination
	err = a.retryTx(ctx, func(ctx context.Context, tx Tx) error {
		d, err := a.visibleDestination(ctx, tx, id, destID, false)
		if err != nil {
			return err
		}
		dest = d
		details, _ := json.Marshal(map[string]string{"destinationId": d.ID.String(), "webhookId": webhookID})
		_, err = a.recordCommandEvent(ctx, tx, id, d.ProjectID, "webhook.destination.test_sent",
			domain.Resource{Type: "webhook_destination", ID: d.ID.String()}, domain.RiskLow, string(details), now)
		return err
	})
	if err != nil {
		return WebhookTestEvent{}, err
	}
	sc, err := a.store.WebhookBatchSendContext(ctx, id.TenantID, dest.ID, nil, nil, now)
	if errors.Is(err, domain.ErrNotFound) {
		return WebhookTestEvent{}, ErrWebhookDestinationNotFound
	}
	if err != nil {
		return WebhookTestEvent{}, err
	}
	body, _ := json.Marshal(webhookTestPayload{Type: WebhookTestEventType, Timestamp: now, Data: webhookTestData{
		DestinationID: dest.ID.String(), ProjectID: dest.ProjectID,
		Message: "a test event of Aether Audit: check its signature, then answer 2xx"}})
	attempt := domain.WebhookDeliveryAttempt{Number: 1, StartedAt: a.storedNow()}
	var res webhook.Result
	if keys, keyErr := a.openSigningKeys(sc.Destination, sc.Secrets); keyErr != nil {
		a.logger.ErrorContext(ctx, "webhook signing secret unavailable", "destination", dest.ID, "err", keyErr)
		res = webhook.Result{ErrorClass: errorClassSecret,
			Error: "the destination's signing secret cannot be opened (was the master key changed?); rotate the destination's secret"}
	} else {
		res = a.webhooks.Sender.Send(ctx, webhook.Request{URL: sc.Destination.URL, ID: webhookID, Timestamp: a.now(), Body: body, Keys: keys,
			Header: destinationHeader(sc.Destination)})
	}
	if unresolvable(res.ErrorClass) {
		a.logger.WarnContext(ctx, "webhook destination unreachable", "tenant_id", id.TenantID, "destination_id", dest.ID,
			"error_class", res.ErrorClass, "error", res.Error)
		res.ErrorClass, res.Error = webhook.ErrorClassDNS, unresolvableMessage
	}
	finished := a.storedNow()
	attempt.FinishedAt = &finished
	attempt.Latency = res.Latency
	attempt.ErrorClass, attempt.Error, attempt.ResponseBody = string(res.ErrorClass), res.Error, cleanBody(res.Body)
	if res.StatusCode != 0 {
		code := res.StatusCode
		attempt.StatusCode = &code
	}
	attempt.Outcome = domain.WebhookAttemptFailed
	if res.Delivered {
		attempt.Outcome = domain.WebhookAttemptSucceeded
	} else if attempt.Error == "" {
		attempt.Error = attemptReason(res)
	}
	return WebhookTestEvent{WebhookID: webhookID, Attempt: attempt}, nil
}
