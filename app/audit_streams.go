package app

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"gocloud.dev/blob"

	"github.com/aetheriot/aether-audit/domain"
)

// ErrAuditStreamNotFound answers a lookup of a stream that is missing or
// not visible to the caller.
var ErrAuditStreamNotFound = newError(CodeNotFound, "audit stream not found")

// AuditStreamReads reads streams and their cursors: on the Store each read
// runs alone, on a Tx in its transaction (with lock, the stream stays
// locked until the commit).
type AuditStreamReads interface {
	GetAuditStream(ctx context.Context, tenantID string, id uuid.UUID, lock bool) (domain.AuditStream, error)
	ListAuditStreams(ctx context.Context, tenantID string, after uuid.UUID, limit int) ([]domain.AuditStream, error)
	AuditStreamHealth(ctx context.Context, streamID uuid.UUID) ([]domain.AuditStreamHealth, error)
}

// AuditStreamStore is what the stream use cases and the stream worker need
// of the Store: reads, and the cursor statements, each alone.
type AuditStreamStore interface {
	AuditStreamReads
	// EnsureAuditStreamCursors gives allProjects streams a cursor in each
	// project of their tenant that has events, and reports whether any
	// stream cursor exists (of any tenant).
	EnsureAuditStreamCursors(ctx context.Context) (bool, error)
	// ClaimAuditStreamCursors leases up to limit cursors with work (not
	// paused, behind the head, not leased, not waiting for a retry).
	ClaimAuditStreamCursors(ctx context.Context, owner uuid.UUID, now, leaseUntil time.Time, limit int) ([]domain.AuditStreamCursor, error)
	// AdvanceAuditStreamCursor moves a leased cursor from c.Acked to
	// through; false when the lease was lost or the stream deleted.
	AdvanceAuditStreamCursor(ctx context.Context, c domain.AuditStreamCursor, through uint64, owner uuid.UUID, now, leaseUntil time.Time) (bool, error)
	// FailAuditStreamCursor records a failed delivery and releases the
	// cursor until retryAt.
	FailAuditStreamCursor(ctx context.Context, c domain.AuditStreamCursor, owner uuid.UUID, message string, now, retryAt time.Time) error
	// StreamAuditEventsAfter calls fn for the first limit events of
	// tenant/project after sequence after, through through, that pass f
	// (nil: every event), in sequence order; fn borrows each event.
	StreamAuditEventsAfter(ctx context.Context, tenantID, projectID string, after, through uint64, f *domain.AuditEventFilter, limit int, fn func(*domain.AuditEvent) error) error
	// ReleaseAuditStreamCursor gives a leased cursor back.
	ReleaseAuditStreamCursor(ctx context.Context, c domain.AuditStreamCursor, owner uuid.UUID) error
}

// AuditStreamTx is what the stream commands write in their transaction.
type AuditStreamTx interface {
	AuditStreamReads
	// InsertAuditStream stores a stream and the cursors of its listed
	// projects.
	InsertAuditStream(ctx context.Context, s domain.AuditStream) error
	// UpdateAuditStream saves the sink URL, sealed secret, filter and
	// pause; resuming makes failed cursors due at once.
	UpdateAuditStream(ctx context.Context, s domain.AuditStream) error
	DeleteAuditStream(ctx context.Context, tenantID string, id uuid.UUID) error
}

// StreamConfig configures audit streams.
type StreamConfig struct {
	// OpenBucket opens the bucket of an S3 sink's URL; nil refuses S3
	// sinks.
	OpenBucket func(ctx context.Context, rawURL string) (*blob.Bucket, error)
	// Workers is how many projects' cursors this process delivers at once;
	// default 4.
	Workers int
	// BatchEvents is the most events of one HTTPS, Splunk or Datadog
	// request; default and at most 1,000.
	BatchEvents int
	// ObjectEvents is the most events of one S3 object; default 10,000.
	ObjectEvents int
	// ObjectMaxAge is how long an S3 object waits for ObjectEvents events:
	// a smaller object is written once its oldest event is this old;
	// default 10 s.
	ObjectMaxAge time.Duration
	// Lease is how long a process holds a cursor without progress before
	// another may take it over (its process died); default 30 s.
	Lease time.Duration
	// Poll is how often the worker looks for work without a live
	// notification; default 1 s.
	Poll time.Duration
	// MaxBackoff bounds the wait between failed attempts; default 5 min.
	MaxBackoff time.Duration
}

