package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/store/dbsqlc"
)

// destinationLifecycleFromRow fills the lifecycle, limits, headers and
// health of a destination from its row (see destinationFromRow).
func destinationLifecycleFromRow(d *domain.WebhookDestination, r *dbsqlc.GetWebhookDestinationRow) {
	d.State, d.DisabledReason = domain.WebhookDestinationState(r.State), r.DisabledReason
	d.DisabledAt, d.DeletedAt = utcPtr(r.DisabledAt), utcPtr(r.DeletedAt)
	if r.RateLimitPerSecond != nil {
		d.RateLimitPerSecond = int(*r.RateLimitPerSecond)
	}
	if r.MaxInFlight != nil {
		d.MaxInFlight = int(*r.MaxInFlight)
	}
	d.Headers = []domain.WebhookHeader{}
	_ = json.Unmarshal(r.Headers, &d.Headers)
	d.Health = domain.WebhookDestinationHealth{
		ConsecutiveFailures: int(r.ConsecutiveFailures), FailingSince: utcPtr(r.FailingSince),
		LastSuccessAt: utcPtr(r.LastSuccessAt), LastFailureAt: utcPtr(r.LastFailureAt),
		CircuitOpenUntil: utcPtr(r.CircuitOpenUntil), CircuitOpens: int(r.CircuitOpens), ProbeUntil: utcPtr(r.ProbeUntil),
		HourStart: utcPtr(r.HourStart), HourSucceeded: int(r.HourSucceeded), HourFailed: int(r.HourFailed),
		PrevHourSucceeded: int(r.PrevHourSucceeded), PrevHourFailed: int(r.PrevHourFailed),
	}
}

// optionalInt32 is n as a nullable column: NULL for 0.
func optionalInt32(n int) *int32 {
	if n == 0 {
		return nil
	}
	v := int32(n)
	return &v
}

// UpdateWebhookDestinationSettings stores a destination's URL, description,
// limits and headers; a changed rate limit starts with a full bucket at now.
func (t *Tx) UpdateWebhookDestinationSettings(ctx context.Context, d domain.WebhookDestination, now time.Time) error {
	headers, err := json.Marshal(d.Headers)
	if err != nil {
		return fmt.Errorf("encoding webhook headers: %w", err)
	}
	if d.Headers == nil {
		headers = []byte("[]")
	}
	err = t.sqlc.UpdateWebhookDestinationSettings(ctx, dbsqlc.UpdateWebhookDestinationSettingsParams{
		TenantID: d.TenantID, ID: d.ID, Url: d.URL, Description: d.Description, MaxInFlight: optionalInt32(d.MaxInFlight),
		Headers: headers, RateLimitPerSecond: optionalInt32(d.RateLimitPerSecond), Now: now})
	if err != nil {
		return fmt.Errorf("updating webhook destination: %w", err)
	}
	return nil
}

// SaveWebhookDestinationState stores a destination's lifecycle and health.
func (t *Tx) SaveWebhookDestinationState(ctx context.Context, d domain.WebhookDestination) error {
	h := d.Health
	err := t.sqlc.SaveWebhookDestinationState(ctx, dbsqlc.SaveWebhookDestinationStateParams{
		TenantID: d.TenantID, ID: d.ID, State: string(d.State), DisabledReason: d.DisabledReason,
		DisabledAt: d.DisabledAt, DeletedAt: d.DeletedAt, ConsecutiveFailures: int32(h.ConsecutiveFailures),
		FailingSince: h.FailingSince, LastSuccessAt: h.LastSuccessAt, LastFailureAt: h.LastFailureAt,
		CircuitOpenUntil: h.CircuitOpenUntil, CircuitOpens: int32(h.CircuitOpens), ProbeUntil: h.ProbeUntil,
		HourStart: h.HourStart, HourSucceeded: int32(h.HourSucceeded), HourFailed: int32(h.HourFailed),
		PrevHourSucceeded: int32(h.PrevHourSucceeded), PrevHourFailed: int32(h.PrevHourFailed)})
	if err != nil {
		return fmt.Errorf("saving webhook destination state: %w", err)
	}
	return nil
}

// RecordWebhookDestinationSuccesses counts succeeded successful attempts
// at now in the health of a destination whose health is steady
// (domain.WebhookDestinationHealth.Steady), in one statement; false when
// it is not (or the destination is deleted or gone), and nothing changed.
func (t *Tx) RecordWebhookDestinationSuccesses(ctx context.Context, tenantID string, destinationID uuid.UUID, succeeded int, now time.Time) (bool, error) {
	n, err := t.sqlc.RecordWebhookDestinationSuccesses(ctx, dbsqlc.RecordWebhookDestinationSuccessesParams{
		TenantID: tenantID, ID: destinationID, Now: now, Succeeded: int32(succeeded), HourStart: now.Truncate(time.Hour)})
	if err != nil {
		return false, fmt.Errorf("recording webhook destination successes: %w", err)
	}
	return n == 1, nil
}

