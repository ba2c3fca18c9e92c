package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/webhook"
)

// WebhookLifecycleTx is what the lifecycle and health of destinations write
// in a transaction.
type WebhookLifecycleTx interface {
	// UpdateWebhookDestinationSettings stores d's URL, description, limits
	// and headers; a changed rate limit starts with a full bucket at now.
	UpdateWebhookDestinationSettings(ctx context.Context, d domain.WebhookDestination, now time.Time) error
	// SaveWebhookDestinationState stores d's lifecycle and health.
	SaveWebhookDestinationState(ctx context.Context, d domain.WebhookDestination) error
	// RecordWebhookDestinationSuccesses counts succeeded successful
	// attempts at now in the health of a destination whose health is
	// steady (domain.WebhookDestinationHealth.Steady), without reading it;
	// false, with nothing changed, when it is not.
	RecordWebhookDestinationSuccesses(ctx context.Context, tenantID string, destinationID uuid.UUID, succeeded int, now time.Time) (bool, error)
	// ExpireWebhookDestinationSecrets ends every secret of a destination at.
	ExpireWebhookDestinationSecrets(ctx context.Context, destinationID uuid.UUID, at time.Time) error
	// ListActiveWebhookSubscriptionsOfDestination returns, locked, the
	// destination's ACTIVE subscriptions.
	ListActiveWebhookSubscriptionsOfDestination(ctx context.Context, tenantID, projectID string, destinationID uuid.UUID) ([]domain.WebhookSubscription, error)
	// PauseWebhookDeliveriesOfDestination moves its PENDING and RETRYING
	// deliveries to PAUSED; CancelWebhookDeliveriesOfDestination moves
	// those and the PAUSED ones to CANCELLED with reason.
	PauseWebhookDeliveriesOfDestination(ctx context.Context, tenantID, projectID string, destinationID uuid.UUID, now time.Time) (int64, error)
	CancelWebhookDeliveriesOfDestination(ctx context.Context, tenantID, projectID string, destinationID uuid.UUID, reason string, now time.Time) (int64, error)
	// ResumeWebhookDeliveriesOfDestination moves its PAUSED deliveries
	// back to PENDING and returns them in order of sequence.
	ResumeWebhookDeliveriesOfDestination(ctx context.Context, tenantID, projectID string, destinationID uuid.UUID, now time.Time) ([]*domain.WebhookDelivery, error)
}

// UpdateWebhookDestinationInput changes a destination's settings; a nil
// field keeps its value.
type UpdateWebhookDestinationInput struct {
	DestinationID string
	// URL follows the rules of creation.
	URL         *string
	Description *string
	// RateLimitPerSecond bounds requests per second across all processes
	// (1 to domain.MaxWebhookRateLimit); 0 removes the limit.
	RateLimitPerSecond *int
	// MaxInFlight bounds concurrent requests per process (1 to
	// domain.MaxWebhookMaxInFlight); 0 restores the service's default.
	MaxInFlight *int
	// Headers replace the custom headers (domain.ParseWebhookHeaders); an
	// empty list removes them.
	Headers *[]domain.WebhookHeader
}

