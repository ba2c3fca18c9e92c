package jobargs

// WebhookFanoutArgs is the outbox fact of recorded events: the events of
// tenant/project with sequence in [FromSequence, ToSequence] are to be
// matched against the project's webhook subscriptions.
type WebhookFanoutArgs struct {
	TenantID     string `json:"tenant_id"`
	ProjectID    string `json:"project_id"`
	FromSequence uint64 `json:"from_sequence,string"`
	ToSequence   uint64 `json:"to_sequence,string"`
}

// Kind names the job.
func (WebhookFanoutArgs) Kind() string { return "webhook_fanout" }
