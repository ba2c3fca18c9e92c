package jobargs

// PurgeAuditEventsArgs is the periodic job that removes audit events older
// than their tenant's retention window.
type PurgeAuditEventsArgs struct{}

// Kind implements river.JobArgs.
func (PurgeAuditEventsArgs) Kind() string { return "purge_audit_events" }

// PruneIdempotencyKeysArgs is the periodic job that deletes idempotency
// records past their expiry.
type PruneIdempotencyKeysArgs struct{}

// Kind implements river.JobArgs.
func (PruneIdempotencyKeysArgs) Kind() string { return "prune_idempotency_keys" }

// MaintainPartitionsArgs is the periodic job that creates the partitions
// of the months ahead and drops those past retention (app.MaintainPartitions).
type MaintainPartitionsArgs struct{}

// Kind implements river.JobArgs.
func (MaintainPartitionsArgs) Kind() string { return "maintain_partitions" }