// UpdateWebhookDestination changes a destination's URL, description,
// limits or custom headers. Needs webhooks:write; audited as
// webhook.destination.updated (with the fields changed, the URL's host and
// the header names, never header values). A call that changes nothing
// returns the destination without an event.
func (a *App) UpdateWebhookDestination(ctx context.Context, id Identity, in UpdateWebhookDestinationInput) (_ domain.WebhookDestination, err error) {
	ctx, span := a.startCommand(ctx, "UpdateWebhookDestination")
	defer func() { a.endCommand(span, err) }()
	if err := a.authorizeCommand(id, PermissionWebhooksWrite, tenantScope); err != nil {
		return domain.WebhookDestination{}, err
	}
	destID, err := parseID(in.DestinationID, ErrWebhookDestinationNotFound)
	if err != nil {
		return domain.WebhookDestination{}, err
	}
	var url string
	if in.URL != nil {
		if url, err = webhook.ValidateURL(*in.URL, a.webhooks.URLPolicy); err != nil {
			var uerr *webhook.URLError
			if errors.As(err, &uerr) {
				return domain.WebhookDestination{}, badInput("url", uerr.Error())
			}
			return domain.WebhookDestination{}, err
		}
	}
	if in.Description != nil {
		if err := checkDescription(*in.Description); err != nil {
			return domain.WebhookDestination{}, err
		}
	}
	if in.RateLimitPerSecond != nil && (*in.RateLimitPerSecond < 0 || *in.RateLimitPerSecond > domain.MaxWebhookRateLimit) {
		return domain.WebhookDestination{}, badInput("rateLimitPerSecond",
			fmt.Sprintf("must be between 1 and %d, or 0 for no limit", domain.MaxWebhookRateLimit))
	}
	if in.MaxInFlight != nil && (*in.MaxInFlight < 0 || *in.MaxInFlight > domain.MaxWebhookMaxInFlight) {
		return domain.WebhookDestination{}, badInput("maxInFlight",
			fmt.Sprintf("must be between 1 and %d, or 0 for the service's default", domain.MaxWebhookMaxInFlight))
	}
	var headers []domain.WebhookHeader
	if in.Headers != nil {
		if headers, err = domain.ParseWebhookHeaders("headers", *in.Headers); err != nil {
			return domain.WebhookDestination{}, err
		}
	}
	var out domain.WebhookDestination
	err = a.retryTx(ctx, func(ctx context.Context, tx Tx) error {
		d, err := a.visibleDestination(ctx, tx, id, destID, true)
		if err != nil {
			return err
		}
		var changed []string
		risk := domain.RiskMedium
		if in.URL != nil && url != d.URL {
			d.URL, changed, risk = url, append(changed, "url"), domain.RiskHigh
		}
		if in.Description != nil && *in.Description != d.Description {
			d.Description, changed = *in.Description, append(changed, "description")
		}
		if in.RateLimitPerSecond != nil && *in.RateLimitPerSecond != d.RateLimitPerSecond {
			d.RateLimitPerSecond, changed = *in.RateLimitPerSecond, append(changed, "rateLimitPerSecond")
		}
		if in.MaxInFlight != nil && *in.MaxInFlight != d.MaxInFlight {
			d.MaxInFlight, changed = *in.MaxInFlight, append(changed, "maxInFlight")
		}
		if in.Headers != nil && !sameHeaders(headers, d.Headers) {
			d.Headers, changed, risk = headers, append(changed, "headers"), domain.RiskHigh
		}
		out = d
		if len(changed) == 0 {
			return nil
		}
		now := a.storedNow()
		names := make([]string, len(d.Headers))
		for i, h := range d.Headers {
			names[i] = h.Name
		}
		details, _ := json.Marshal(map[string]any{"destinationId": d.ID.String(), "changed": changed, "host": urlHost(d.URL),
			"rateLimitPerSecond": d.RateLimitPerSecond, "maxInFlight": d.MaxInFlight, "headerNames": names})
		if _, err := a.recordCommandEvent(ctx, tx, id, d.ProjectID, "webhook.destination.updated",
			domain.Resource{Type: "webhook_destination", ID: d.ID.String()}, risk, string(details), now); err != nil {
			return err
		}
		return tx.UpdateWebhookDestinationSettings(ctx, d, now)
	})
	if err != nil {
		return domain.WebhookDestination{}, err
	}
	return out, nil
}

// sameHeaders reports whether two header lists are equal, in order.
func sameHeaders(a, b []domain.WebhookHeader) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// DisableWebhookDestinationInput disables a destination.
type DisableWebhookDestinationInput struct {
	DestinationID string
	// Reason is kept as the destination's disabledReason (at most 1,024
	// bytes); empty gives a default.
	Reason string
}

