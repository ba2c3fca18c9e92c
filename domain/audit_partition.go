package domain

import "time"

// AuditPartition is a bounded partition of audit_events: the events
// recorded in [From, To). From is the zero time for the partition of the
// events stored before partitioning (unbounded below).
type AuditPartition struct {
	Name     string
	From, To time.Time
}
