package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/webhook"
)

// AuditStreamSinkInput names a stream's sink and its credential.
type AuditStreamSinkInput struct {
	Type domain.AuditStreamSinkType
	URL  string
	// Token is the Splunk HEC token (SPLUNK_HEC only).
	Token *string
	// APIKey is the Datadog API key (DATADOG_LOGS only).
	APIKey *string
}

// CreateAuditStreamInput starts a stream.
type CreateAuditStreamInput struct {
	// ProjectIDs lists the projects; or AllProjects.
	ProjectIDs   []string
	AllProjects  bool
	Filter       *AuditEventFilterInput
	Sink         AuditStreamSinkInput
	FromSequence *uint64
}

// CreatedAuditStream is a new stream with, for HTTPS, its signing secret in
// plaintext, shown only here.
type CreatedAuditStream struct {
	Stream        AuditStreamView
	SigningSecret *string
}

// s3URLParams are the query parameters an S3 sink URL may carry: gocloud's
// addressing and transport options, and prefix (the key prefix). The
// credential options that would pick among the service's own credentials
// (profile, role) are refused: a tenant must not choose them.
var s3URLParams = []string{"endpoint", "region", "use_path_style", "s3ForcePathStyle", "disable_https", "prefix",
	"hostname_immutable", "dualstack", "fips", "anonymous", "request_checksum_calculation", "response_checksum_validation"}

// CreateAuditStream starts streaming the tenant's events of the given
// projects (or every project) to a sink. Needs streams:write and access
// to every project named (AllProjects: a token for every project). Audited
// as audit.stream.created in every project the stream covers.
func (a *App) CreateAuditStream(ctx context.Context, id Identity, in CreateAuditStreamInput) (_ CreatedAuditStream, err error) {
	ctx, span := a.startCommand(ctx, "CreateAuditStream")
	defer func() { a.endCommand(span, err) }()
	if err := a.authorizeCommand(id, PermissionStreamsWrite, tenantScope); err != nil {
		return CreatedAuditStream{}, err
	}
	projects, err := streamProjects(id, in.ProjectIDs, in.AllProjects)
	if err != nil {
		return CreatedAuditStream{}, err
	}
	if !in.Sink.Type.Valid() {
		return CreatedAuditStream{}, badInput("sink.type", "must be S3, HTTPS, SPLUNK_HEC or DATADOG_LOGS")
	}
	sinkURL, err := a.checkSinkURL(ctx, in.Sink.Type, in.Sink.URL)
	if err != nil {
		return CreatedAuditStream{}, err
	}
	filter, err := streamFilter(in.Filter)
	if err != nil {
		return CreatedAuditStream{}, err
	}
	if in.FromSequence != nil && *in.FromSequence == 0 {
		return CreatedAuditStream{}, badInput("fromSequence", "sequences start at 1")
	}
	now := a.storedNow()
	s := domain.AuditStream{
		ID: uuid.Must(uuid.NewV7()), TenantID: id.TenantID, ProjectIDs: projects, AllProjects: in.AllProjects,
		Filter: filter, SinkType: in.Sink.Type, SinkURL: sinkURL, FromSequence: in.FromSequence,
		CreatedAt: now, CreatedBy: id.Subject, UpdatedAt: now,
	}
	secret, err := sinkCredential(in.Sink.Type, in.Sink.Token, in.Sink.APIKey, true)
	if err != nil {
		return CreatedAuditStream{}, err
	}
	var shown *string
	if in.Sink.Type == domain.AuditStreamHTTPS {
		plain, _, err := webhook.NewSecret()
		if err != nil {
			return CreatedAuditStream{}, err
		}
		secret, shown = plain, &plain
	}
	if secret != "" {
		if s.SealedSecret, err = a.sealStreamSecret(s.ID, secret); err != nil {
			return CreatedAuditStream{}, err
		}
	}
	err = a.retryTx(ctx, func(ctx context.Context, tx Tx) error {
		existing, err := tx.ListAuditStreams(ctx, id.TenantID, uuid.Nil, MaxAuditStreamsPerTenant)
		if err != nil {
			return err
		}
		if len(existing) >= MaxAuditStreamsPerTenant {
			return newError(CodeQuotaExceeded, fmt.Sprintf("a tenant has at most %d audit streams", MaxAuditStreamsPerTenant))
		}
		if err := tx.InsertAuditStream(ctx, s); err != nil {
			return err
		}
		return a.recordStreamCommand(ctx, tx, id, s, "audit.stream.created", domain.RiskHigh, map[string]any{
			"sinkType": s.SinkType, "host": sinkHost(s.SinkType, s.SinkURL), "allProjects": s.AllProjects,
			"fromSequence": s.FromSequence, "filtered": s.Filter != nil,
		}, now)
	})
	if err != nil {
		return CreatedAuditStream{}, err
	}
	v, err := a.view(ctx, s)
	if err != nil {
		return CreatedAuditStream{}, err
	}
	return CreatedAuditStream{Stream: v, SigningSecret: shown}, nil
}

// streamProjects checks the projects of a new stream: listed (each one
// the token may access, at most MaxAuditStreamProjects, sorted without
// repeats) or all (which needs a token for every project).
func streamProjects(id Identity, listed []string, all bool) ([]string, error) {
	if all {
		if listed != nil {
			return nil, badInput("projectIds", "give projectIds or allProjects: true, not both")
		}
		if !containsAll(id.ProjectIDs) {
			return nil, newError(CodeForbidden, "a stream of every project needs a token for every project")
		}
		return nil, nil
	}
	if len(listed) == 0 {
		return nil, badInput("projectIds", "name at least one project, or set allProjects: true")
	}
	if len(listed) > MaxAuditStreamProjects {
		return nil, badInput("projectIds", fmt.Sprintf("at most %d projects; use allProjects", MaxAuditStreamProjects))
	}
	for _, p := range listed {
		if err := authorize(id, PermissionStreamsWrite, p); err != nil {
			return nil, err
		}
	}
	out := slices.Clone(listed)
	slices.Sort(out)
	return slices.Compact(out), nil
}

