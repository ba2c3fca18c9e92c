package domain

import "time"

// Audit retention bounds, in days.
const (
	MinAuditRetentionDays = 1
	MaxAuditRetentionDays = 36500
)

// PurgedPrefix is where a project's purged prefix ends: events up to
// Through were removed by retention, and Hash is the chain hash of event
// Through, from which the remaining chain is verified. The zero value means
// nothing was purged.
type PurgedPrefix struct {
	Through uint64
	Hash    Hash
}

// AuditPurge is one purge of a project's oldest events: sequences From to
// Through (inclusive), Count of them, all recorded before Cutoff.
type AuditPurge struct {
	TenantID  string
	ProjectID string
	From      uint64
	Through   uint64
	Count     int64
	// ThroughHash is the chain hash of event Through, from which the
	// remaining chain is verified.
	ThroughHash Hash
	Cutoff      time.Time
	// DeadLettered is how many webhook deliveries of purged events, not yet
	// delivered, were dead-lettered by the purge.
	DeadLettered int64
}

// PurgeCandidate is a project whose oldest remaining event is older than
// its tenant's retention window.
type PurgeCandidate struct {
	TenantID  string
	ProjectID string
	Retention time.Duration
}
