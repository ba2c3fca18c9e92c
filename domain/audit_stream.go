package domain

import (
	"time"

	"github.com/google/uuid"
)

// AuditStreamSinkType says where a stream delivers.
type AuditStreamSinkType string

// The sink types.
const (
	// AuditStreamS3 writes gzipped NDJSON objects to an S3-compatible
	// bucket.
	AuditStreamS3 AuditStreamSinkType = "S3"
	// AuditStreamHTTPS POSTs signed NDJSON batches to a receiver.
	AuditStreamHTTPS AuditStreamSinkType = "HTTPS"
	// AuditStreamSplunkHEC POSTs batches to a Splunk HTTP Event Collector.
	AuditStreamSplunkHEC AuditStreamSinkType = "SPLUNK_HEC"
	// AuditStreamDatadogLogs POSTs batches to Datadog's logs intake.
	AuditStreamDatadogLogs AuditStreamSinkType = "DATADOG_LOGS"
)

// Valid reports whether t is a defined sink type.
func (t AuditStreamSinkType) Valid() bool {
	switch t {
	case AuditStreamS3, AuditStreamHTTPS, AuditStreamSplunkHEC, AuditStreamDatadogLogs:
		return true
	}
	return false
}

// HasSecret reports whether the sink type carries a credential of its own:
// the HTTPS signing secret (generated), the Splunk token or the Datadog API
// key (given). S3 sinks use the service's AWS credentials chain.
func (t AuditStreamSinkType) HasSecret() bool { return t != AuditStreamS3 && t.Valid() }

// AuditStreamState is the reported state of a stream, or of one of its
// projects.
type AuditStreamState string

// The reported states.
const (
	// AuditStreamRunning: delivering and within AuditStreamCaughtUpLag of
	// the head.
	AuditStreamRunning AuditStreamState = "RUNNING"
	// AuditStreamPaused: paused by a command; cursors hold.
	AuditStreamPaused AuditStreamState = "PAUSED"
	// AuditStreamFailing: the latest delivery attempt failed.
	AuditStreamFailing AuditStreamState = "FAILING"
	// AuditStreamCatchingUp: delivering, further behind the head than
	// AuditStreamCaughtUpLag.
	AuditStreamCatchingUp AuditStreamState = "CATCHING_UP"
)

// AuditStreamCaughtUpLag is the most events a running stream's project may
// lag behind its head and still count as RUNNING rather than CATCHING_UP.
const AuditStreamCaughtUpLag = 1000

// AuditStream is a tenant's continuous delivery of its audit events to one
// sink.
type AuditStream struct {
	ID       uuid.UUID
	TenantID string
	// ProjectIDs lists the projects streamed; nil when AllProjects.
	ProjectIDs  []string
	AllProjects bool
	// Filter keeps only the events it matches; nil streams every event.
	Filter   *AuditEventFilter
	SinkType AuditStreamSinkType
	// SinkURL is the endpoint, or for S3 the gocloud bucket URL.
	SinkURL string
	// FromSequence is the first sequence each project's cursor starts at;
	// nil for the first retained event.
	FromSequence *uint64
	Paused       bool
	// SealedSecret is the sink's credential sealed under the master key
	// (the HTTPS signing secret, the Splunk token, the Datadog API key);
	// nil for S3. Never shown.
	SealedSecret []byte
	CreatedAt    time.Time
	CreatedBy    string
	UpdatedAt    time.Time
}

// Covers reports whether the stream delivers projectID's events.
func (s *AuditStream) Covers(projectID string) bool {
	if s.AllProjects {
		return true
	}
	for _, p := range s.ProjectIDs {
		if p == projectID {
			return true
		}
	}
	return false
}

// StartCursor is the cursor a project's delivery starts from: the sequence
// before FromSequence, or 0.
func (s *AuditStream) StartCursor() uint64 {
	if s.FromSequence == nil || *s.FromSequence == 0 {
		return 0
	}
	return *s.FromSequence - 1
}

// AuditStreamCursor is a stream's position in one project: the last
// sequence its sink acknowledged, with the outcome of the latest delivery.
type AuditStreamCursor struct {
	StreamID  uuid.UUID
	TenantID  string
	ProjectID string
	// Acked is the last sequence the sink acknowledged (0 before any).
	Acked          uint64
	LastDeliveryAt *time.Time
	// LastError describes the latest failed delivery; "" once a later one
	// succeeded.
	LastError   string
	LastErrorAt *time.Time
	// Failures counts the failed attempts since the last success.
	Failures int
	// RetryAt is when the next attempt is due after a failure.
	RetryAt *time.Time
}

// AuditStreamHealth is a stream's position in one project against the
// project's head.
type AuditStreamHealth struct {
	AuditStreamCursor
	// Head is the project's newest sequence.
	Head uint64
	// OldestPendingAt is when the oldest event not yet acknowledged was
	// recorded; nil when caught up.
	OldestPendingAt *time.Time
}

// LagEvents is how many events the sink has not acknowledged yet.
func (h AuditStreamHealth) LagEvents() uint64 {
	if h.Head <= h.Acked {
		return 0
	}
	return h.Head - h.Acked
}

// LagSeconds is how long ago the oldest event not yet acknowledged was
// recorded, at now; 0 when caught up.
func (h AuditStreamHealth) LagSeconds(now time.Time) float64 {
	if h.OldestPendingAt == nil || h.LagEvents() == 0 {
		return 0
	}
	return max(0, now.Sub(*h.OldestPendingAt).Seconds())
}

// State is the project's reported state in a stream paused or not.
func (h AuditStreamHealth) State(paused bool) AuditStreamState {
	switch {
	case paused:
		return AuditStreamPaused
	case h.LastError != "":
		return AuditStreamFailing
	case h.LagEvents() > AuditStreamCaughtUpLag:
		return AuditStreamCatchingUp
	}
	return AuditStreamRunning
}

// AuditStreamStateOf is a stream's reported state from its projects': the
// worst of them (FAILING, then CATCHING_UP), PAUSED when paused.
func AuditStreamStateOf(paused bool, projects []AuditStreamHealth) AuditStreamState {
	if paused {
		return AuditStreamPaused
	}
	state := AuditStreamRunning
	for _, p := range projects {
		switch p.State(false) {
		case AuditStreamFailing:
			return AuditStreamFailing
		case AuditStreamCatchingUp:
			state = AuditStreamCatchingUp
		}
	}
	return state
}
