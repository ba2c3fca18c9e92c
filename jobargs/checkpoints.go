package jobargs

// SignAuditCheckpointsArgs is the periodic job that signs a checkpoint of
// every project with events since its latest checkpoint.
type SignAuditCheckpointsArgs struct{}

// Kind implements river.JobArgs.
func (SignAuditCheckpointsArgs) Kind() string { return "sign_audit_checkpoints" }

// WriteCheckpointObjectArgs is the outbox job, inserted with a new
// checkpoint, that writes it to object storage as
// checkpoints/<tenant>/<project>/<sequence>.jws.
type WriteCheckpointObjectArgs struct {
	TenantID  string `json:"tenant_id"`
	ProjectID string `json:"project_id"`
	Sequence  uint64 `json:"sequence"`
}

// Kind implements river.JobArgs.
func (WriteCheckpointObjectArgs) Kind() string { return "write_checkpoint_object" }