// streamFilter reads a stream's filter: nil for none (or one that sets
// nothing).
func streamFilter(in *AuditEventFilterInput) (*domain.AuditEventFilter, error) {
	if in == nil {
		return nil, nil
	}
	f, err := ParseAuditEventFilter(*in)
	if err != nil {
		return nil, err
	}
	if f.IsZero() {
		return nil, nil
	}
	for _, t := range []**time.Time{&f.OccurredFrom, &f.OccurredTo} {
		if *t != nil {
			v := (*t).UTC().Truncate(time.Microsecond)
			*t = &v
		}
	}
	return &f, nil
}

// checkSinkURL validates a sink's URL and returns its normalized form:
// for the HTTP sinks the webhook URL rules (https, a global address, the
// development relaxations of webhooks apply); for S3 an s3:// bucket URL
// with known parameters only, whose endpoint passes the same rules, and
// that gocloud can open.
func (a *App) checkSinkURL(ctx context.Context, t domain.AuditStreamSinkType, raw string) (string, error) {
	if t != domain.AuditStreamS3 {
		u, err := webhook.ValidateURL(raw, a.webhooks.URLPolicy)
		var uerr *webhook.URLError
		if errors.As(err, &uerr) {
			return "", badInput("sink.url", uerr.Error())
		}
		return u, err
	}
	if a.streams.OpenBucket == nil {
		return "", newError(CodeInvalidState, "S3 streams are off: the service has no bucket opener")
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "s3" || u.Host == "" || u.User != nil || u.Fragment != "" || (u.Path != "" && u.Path != "/") {
		return "", badInput("sink.url", "must be an S3 bucket URL: s3://bucket?endpoint=…&region=…&prefix=…")
	}
	q := u.Query()
	for name := range q {
		if !slices.Contains(s3URLParams, name) {
			return "", badInput("sink.url", "unknown or refused parameter "+name)
		}
	}
	if ep := q.Get("endpoint"); ep != "" {
		if _, err := webhook.ValidateURL(ep, a.webhooks.URLPolicy); err != nil {
			return "", badInput("sink.url", "endpoint: "+err.Error())
		}
	}
	if q.Get("disable_https") == "true" && !a.webhooks.URLPolicy.AllowHTTP {
		return "", badInput("sink.url", "disable_https is for development only")
	}
	b, err := a.streams.OpenBucket(ctx, raw)
	if err != nil {
		return "", badInput("sink.url", "cannot open the bucket: "+err.Error())
	}
	_ = b.Close()
	return raw, nil
}

// sinkCredential checks the credential inputs of a sink type: a Splunk
// token for SPLUNK_HEC, a Datadog API key for DATADOG_LOGS, neither for the
// others. With required, the type's credential must be given; it returns
// the one given ("" for none).
func sinkCredential(t domain.AuditStreamSinkType, token, apiKey *string, required bool) (string, error) {
	check := func(field string, v *string, want bool) (string, error) {
		switch {
		case v == nil && want && required:
			return "", badInput(field, "is required for a "+string(t)+" sink")
		case v == nil:
			return "", nil
		case !want:
			return "", badInput(field, "is not used by a "+string(t)+" sink")
		}
		if err := domain.ValidateText(field, *v, maxStreamCredentialLength, true, true); err != nil {
			return "", err
		}
		return *v, nil
	}
	tok, err := check("sink.token", token, t == domain.AuditStreamSplunkHEC)
	if err != nil {
		return "", err
	}
	key, err := check("sink.apiKey", apiKey, t == domain.AuditStreamDatadogLogs)
	if err != nil {
		return "", err
	}
	return tok + key, nil
}

// sealStreamSecret seals a stream's credential under the master key.
func (a *App) sealStreamSecret(streamID uuid.UUID, secret string) ([]byte, error) {
	if a.webhooks.Box == nil {
		return nil, errors.New("audit streams: no master key configured")
	}
	return a.webhooks.Box.Seal([]byte(secret), streamSecretAAD(streamID))
}

// streamSecretAAD binds a sealed stream credential to its stream.
func streamSecretAAD(streamID uuid.UUID) []byte {
	return []byte("audit-stream-secret:" + streamID.String())
}

// sinkHost is the host of a sink for audit details: the URL's host, or the
// bucket of an S3 URL; never its parameters.
func sinkHost(t domain.AuditStreamSinkType, raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Host
}

// recordStreamCommand appends a stream command's audit event to every
// project the stream covers: its listed projects, or for AllProjects every
// project of the tenant that has events (none: INVALID_STATE).
func (a *App) recordStreamCommand(ctx context.Context, tx Tx, id Identity, s domain.AuditStream, action string, risk domain.Risk, details map[string]any, now time.Time) error {
	projects := s.ProjectIDs
	if s.AllProjects {
		var err error
		if projects, err = tx.TenantProjects(ctx, id.TenantID); err != nil {
			return err
		}
		if len(projects) == 0 {
			return newError(CodeInvalidState, "the tenant has no audit history to record the stream command in: record events first")
		}
	}
	details["streamId"] = s.ID.String()
	body, err := json.Marshal(details)
	if err != nil {
		return err
	}
	for _, p := range projects {
		if _, err := a.recordCommandEvent(ctx, tx, id, p, action, domain.Resource{Type: "audit_stream", ID: s.ID.String()}, risk, string(body), now); err != nil {
			return err
		}
	}
	return nil
}