// DisableWebhookDestination stops deliveries to a destination: its
// deliveries waiting for an attempt become PAUSED (attempts under way end
// on their own, and a retry they need pauses too), with their attempts and
// budget kept, and new ones pause as they come. Disabling a disabled (or
// auto-disabled) destination succeeds and changes nothing. Needs
// webhooks:write; audited as webhook.destination.disabled.
func (a *App) DisableWebhookDestination(ctx context.Context, id Identity, in DisableWebhookDestinationInput) (_ domain.WebhookDestination, err error) {
	ctx, span := a.startCommand(ctx, "DisableWebhookDestination")
	defer func() { a.endCommand(span, err) }()
	if err := a.authorizeCommand(id, PermissionWebhooksWrite, tenantScope); err != nil {
		return domain.WebhookDestination{}, err
	}
	if err := domain.ValidateText("reason", in.Reason, domain.MaxWebhookDescriptionLength, false, false); err != nil {
		return domain.WebhookDestination{}, err
	}
	destID, err := parseID(in.DestinationID, ErrWebhookDestinationNotFound)
	if err != nil {
		return domain.WebhookDestination{}, err
	}
	reason := in.Reason
	if reason == "" {
		reason = "disabled by " + commandSubject(id).ID
	}
	var out domain.WebhookDestination
	err = a.retryTx(ctx, func(ctx context.Context, tx Tx) error {
		d, err := a.visibleDestination(ctx, tx, id, destID, true)
		if err != nil {
			return err
		}
		now := a.storedNow()
		out = d
		if !d.Disable(domain.WebhookDestinationDisabled, reason, now) {
			return nil
		}
		paused, err := tx.PauseWebhookDeliveriesOfDestination(ctx, d.TenantID, d.ProjectID, d.ID, now)
		if err != nil {
			return err
		}
		details, _ := json.Marshal(map[string]any{"destinationId": d.ID.String(), "reason": reason, "paused": paused})
		if _, err := a.recordCommandEvent(ctx, tx, id, d.ProjectID, "webhook.destination.disabled",
			domain.Resource{Type: "webhook_destination", ID: d.ID.String()}, domain.RiskMedium, string(details), now); err != nil {
			return err
		}
		out = d
		return tx.SaveWebhookDestinationState(ctx, d)
	})
	if err != nil {
		return domain.WebhookDestination{}, err
	}
	return out, nil
}

// EnableWebhookDestination enables a disabled or auto-disabled destination
// with a fresh health record (breaker closed, no failures counted), and
// resumes its PAUSED deliveries: back to PENDING with their attempts and
// budget, their jobs enqueued in order of sequence. Enabling an enabled
// destination succeeds and changes nothing. Needs webhooks:write; audited
// as webhook.destination.enabled.
func (a *App) EnableWebhookDestination(ctx context.Context, id Identity, destinationID string) (_ domain.WebhookDestination, err error) {
	ctx, span := a.startCommand(ctx, "EnableWebhookDestination")
	defer func() { a.endCommand(span, err) }()
	if err := a.authorizeCommand(id, PermissionWebhooksWrite, tenantScope); err != nil {
		return domain.WebhookDestination{}, err
	}
	destID, err := parseID(destinationID, ErrWebhookDestinationNotFound)
	if err != nil {
		return domain.WebhookDestination{}, err
	}
	var out domain.WebhookDestination
	err = a.retryTx(ctx, func(ctx context.Context, tx Tx) error {
		d, err := a.visibleDestination(ctx, tx, id, destID, true)
		if err != nil {
			return err
		}
		out = d
		was := d.State
		if !d.Enable() {
			return nil
		}
		now := a.storedNow()
		resumed, err := tx.ResumeWebhookDeliveriesOfDestination(ctx, d.TenantID, d.ProjectID, d.ID, now)
		if err != nil {
			return err
		}
		details, _ := json.Marshal(map[string]any{"destinationId": d.ID.String(), "previousState": was, "resumed": len(resumed)})
		if _, err := a.recordCommandEvent(ctx, tx, id, d.ProjectID, "webhook.destination.enabled",
			domain.Resource{Type: "webhook_destination", ID: d.ID.String()}, domain.RiskMedium, string(details), now); err != nil {
			return err
		}
		if err := tx.SaveWebhookDestinationState(ctx, d); err != nil {
			return err
		}
		out = d
		return tx.EnqueueJobs(ctx, webhookFirstAttemptJobs(resumed)...)
	})
	if err != nil {
		return domain.WebhookDestination{}, err
	}
	return out, nil
}

