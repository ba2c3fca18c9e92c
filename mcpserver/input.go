package mcpserver

import "time"

// AuditEventFilter is the filter of search_audit_events: every filter of
// GraphQL's auditEvents, with the same names. All given conditions must
// hold.
type AuditEventFilter struct {
	Action            string             `json:"action,omitempty" jsonschema:"an exact action, or a prefix written prefix.* (e.g. device.*)"`
	SubjectID         string             `json:"subjectId,omitempty" jsonschema:"the exact id of the subject (who acted)"`
	ResourceType      string             `json:"resourceType,omitempty" jsonschema:"the exact type of the resource acted upon, e.g. device"`
	ResourceID        string             `json:"resourceId,omitempty" jsonschema:"the exact id of the resource acted upon"`
	Outcome           []string           `json:"outcome,omitempty" jsonschema:"any of these outcomes"`
	OccurredFrom      *time.Time         `json:"occurredFrom,omitempty" jsonschema:"inclusive lower bound of occurredAt (RFC 3339)"`
	OccurredTo        *time.Time         `json:"occurredTo,omitempty" jsonschema:"exclusive upper bound of occurredAt (RFC 3339)"`
	SequenceFrom      *Sequence          `json:"sequenceFrom,omitempty" jsonschema:"inclusive lower bound of sequence"`
	SequenceTo        *Sequence          `json:"sequenceTo,omitempty" jsonschema:"inclusive upper bound of sequence"`
	RecordedBySubject string             `json:"recordedBySubject,omitempty" jsonschema:"the exact subject of the token that recorded the event (recordedBy.subject)"`
	Correlation       *CorrelationFilter `json:"correlation,omitempty" jsonschema:"exact correlation ids; all given ones must match"`
}

// CorrelationFilter holds exact correlation ids of AuditEventFilter.
type CorrelationFilter struct {
	TraceID     string `json:"traceId,omitempty" jsonschema:"W3C trace id (32 hex digits)"`
	RequestID   string `json:"requestId,omitempty"`
	CausationID string `json:"causationId,omitempty"`
}

// SearchAuditEventsInput is the input of search_audit_events.
type SearchAuditEventsInput struct {
	ProjectID string            `json:"projectId" jsonschema:"the project whose events to search"`
	Filter    *AuditEventFilter `json:"filter,omitempty" jsonschema:"conditions the events must meet"`
	First     *int              `json:"first,omitempty" jsonschema:"page size, 1-100 (default 20)"`
	After     string            `json:"after,omitempty" jsonschema:"endCursor of the previous page, to read the next one"`
	Order     string            `json:"order,omitempty" jsonschema:"OLDEST_FIRST (default) or NEWEST_FIRST"`
}

// GetAuditEventInput is the input of get_audit_event: the event's id, or
// its sequence.
type GetAuditEventInput struct {
	ProjectID string    `json:"projectId" jsonschema:"the event's project"`
	ID        string    `json:"id,omitempty" jsonschema:"the event's id (a UUID); or give sequence"`
	Sequence  *Sequence `json:"sequence,omitempty" jsonschema:"the event's sequence in its project; or give id"`
}

// VerifyAuditChainInput is the input of verify_audit_chain.
type VerifyAuditChainInput struct {
	ProjectID    string    `json:"projectId" jsonschema:"the project whose hash chain to verify"`
	FromSequence *Sequence `json:"fromSequence,omitempty" jsonschema:"first sequence to check (default: the first one retention kept)"`
	ToSequence   *Sequence `json:"toSequence,omitempty" jsonschema:"last sequence to check (default: the head); any length, verified in one call"`
	ResumeToken  string    `json:"resumeToken,omitempty" jsonschema:"a resumeToken of GraphQL's verifyAuditChain or of an auditChainVerification progress item: continues that verification to its end; without fromSequence and toSequence"`
}

// ListWebhookDeliveriesInput is the input of list_webhook_deliveries.
type ListWebhookDeliveriesInput struct {
	ProjectID      string `json:"projectId" jsonschema:"the project whose deliveries to list"`
	State          string `json:"state,omitempty" jsonschema:"only deliveries in this state (DEAD_LETTERED for the dead letters)"`
	SubscriptionID string `json:"subscriptionId,omitempty" jsonschema:"only deliveries of this webhook subscription"`
	EventID        string `json:"eventId,omitempty" jsonschema:"only deliveries of this audit event"`
	First          *int   `json:"first,omitempty" jsonschema:"page size, 1-100 (default 20)"`
	After          string `json:"after,omitempty" jsonschema:"endCursor of the previous page"`
}

// GetWebhookDeliveryInput is the input of get_webhook_delivery.
type GetWebhookDeliveryInput struct {
	DeliveryID string `json:"deliveryId" jsonschema:"the delivery's id"`
}

// ListDataExportsInput is the input of list_data_exports.
type ListDataExportsInput struct {
	ProjectID string `json:"projectId" jsonschema:"the project whose exports to list"`
	State     string `json:"state,omitempty" jsonschema:"only exports in this state"`
	Kind      string `json:"kind,omitempty" jsonschema:"only exports of this kind"`
	First     *int   `json:"first,omitempty" jsonschema:"page size, 1-100 (default 20)"`
	After     string `json:"after,omitempty" jsonschema:"endCursor of the previous page"`
}

// RedriveWebhookDeliveryInput is the input of redrive_webhook_delivery.
type RedriveWebhookDeliveryInput struct {
	DeliveryID string `json:"deliveryId" jsonschema:"the dead-lettered delivery to send again"`
	Confirm    bool   `json:"confirm,omitempty" jsonschema:"must be true: a redrive sends the webhook again (else CONFIRMATION_REQUIRED)"`
}

// RequestDataExportInput is the input of request_data_export: the fields
// of GraphQL's RequestDataExportInput.
type RequestDataExportInput struct {
	ProjectID      string            `json:"projectId" jsonschema:"the project to export"`
	Kind           string            `json:"kind" jsonschema:"what to export"`
	From           *time.Time        `json:"from,omitempty" jsonschema:"inclusive start of the time range (RFC 3339); with to, or else fromSequence and toSequence (AUDIT)"`
	To             *time.Time        `json:"to,omitempty" jsonschema:"exclusive end of the time range (RFC 3339)"`
	FromSequence   *Sequence         `json:"fromSequence,omitempty" jsonschema:"AUDIT only: first sequence to export (inclusive)"`
	ToSequence     *Sequence         `json:"toSequence,omitempty" jsonschema:"AUDIT only: last sequence to export (inclusive)"`
	Filter         *AuditEventFilter `json:"filter,omitempty" jsonschema:"AUDIT only: export only the events of the range that pass this filter"`
	Format         string            `json:"format" jsonschema:"NDJSON or CSV"`
	Compression    string            `json:"compression,omitempty" jsonschema:"NONE (default) or GZIP"`
	Confirm        bool              `json:"confirm,omitempty" jsonschema:"must be true: an export takes data out of the platform (else CONFIRMATION_REQUIRED)"`
	IdempotencyKey string            `json:"idempotencyKey,omitempty" jsonschema:"makes the request idempotent: a repeat returns the first call's export"`
}