// withDefaults fills in StreamConfig's defaults.
func (c StreamConfig) withDefaults() StreamConfig {
	if c.Workers <= 0 {
		c.Workers = 4
	}
	if c.BatchEvents <= 0 || c.BatchEvents > MaxStreamBatchEvents {
		c.BatchEvents = MaxStreamBatchEvents
	}
	if c.ObjectEvents <= 0 {
		c.ObjectEvents = 10_000
	}
	if c.ObjectMaxAge <= 0 {
		c.ObjectMaxAge = 10 * time.Second
	}
	if c.Lease <= 0 {
		c.Lease = 30 * time.Second
	}
	if c.Poll <= 0 {
		c.Poll = time.Second
	}
	// A small object waits within its worker's lease.
	c.ObjectMaxAge = min(c.ObjectMaxAge, c.Lease/2)
	if c.MaxBackoff <= 0 {
		c.MaxBackoff = 5 * time.Minute
	}
	return c
}

// Limits of audit streams.
const (
	// MaxStreamBatchEvents bounds one request of the HTTP sinks (Datadog
	// takes at most 1,000 logs per request).
	MaxStreamBatchEvents = 1000
	// MaxAuditStreamsPerTenant bounds a tenant's streams.
	MaxAuditStreamsPerTenant = 20
	// MaxAuditStreamProjects bounds the projects a stream lists.
	MaxAuditStreamProjects = 100
	// maxStreamCredentialLength bounds a Splunk token or Datadog API key.
	maxStreamCredentialLength = 1024
)

// AuditStreamView is a stream with its per-project health, as the queries
// answer it.
type AuditStreamView struct {
	Stream   domain.AuditStream
	Projects []domain.AuditStreamHealth
	// State is the stream's reported state.
	State domain.AuditStreamState
	// Breaker is the policy of its cursors' circuit breakers
	// (domain.AuditStreamCursor.Circuit).
	Breaker domain.WebhookBreakerPolicy
}

// canSeeStream reports whether id may see s: every project it covers
// (AllProjects needs a token for every project).
func canSeeStream(id Identity, s *domain.AuditStream) bool {
	if s.AllProjects {
		return containsAll(id.ProjectIDs)
	}
	for _, p := range s.ProjectIDs {
		if !id.CanAccessProject(p) {
			return false
		}
	}
	return true
}

// containsAll reports whether projects grant every project.
func containsAll(projects []string) bool {
	for _, p := range projects {
		if p == AllProjects {
			return true
		}
	}
	return false
}

// visibleStream reads, through r, a stream of id's tenant that id may see;
// anything else is ErrAuditStreamNotFound.
func visibleStream(ctx context.Context, r AuditStreamReads, id Identity, streamID string, lock bool) (domain.AuditStream, error) {
	sid, err := parseID(streamID, ErrAuditStreamNotFound)
	if err != nil {
		return domain.AuditStream{}, err
	}
	s, err := r.GetAuditStream(ctx, id.TenantID, sid, lock)
	if errors.Is(err, domain.ErrNotFound) || err == nil && !canSeeStream(id, &s) {
		return domain.AuditStream{}, ErrAuditStreamNotFound
	}
	return s, err
}

// view reads a stream's health into its view.
func (a *App) view(ctx context.Context, s domain.AuditStream) (AuditStreamView, error) {
	h, err := a.store.AuditStreamHealth(ctx, s.ID)
	if err != nil {
		return AuditStreamView{}, err
	}
	return AuditStreamView{Stream: s, Projects: h, State: domain.AuditStreamStateOf(s.Paused, h), Breaker: a.webhooks.Breaker}, nil
}

// AuditStream returns one stream with its health. Needs streams:read;
// another tenant's stream, or one covering a project outside the token, is
// not found.
func (a *App) AuditStream(ctx context.Context, id Identity, streamID string) (AuditStreamView, error) {
	if err := authorize(id, PermissionStreamsRead, tenantScope); err != nil {
		return AuditStreamView{}, err
	}
	s, err := visibleStream(ctx, a.store, id, streamID, false)
	if err != nil {
		return AuditStreamView{}, err
	}
	return a.view(ctx, s)
}

// AuditStreams returns a page of the tenant's streams the token may see,
// oldest first. Needs streams:read.
func (a *App) AuditStreams(ctx context.Context, id Identity, first *int, after string) (Page[AuditStreamView], error) {
	if err := authorize(id, PermissionStreamsRead, tenantScope); err != nil {
		return Page[AuditStreamView]{}, err
	}
	limit, afterID, err := idPage(first, after)
	if err != nil {
		return Page[AuditStreamView]{}, err
	}
	// A tenant has at most MaxAuditStreamsPerTenant streams: read them
	// all and page the visible ones.
	all, err := a.store.ListAuditStreams(ctx, id.TenantID, afterID, MaxAuditStreamsPerTenant+1)
	if err != nil {
		return Page[AuditStreamView]{}, err
	}
	var views []AuditStreamView
	for _, s := range all {
		if !canSeeStream(id, &s) {
			continue
		}
		if len(views) == limit {
			return Page[AuditStreamView]{Items: views, HasNextPage: true}, nil
		}
		v, err := a.view(ctx, s)
		if err != nil {
			return Page[AuditStreamView]{}, err
		}
		views = append(views, v)
	}
	return Page[AuditStreamView]{Items: views}, nil
}
