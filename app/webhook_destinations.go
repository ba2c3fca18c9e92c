package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	neturl "net/url"
	"time"

	"github.com/google/uuid"

	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/webhook"
)

// ErrWebhookDestinationNotFound answers a lookup of a destination that is
// missing or not visible to the caller.
var ErrWebhookDestinationNotFound = newError(CodeNotFound, "webhook destination not found")

// CreateWebhookDestinationInput registers a receiver.
type CreateWebhookDestinationInput struct {
	ProjectID   string
	URL         string
	Description string
}

// WebhookDestinationWithSecret is a destination with its signing secret in
// plaintext: the answer of creation and rotation, the only two times the
// secret is shown.
type WebhookDestinationWithSecret struct {
	Destination   domain.WebhookDestination
	SigningSecret string
	// PreviousSecretsExpireAt is, after a rotation, when the secrets it
	// replaced stop signing.
	PreviousSecretsExpireAt *time.Time
}

// CreateWebhookDestination registers an HTTPS receiver for a project and
// generates its signing secret (Standard Webhooks "whsec_" format), stored
// sealed under the master key. Needs webhooks:write. The URL must be https
// and must not name localhost or a literal non-global address. Audited as
// webhook.destination.created (without the URL's secret parts or the
// secret).
func (a *App) CreateWebhookDestination(ctx context.Context, id Identity, in CreateWebhookDestinationInput) (_ WebhookDestinationWithSecret, err error) {
	ctx, span := a.startCommand(ctx, "CreateWebhookDestination")
	defer func() { a.endCommand(span, err) }()
	if err := a.authorizeCommand(id, PermissionWebhooksWrite, in.ProjectID); err != nil {
		return WebhookDestinationWithSecret{}, err
	}
	url, err := webhook.ValidateURL(in.URL, a.webhooks.URLPolicy)
	if err != nil {
		var uerr *webhook.URLError
		if errors.As(err, &uerr) {
			return WebhookDestinationWithSecret{}, badInput("url", uerr.Error())
		}
		return WebhookDestinationWithSecret{}, err
	}
	if err := checkDescription(in.Description); err != nil {
		return WebhookDestinationWithSecret{}, err
	}
	if a.webhooks.Box == nil {
		return WebhookDestinationWithSecret{}, errors.New("webhooks: no master key configured")
	}
	now := a.storedNow()
	d := domain.WebhookDestination{
		ID: uuid.Must(uuid.NewV7()), TenantID: id.TenantID, ProjectID: in.ProjectID, URL: url,
		Description: in.Description, CreatedAt: now, CreatedBy: id.Subject, ActiveSecrets: 1,
		State: domain.WebhookDestinationEnabled, Headers: []domain.WebhookHeader{},
	}
	plain, sealed, err := a.newSealedSecret(d.ID, now)
	if err != nil {
		return WebhookDestinationWithSecret{}, err
	}
	err = a.retryTx(ctx, func(ctx context.Context, tx Tx) error {
		// The audit event locks the project's head first, which also
		// serializes this quota check among concurrent creations.
		details, _ := json.Marshal(map[string]string{"destinationId": d.ID.String(), "host": urlHost(url)})
		if _, err := a.recordCommandEvent(ctx, tx, id, d.ProjectID, "webhook.destination.created",
			domain.Resource{Type: "webhook_destination", ID: d.ID.String()}, domain.RiskMedium, string(details), now); err != nil {
			return err
		}
		existing, err := tx.ListWebhookDestinations(ctx, id.TenantID, in.ProjectID, uuid.Nil, MaxWebhookDestinationsPerProject)
		if err != nil {
			return err
		}
		if len(existing) >= MaxWebhookDestinationsPerProject {
			return newError(CodeQuotaExceeded, fmt.Sprintf("a project has at most %d webhook destinations", MaxWebhookDestinationsPerProject))
		}
		return tx.InsertWebhookDestination(ctx, d, sealed)
	})
	if err != nil {
		return WebhookDestinationWithSecret{}, err
	}
	return WebhookDestinationWithSecret{Destination: d, SigningSecret: plain}, nil
}

// newSealedSecret generates a signing secret for a destination and seals it.
func (a *App) newSealedSecret(destinationID uuid.UUID, now time.Time) (string, domain.SealedWebhookSecret, error) {
	plain, _, err := webhook.NewSecret()
	if err != nil {
		return "", domain.SealedWebhookSecret{}, err
	}
	sec := domain.SealedWebhookSecret{ID: uuid.Must(uuid.NewV7()), CreatedAt: now}
	sec.Sealed, err = a.webhooks.Box.Seal([]byte(plain), secretAAD(destinationID, sec.ID))
	if err != nil {
		return "", domain.SealedWebhookSecret{}, err
	}
	return plain, sec, nil
}

// secretAAD binds a sealed secret to its destination and row.
func secretAAD(destinationID, secretID uuid.UUID) []byte {
	return []byte("webhook-secret:" + destinationID.String() + ":" + secretID.String())
}

// urlHost returns the host of a validated URL, for audit details.
func urlHost(raw string) string {
	u, err := neturl.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Host
}