// ExpireWebhookDestinationSecrets ends every secret of a destination at at.
func (t *Tx) ExpireWebhookDestinationSecrets(ctx context.Context, destinationID uuid.UUID, at time.Time) error {
	if _, err := t.tx.Exec(ctx, dbsqlc.ExpireWebhookDestinationSecrets, destinationID, at, at); err != nil {
		return fmt.Errorf("expiring webhook secrets: %w", err)
	}
	return nil
}

// ListActiveWebhookSubscriptionsOfDestination returns, locked for the
// transaction, a destination's ACTIVE subscriptions.
func (t *Tx) ListActiveWebhookSubscriptionsOfDestination(ctx context.Context, tenantID, projectID string, destinationID uuid.UUID) ([]domain.WebhookSubscription, error) {
	rows, err := t.sqlc.ListActiveWebhookSubscriptionsOfDestination(ctx, dbsqlc.ListActiveWebhookSubscriptionsOfDestinationParams{
		TenantID: tenantID, ProjectID: projectID, DestinationID: destinationID})
	if err != nil {
		return nil, fmt.Errorf("listing subscriptions of webhook destination: %w", err)
	}
	return subscriptionsFromRows(rows), nil
}

// PauseWebhookDeliveriesOfDestination moves a destination's PENDING and
// RETRYING deliveries to PAUSED, and counts them.
func (t *Tx) PauseWebhookDeliveriesOfDestination(ctx context.Context, tenantID, projectID string, destinationID uuid.UUID, now time.Time) (int64, error) {
	n, err := t.sqlc.PauseWebhookDeliveriesOfDestination(ctx, dbsqlc.PauseWebhookDeliveriesOfDestinationParams{
		TenantID: tenantID, ProjectID: projectID, DestinationID: destinationID, Now: now})
	if err != nil {
		return 0, fmt.Errorf("pausing webhook deliveries: %w", err)
	}
	return n, nil
}

// CancelWebhookDeliveriesOfDestination moves a destination's PENDING,
// RETRYING and PAUSED deliveries to CANCELLED with reason, and counts them.
func (t *Tx) CancelWebhookDeliveriesOfDestination(ctx context.Context, tenantID, projectID string, destinationID uuid.UUID, reason string, now time.Time) (int64, error) {
	n, err := t.sqlc.CancelWebhookDeliveriesOfDestination(ctx, dbsqlc.CancelWebhookDeliveriesOfDestinationParams{
		TenantID: tenantID, ProjectID: projectID, DestinationID: destinationID, Reason: reason, Now: now})
	if err != nil {
		return 0, fmt.Errorf("cancelling webhook deliveries: %w", err)
	}
	return n, nil
}

// ResumeWebhookDeliveriesOfDestination moves a destination's PAUSED
// deliveries back to PENDING, due at now, and returns what their jobs need
// (id, event, attempts), in order of sequence.
func (t *Tx) ResumeWebhookDeliveriesOfDestination(ctx context.Context, tenantID, projectID string, destinationID uuid.UUID, now time.Time) ([]*domain.WebhookDelivery, error) {
	rows, err := t.sqlc.ResumeWebhookDeliveriesOfDestination(ctx, dbsqlc.ResumeWebhookDeliveriesOfDestinationParams{
		TenantID: tenantID, ProjectID: projectID, DestinationID: destinationID, Now: now})
	if err != nil {
		return nil, fmt.Errorf("resuming webhook deliveries: %w", err)
	}
	out := make([]*domain.WebhookDelivery, len(rows))
	for i, r := range rows {
		out[i] = &domain.WebhookDelivery{ID: r.ID, TenantID: tenantID, ProjectID: projectID, DestinationID: destinationID,
			SubscriptionID: r.SubscriptionID, EventID: r.EventID, EventSequence: uint64(r.EventSequence),
			AttemptCount: int(r.AttemptCount), State: domain.WebhookDeliveryPending, Ordered: r.Ordered}
	}
	return out, nil
}

// ClaimWebhookDestinationProbe claims, until until, the one probe of a
// destination whose breaker is half open at now.
func (q *queries) ClaimWebhookDestinationProbe(ctx context.Context, tenantID string, destinationID uuid.UUID, now, until time.Time) (bool, error) {
	n, err := q.sqlc.ClaimWebhookDestinationProbe(ctx, dbsqlc.ClaimWebhookDestinationProbeParams{
		TenantID: tenantID, ID: destinationID, Now: now, ProbeUntil: &until})
	if err != nil {
		return false, fmt.Errorf("claiming a webhook destination's probe: %w", err)
	}
	return n == 1, nil
}

// TakeWebhookDestinationTokens takes up to want requests from a
// destination's rate limit at now: how many it took, and the fraction of a
// token left. A destination without a rate limit gives want.
func (q *queries) TakeWebhookDestinationTokens(ctx context.Context, tenantID string, destinationID uuid.UUID, want int, now time.Time) (int, float64, error) {
	r, err := q.sqlc.TakeWebhookDestinationTokens(ctx, dbsqlc.TakeWebhookDestinationTokensParams{
		TenantID: tenantID, ID: destinationID, Want: int32(want), Now: &now})
	if errors.Is(err, pgx.ErrNoRows) {
		return want, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("taking webhook rate limit tokens: %w", err)
	}
	return int(r.Taken), r.Remaining, nil
}
