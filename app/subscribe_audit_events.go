package app

import (
	"context"
	"errors"

	"github.com/aetheriot/aether-audit/domain"
)

// AuditEventStream is a live, resumable sequence of a project's audit
// events; *live.Subscription implements it.
type AuditEventStream interface {
	// Next returns the next event in sequence order, waiting for one to be
	// committed; never an event twice, never skipping one. The event is
	// shared with other subscribers and must not be modified.
	Next(ctx context.Context) (*domain.AuditEvent, error)
	// Close ends the stream.
	Close()
}

// LiveFeed opens streams of committed audit events; the live hub
// implements it.
type LiveFeed interface {
	// Subscribe streams tenant/project's events passing filter after
	// sequence after, or, when after is nil, after the newest one committed
	// now.
	Subscribe(ctx context.Context, tenantID, projectID string, after *uint64, filter domain.AuditEventFilter) (AuditEventStream, error)
}

// SubscribeAuditEventsInput is a request for a live feed of a project.
type SubscribeAuditEventsInput struct {
	ProjectID string
	// AfterSequence replays every committed matching event after it first;
	// nil starts with the next event committed.
	AfterSequence *uint64
	Filter        AuditEventFilterInput
}

// ErrLiveUnavailable is returned when the App has no live feed.
var ErrLiveUnavailable = errors.New("live feed not configured")

// SubscribeAuditEvents opens a live feed of a project's audit events for an
// identity with audit:read and the project: the same authorization and
// filters as SearchAuditEvents. The caller must Close the stream.
func (a *App) SubscribeAuditEvents(ctx context.Context, id Identity, in SubscribeAuditEventsInput) (AuditEventStream, error) {
	if err := authorize(id, PermissionAuditRead, in.ProjectID); err != nil {
		return nil, err
	}
	// Bad input is refused before the start is charged to the rate limit,
	// so that a caller retrying (the fast path falls back to the executor)
	// is not charged twice.
	filter, err := ParseAuditEventFilter(in.Filter)
	if err != nil {
		return nil, err
	}
	if err := a.authorizeSubscription(id, PermissionAuditRead, in.ProjectID); err != nil {
		return nil, err
	}
	if a.live == nil {
		return nil, ErrLiveUnavailable
	}
	return a.live.Subscribe(ctx, id.TenantID, in.ProjectID, in.AfterSequence, filter)
}