func checkDescription(s string) error {
	return domain.ValidateText("description", s, domain.MaxWebhookDescriptionLength, false, false)
}

// RotateWebhookDestinationSecretInput rotates a destination's secret.
type RotateWebhookDestinationSecretInput struct {
	DestinationID string
	// GracePeriod is how long the secrets being replaced keep signing
	// (deliveries carry a signature per valid secret); nil means
	// DefaultSecretGracePeriod, at most MaxSecretGracePeriod.
	GracePeriod *time.Duration
}

// RotateWebhookDestinationSecret gives a destination a new signing secret,
// returned once. During the grace period deliveries are signed with every
// valid secret, so receivers can switch without losing any. Needs
// webhooks:write; audited as webhook.destination.secret_rotated.
func (a *App) RotateWebhookDestinationSecret(ctx context.Context, id Identity, in RotateWebhookDestinationSecretInput) (_ WebhookDestinationWithSecret, err error) {
	ctx, span := a.startCommand(ctx, "RotateWebhookDestinationSecret")
	defer func() { a.endCommand(span, err) }()
	if err := a.authorizeCommand(id, PermissionWebhooksWrite, tenantScope); err != nil {
		return WebhookDestinationWithSecret{}, err
	}
	grace := DefaultSecretGracePeriod
	if in.GracePeriod != nil {
		grace = *in.GracePeriod
		if grace < 0 || grace > MaxSecretGracePeriod {
			return WebhookDestinationWithSecret{}, badInput("gracePeriodSeconds",
				fmt.Sprintf("must be between 0 and %d", int(MaxSecretGracePeriod/time.Second)))
		}
	}
	destID, err := parseID(in.DestinationID, ErrWebhookDestinationNotFound)
	if err != nil {
		return WebhookDestinationWithSecret{}, err
	}
	if a.webhooks.Box == nil {
		return WebhookDestinationWithSecret{}, errors.New("webhooks: no master key configured")
	}
	var out WebhookDestinationWithSecret
	err = a.retryTx(ctx, func(ctx context.Context, tx Tx) error {
		d, err := a.visibleDestination(ctx, tx, id, destID, true)
		if err != nil {
			return err
		}
		now := a.storedNow()
		plain, sealed, err := a.newSealedSecret(d.ID, now)
		if err != nil {
			return err
		}
		until := now.Add(grace)
		if err := tx.RotateWebhookDestinationSecret(ctx, d.ID, sealed, until); err != nil {
			return err
		}
		details, _ := json.Marshal(map[string]any{"destinationId": d.ID.String(), "gracePeriodSeconds": int64(grace / time.Second)})
		if _, err := a.recordCommandEvent(ctx, tx, id, d.ProjectID, "webhook.destination.secret_rotated",
			domain.Resource{Type: "webhook_destination", ID: d.ID.String()}, domain.RiskHigh, string(details), now); err != nil {
			return err
		}
		d, err = tx.GetWebhookDestination(ctx, id.TenantID, d.ID, false)
		if err != nil {
			return err
		}
		out = WebhookDestinationWithSecret{Destination: d, SigningSecret: plain, PreviousSecretsExpireAt: &until}
		return nil
	})
	if err != nil {
		return WebhookDestinationWithSecret{}, err
	}
	return out, nil
}

// visibleDestination reads, through r (the Store, or a Tx), a destination
// of id's tenant in one of its projects, not deleted; anything else is
// ErrWebhookDestinationNotFound.
func (a *App) visibleDestination(ctx context.Context, r WebhookReads, id Identity, destID uuid.UUID, lock bool) (domain.WebhookDestination, error) {
	d, err := r.GetWebhookDestination(ctx, id.TenantID, destID, lock)
	if errors.Is(err, domain.ErrNotFound) || err == nil && (!id.CanAccessProject(d.ProjectID) || d.DeletedAt != nil) {
		return domain.WebhookDestination{}, ErrWebhookDestinationNotFound
	}
	return d, err
}

// WebhookDestination returns one destination, never its secrets. Needs
// webhooks:read; another tenant's or project's destination is not found.
func (a *App) WebhookDestination(ctx context.Context, id Identity, destinationID string) (domain.WebhookDestination, error) {
	if err := authorize(id, PermissionWebhooksRead, tenantScope); err != nil {
		return domain.WebhookDestination{}, err
	}
	destID, err := parseID(destinationID, ErrWebhookDestinationNotFound)
	if err != nil {
		return domain.WebhookDestination{}, err
	}
	return a.visibleDestination(ctx, a.store, id, destID, false)
}

// WebhookDestinations returns a project's destinations, oldest first (at
// most MaxWebhookDestinationsPerProject). Needs webhooks:read.
func (a *App) WebhookDestinations(ctx context.Context, id Identity, projectID string) ([]domain.WebhookDestination, error) {
	if err := authorize(id, PermissionWebhooksRead, projectID); err != nil {
		return nil, err
	}
	return a.store.ListWebhookDestinations(ctx, id.TenantID, projectID, uuid.Nil, MaxWebhookDestinationsPerProject)
}
