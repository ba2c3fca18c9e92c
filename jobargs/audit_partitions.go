package jobargs

// CreateAuditPartitionsArgs is the periodic job that creates the monthly
// partitions of audit_events ahead of time (app.CreateAuditPartitions).
type CreateAuditPartitionsArgs struct{}

// Kind implements river.JobArgs.
func (CreateAuditPartitionsArgs) Kind() string { return "create_audit_partitions" }