// deletedDestinationReason is the lastError of a delivery cancelled by its
// destination's deletion.
const deletedDestinationReason = "cancelled: the webhook destination was deleted"

// DeleteWebhookDestination deletes a destination: its active subscriptions
// end (as a disable does, as of the deletion's event), its deliveries not
// yet sent to the end become CANCELLED with a reason, its secrets stop
// signing, and no query shows it again. Deliveries, attempts and events
// are kept as evidence. Needs webhooks:write and confirm (else
// CONFIRMATION_REQUIRED); audited as webhook.destination.deleted.
func (a *App) DeleteWebhookDestination(ctx context.Context, id Identity, destinationID string, confirm bool) (_ domain.WebhookDestination, err error) {
	ctx, span := a.startCommand(ctx, "DeleteWebhookDestination")
	defer func() { a.endCommand(span, err) }()
	if err := a.authorizeCommand(id, PermissionWebhooksWrite, tenantScope); err != nil {
		return domain.WebhookDestination{}, err
	}
	if !confirm {
		return domain.WebhookDestination{}, &Error{Code: CodeConfirmationRequired, Field: "confirm",
			Message: "deleting a destination ends its subscriptions and cancels its pending deliveries: repeat with confirm: true"}
	}
	destID, err := parseID(destinationID, ErrWebhookDestinationNotFound)
	if err != nil {
		return domain.WebhookDestination{}, err
	}
	var out domain.WebhookDestination
	err = a.retryTx(ctx, func(ctx context.Context, tx Tx) error {
		d, err := a.visibleDestination(ctx, tx, id, destID, true)
		if err != nil {
			return err
		}
		now := a.storedNow()
		subs, err := tx.ListActiveWebhookSubscriptionsOfDestination(ctx, d.TenantID, d.ProjectID, d.ID)
		if err != nil {
			return err
		}
		cancelled, err := tx.CancelWebhookDeliveriesOfDestination(ctx, d.TenantID, d.ProjectID, d.ID, deletedDestinationReason, now)
		if err != nil {
			return err
		}
		ended := make([]string, len(subs))
		for i := range subs {
			ended[i] = subs[i].ID.String()
		}
		details, _ := json.Marshal(map[string]any{"destinationId": d.ID.String(), "host": urlHost(d.URL),
			"subscriptionsEnded": ended, "deliveriesCancelled": cancelled})
		// The event locks the project's head: the subscriptions end as of
		// its sequence, as a disable does.
		event, err := a.recordCommandEvent(ctx, tx, id, d.ProjectID, "webhook.destination.deleted",
			domain.Resource{Type: "webhook_destination", ID: d.ID.String()}, domain.RiskHigh, string(details), now)
		if err != nil {
			return err
		}
		for i := range subs {
			subs[i].Disable(now, event.Sequence)
			if err := tx.DisableWebhookSubscription(ctx, subs[i]); err != nil {
				return err
			}
		}
		if err := tx.ExpireWebhookDestinationSecrets(ctx, d.ID, now); err != nil {
			return err
		}
		d.DeletedAt = &now
		d.ActiveSecrets = 0
		if err := tx.SaveWebhookDestinationState(ctx, d); err != nil {
			return err
		}
		out = d
		return nil
	})
	if err != nil {
		return domain.WebhookDestination{}, err
	}
	return out, nil
}
