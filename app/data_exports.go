package app

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"gocloud.dev/blob"

	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/export"
	"github.com/aetheriot/aether-audit/jobargs"
)

// DataExportReads reads data exports and the rows they export: on the
// Store each read runs alone, on a Tx in its transaction (with lock, a read
// export stays locked until the commit).
type DataExportReads interface {
	GetDataExport(ctx context.Context, tenantID string, id uuid.UUID, lock bool) (domain.DataExport, error)
	CountActiveDataExports(ctx context.Context, tenantID string) (int, error)
	ListDataExports(ctx context.Context, tenantID, projectID string, f domain.DataExportFilter, before uuid.UUID, limit int) ([]domain.DataExport, error)
	DueDataExportExpiries(ctx context.Context, now, failedBefore time.Time, limit int) ([]domain.DataExport, error)
	// StreamAuditEventsByTime and StreamAuditEventsBySequence stream the
	// events of a range that pass f (nil: all of them).
	StreamAuditEventsByTime(ctx context.Context, tenantID, projectID string, from, to time.Time, f *domain.AuditEventFilter, fn func(*domain.AuditEvent) error) error
	StreamAuditEventsBySequence(ctx context.Context, tenantID, projectID string, from, to uint64, f *domain.AuditEventFilter, fn func(*domain.AuditEvent) error) error
	StreamAlarmHistory(ctx context.Context, tenantID, projectID string, from, to time.Time, fn func(*domain.AlarmRecord) error) error
	StreamTelemetryHistory(ctx context.Context, tenantID, projectID string, from, to time.Time, fn func(*domain.TelemetryPoint) error) error
}

// DataExportStore is what the export use cases need of the Store: reads,
// and the writes that stand alone in one statement.
type DataExportStore interface {
	DataExportReads
	UpdateDataExportProgress(ctx context.Context, tenantID string, id uuid.UUID, rows, bytes uint64, now time.Time) error
	AppendAlarmHistory(ctx context.Context, records []domain.AlarmRecord) (int64, error)
	AppendTelemetryHistory(ctx context.Context, points []domain.TelemetryPoint) (int64, error)
	// DeleteExpiredDataExports deletes up to limit EXPIRED exports that
	// expired before expiredBefore.
	DeleteExpiredDataExports(ctx context.Context, expiredBefore time.Time, limit int) (int64, error)
}

// DataExportTx is what the export use cases do in a transaction.
type DataExportTx interface {
	DataExportReads
	InsertDataExport(ctx context.Context, e domain.DataExport) error
	UpdateDataExport(ctx context.Context, e domain.DataExport) error
	// LockTenantDataExports serializes the tenant's export requests until
	// the commit.
	LockTenantDataExports(ctx context.Context, tenantID string) error
}

// ExportConfig configures data exports.
type ExportConfig struct {
	// Bucket is where export objects are written; required for exports.
	Bucket *blob.Bucket
	// DownloadKey signs download capabilities (at least 32 bytes); required
	// to mint and open downloads.
	DownloadKey []byte
	// MaxRange bounds an export's time range; default 31 days.
	MaxRange time.Duration
	// MaxSequenceRange bounds the events of an AUDIT export by sequence
	// range; default DefaultExportMaxSequenceRange.
	MaxSequenceRange uint64
	// MaxBytes bounds an export's stored size; default 5 GiB.
	MaxBytes uint64
	// MaxActive bounds a tenant's QUEUED and RUNNING exports; default 3.
	MaxActive int
	// TTL is how long a READY export lasts before it expires; default 7 days.
	TTL time.Duration
	// RowRetention is how long an EXPIRED export's row is kept after its
	// expiry (its object is deleted at expiry); default
	// DefaultExportRowRetention.
	RowRetention time.Duration
	// DownloadTTL is the default lifetime of a download capability; default
	// 10 minutes (at most MaxDownloadTTL).
	DownloadTTL time.Duration
}

// Export limits and defaults.
const (
	DefaultExportMaxRange = 31 * 24 * time.Hour
	// DefaultExportMaxSequenceRange bounds an export by sequence range.
	DefaultExportMaxSequenceRange = 1_000_000
	DefaultExportMaxBytes         = 5 << 30
	DefaultExportMaxActive        = 3
	DefaultExportTTL              = 7 * 24 * time.Hour
	DefaultExportRowRetention     = 90 * 24 * time.Hour
	DefaultDownloadTTL            = 10 * time.Minute
	// MaxDownloadTTL bounds a download capability's lifetime.
	MaxDownloadTTL = time.Hour
	// dataExportFailingRuns is how many runs of an export may fail before
	// the export is FAILED; the job itself is allowed more runs
	// (dataExportJobAttempts), so that runs cut short by a crash or a
	// shutdown still end in READY or FAILED, never stuck RUNNING.
	dataExportFailingRuns = 3
	dataExportJobAttempts = 10
	// exportProgressInterval is how often a running export reports progress.
	exportProgressInterval = time.Second
)

func (c ExportConfig) withDefaults() ExportConfig {
	if c.MaxRange <= 0 {
		c.MaxRange = DefaultExportMaxRange
	}
	if c.MaxSequenceRange == 0 {
		c.MaxSequenceRange = DefaultExportMaxSequenceRange
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultExportMaxBytes
	}
	if c.MaxActive <= 0 {
		c.MaxActive = DefaultExportMaxActive
	}
	if c.TTL <= 0 {
		c.TTL = DefaultExportTTL
	}
	if c.RowRetention <= 0 {
		c.RowRetention = DefaultExportRowRetention
	}
	if c.DownloadTTL <= 0 {
		c.DownloadTTL = DefaultDownloadTTL
	}
	return c
}

// ErrDataExportNotFound answers a lookup of an export that is missing or not
// visible to the caller.
var ErrDataExportNotFound = newError(CodeNotFound, "data export not found")

const operationRequestDataExport = "requestDataExport"

// RequestDataExportInput asks for one export.
type RequestDataExportInput struct {
	ProjectID string
	Kind      domain.DataExportKind
	// From and To are the time range [From, To); zero for an export by
	// sequence range.
	From, To time.Time
	// FromSequence and ToSequence (inclusive) are the sequence range of an
	// AUDIT export, instead of From and To.
	FromSequence, ToSequence *uint64
	// Filter, AUDIT only, keeps the events of the range that pass it (the
	// filter of SearchAuditEvents); nil, or a filter that sets nothing,
	// exports every event of the range.
	Filter      *AuditEventFilterInput
	Format      domain.DataExportFormat
	Compression domain.DataExportCompression
	// Confirm must be true: exports take data out of the platform.
	Confirm bool
	// IdempotencyKey, when set, makes the request idempotent.
	IdempotencyKey string
}

// RequestDataExport queues an export of a project's history in
// [From, To), or of the AUDIT events FromSequence..ToSequence (which must
// be recorded and not purged), of AUDIT events only those that pass Filter
// when given (a filtered export records no checkpoint). Exports are high-risk: without Confirm it fails with
// CONFIRMATION_REQUIRED and creates nothing. In one transaction: the export
// in state QUEUED, its audit event (export.requested, risk HIGH, the
// confirmation recorded) and its River job. A tenant has at most MaxActive
// queued or running exports (QUOTA_EXCEEDED beyond). Needs exports:write.
func (a *App) RequestDataExport(ctx context.Context, id Identity, in RequestDataExportInput) (_ domain.DataExport, err error) {
	ctx, span := a.startCommand(ctx, "RequestDataExport")
	defer func() { a.endCommand(span, err) }()
	if err := a.authorizeCommand(id, PermissionExportsWrite, in.ProjectID); err != nil {
		return domain.DataExport{}, err
	}
	cfg := a.exports
	if !in.Confirm {
		return domain.DataExport{}, &Error{Code: CodeConfirmationRequired, Field: "confirm",
			Message: "an export takes data out of the platform: repeat the request with confirm: true"}
	}
	switch {
	case !in.Kind.Valid():
		return domain.DataExport{}, badInput("kind", "must be AUDIT, ALARM or TELEMETRY")
	case !in.Format.Valid():
		return domain.DataExport{}, badInput("format", "must be NDJSON or CSV")
	case !in.Compression.Valid():
		return domain.DataExport{}, badInput("compression", "must be NONE or GZIP")
	}
	filter, err := exportFilter(in)
	if err != nil {
		return domain.DataExport{}, err
	}
	bySequence := in.FromSequence != nil || in.ToSequence != nil
	if bySequence {
		if err := a.checkSequenceRange(ctx, id, in); err != nil {
			return domain.DataExport{}, err
		}
	} else {
		switch {
		case in.From.IsZero() || in.To.IsZero():
			return domain.DataExport{}, badInput("from", "give from and to, or (for AUDIT) fromSequence and toSequence")
		case !in.To.After(in.From):
			return domain.DataExport{}, badInput("to", "must be after from")
		case in.To.Sub(in.From) > cfg.MaxRange:
			return domain.DataExport{}, badInput("to", fmt.Sprintf("the range must be at most %s; split the export", cfg.MaxRange))
		}
	}
	if err := checkIdempotencyKey(in.IdempotencyKey); err != nil {
		return domain.DataExport{}, err
	}
	if cfg.Bucket == nil {
		return domain.DataExport{}, errors.New("exports: no object storage configured")
	}
	now := a.storedNow()
	e := domain.DataExport{
		ID: uuid.Must(uuid.NewV7()), TenantID: id.TenantID, ProjectID: in.ProjectID, Kind: in.Kind,
		Format: in.Format, Compression: in.Compression, State: domain.DataExportQueued,
		RequestedBy: id.Subject, RequestedAt: now, UpdatedAt: now, Filter: filter,
	}
	if bySequence {
		from, to := *in.FromSequence, *in.ToSequence
		e.FromSequence, e.ToSequence = &from, &to
	} else {
		e.From, e.To = in.From.UTC().Truncate(time.Microsecond), in.To.UTC().Truncate(time.Microsecond)
	}
	var out domain.DataExport
	err = a.retryTx(ctx, func(ctx context.Context, tx Tx) error {
		if in.IdempotencyKey != "" {
			request := []any{in.ProjectID, in.Kind, e.From, e.To, in.Format, in.Compression, e.FromSequence, e.ToSequence}
			if filter != nil {
				// Only when given, so that the fingerprints of unfiltered
				// requests stay what they were before filters existed.
				request = append(request, filter)
			}
			b, _ := json.Marshal(request)
			fp := domain.Hash(sha256.Sum256(b))
			prev, found, err := a.claimIdempotentID(ctx, tx, id.TenantID, operationRequestDataExport, in.IdempotencyKey, fp, e.ID)
			if err != nil {
				return err
			}
			if found {
				out, err = tx.GetDataExport(ctx, id.TenantID, prev, false)
				return err
			}
		}
		if err := tx.LockTenantDataExports(ctx, id.TenantID); err != nil {
			return err
		}
		active, err := tx.CountActiveDataExports(ctx, id.TenantID)
		if err != nil {
			return err
		}
		if active >= cfg.MaxActive {
			return newError(CodeQuotaExceeded, fmt.Sprintf(
				"a tenant has at most %d queued or running exports; wait for one to finish", cfg.MaxActive))
		}
		if err := tx.InsertDataExport(ctx, e); err != nil {
			return err
		}
		fields := map[string]any{"exportId": e.ID.String(), "kind": e.Kind, "format": e.Format,
			"compression": e.Compression, "confirmed": true}
		if bySequence {
			fields["fromSequence"] = strconv.FormatUint(*e.FromSequence, 10)
			fields["toSequence"] = strconv.FormatUint(*e.ToSequence, 10)
		} else {
			fields["from"], fields["to"] = e.From, e.To
		}
		if filter != nil {
			fields["filter"] = filter
		}
		details, _ := json.Marshal(fields)
		if _, err := a.recordCommandEventWith(ctx, tx, id, e.ProjectID, "export.requested",
			domain.Resource{Type: "data_export", ID: e.ID.String()},
			domain.Governance{Risk: domain.RiskHigh, Reason: "data export requested with explicit confirmation", ConfirmedBy: commandSubject(id).ID},
			string(details), now); err != nil {
			return err
		}
		out = e
		return tx.EnqueueJobs(ctx, domain.OutboxJob{Args: jobargs.DataExportJobArgs{TenantID: e.TenantID, ExportID: e.ID},
			Queue: jobargs.QueueExports, MaxAttempts: dataExportJobAttempts})
	})
	if err != nil {
		return domain.DataExport{}, err
	}
	return out, nil
}

// exportFilter validates the filter of an export request
// (ParseAuditEventFilter, errors naming filter.*): AUDIT only; nil when none
// is given or it sets nothing. Its times are stored as PostgreSQL keeps
// them (UTC, whole microseconds).
func exportFilter(in RequestDataExportInput) (*domain.AuditEventFilter, error) {
	if in.Filter == nil {
		return nil, nil
	}
	if in.Kind != domain.DataExportAudit {
		return nil, badInput("filter", "a filter is for AUDIT exports only")
	}
	f, err := ParseAuditEventFilter(*in.Filter)
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

// checkSequenceRange checks the sequence range of an export request: an
// AUDIT export, both bounds and no time range, at most MaxSequenceRange
// events, all of them recorded and none purged by retention.
func (a *App) checkSequenceRange(ctx context.Context, id Identity, in RequestDataExportInput) error {
	switch {
	case in.Kind != domain.DataExportAudit:
		return badInput("fromSequence", "a sequence range is for AUDIT exports only")
	case !in.From.IsZero() || !in.To.IsZero():
		return badInput("fromSequence", "give either from and to, or fromSequence and toSequence, not both")
	case in.FromSequence == nil:
		return badInput("fromSequence", "is required with toSequence")
	case in.ToSequence == nil:
		return badInput("toSequence", "is required with fromSequence")
	case *in.FromSequence < 1:
		return badInput("fromSequence", "must be at least 1")
	case *in.ToSequence < *in.FromSequence:
		return badInput("toSequence", "must not be below fromSequence")
	case *in.ToSequence-*in.FromSequence >= a.exports.MaxSequenceRange:
		return badInput("toSequence", fmt.Sprintf("the range may span at most %d events; split the export", a.exports.MaxSequenceRange))
	}
	head, err := a.store.AuditHead(ctx, id.TenantID, in.ProjectID)
	if err != nil {
		return err
	}
	if *in.ToSequence > head.Sequence {
		return badInput("toSequence", fmt.Sprintf("the project's events go up to %d", head.Sequence))
	}
	purged, err := a.store.AuditPurgedPrefix(ctx, id.TenantID, in.ProjectID)
	if err != nil {
		return err
	}
	if *in.FromSequence <= purged.Through {
		return badInput("fromSequence", fmt.Sprintf("events through %d were purged by retention: export from %d", purged.Through, purged.Through+1))
	}
	return nil
}

// visibleExport reads, through r (the Store, or a Tx), an export of id's
// tenant in one of its projects; anything else is ErrDataExportNotFound.
func (a *App) visibleExport(ctx context.Context, r DataExportReads, id Identity, exportID string, lock bool) (domain.DataExport, error) {
	eid, err := parseID(exportID, ErrDataExportNotFound)
	if err != nil {
		return domain.DataExport{}, err
	}
	e, err := r.GetDataExport(ctx, id.TenantID, eid, lock)
	if errors.Is(err, domain.ErrNotFound) || err == nil && !id.CanAccessProject(e.ProjectID) {
		return domain.DataExport{}, ErrDataExportNotFound
	}
	return e, err
}

// DataExport returns one export (never its bytes). Needs exports:read.
func (a *App) DataExport(ctx context.Context, id Identity, exportID string) (domain.DataExport, error) {
	if err := authorize(id, PermissionExportsRead, tenantScope); err != nil {
		return domain.DataExport{}, err
	}
	return a.visibleExport(ctx, a.store, id, exportID, false)
}

// DataExportsInput selects a page of a project's exports.
type DataExportsInput struct {
	ProjectID string
	Filter    domain.DataExportFilter
	First     *int
	After     string
}

// DataExports returns a page of a project's exports, newest first. Needs
// exports:read.
func (a *App) DataExports(ctx context.Context, id Identity, in DataExportsInput) (Page[domain.DataExport], error) {
	if err := authorize(id, PermissionExportsRead, in.ProjectID); err != nil {
		return Page[domain.DataExport]{}, err
	}
	if in.Filter.State != "" && !in.Filter.State.Valid() {
		return Page[domain.DataExport]{}, badInput("filter.state", "is not an export state")
	}
	if in.Filter.Kind != "" && !in.Filter.Kind.Valid() {
		return Page[domain.DataExport]{}, badInput("filter.kind", "is not an export kind")
	}
	limit, before, err := idPage(in.First, in.After)
	if err != nil {
		return Page[domain.DataExport]{}, err
	}
	es, err := a.store.ListDataExports(ctx, id.TenantID, in.ProjectID, in.Filter, before, limit+1)
	if err != nil {
		return Page[domain.DataExport]{}, err
	}
	return pageOf(es, limit), nil
}

// ExpireDataExport expires a QUEUED, READY or FAILED export early: it moves
// to EXPIRED and its object is deleted (by a job committed with the
// change). Needs exports:write and confirm; audited as export.expired.
func (a *App) ExpireDataExport(ctx context.Context, id Identity, exportID string, confirm bool) (_ domain.DataExport, err error) {
	ctx, span := a.startCommand(ctx, "ExpireDataExport")
	defer func() { a.endCommand(span, err) }()
	if err := a.authorizeCommand(id, PermissionExportsWrite, tenantScope); err != nil {
		return domain.DataExport{}, err
	}
	if !confirm {
		return domain.DataExport{}, &Error{Code: CodeConfirmationRequired, Field: "confirm",
			Message: "expiring an export deletes it: repeat with confirm: true"}
	}
	var out domain.DataExport
	err = a.retryTx(ctx, func(ctx context.Context, tx Tx) error {
		e, err := a.visibleExport(ctx, tx, id, exportID, true)
		if err != nil {
			return err
		}
		out, err = a.expireLocked(ctx, tx, id, e, "expired early on request")
		return err
	})
	return out, err
}

// expireLocked expires e (locked in transaction tx), audits it and
// enqueues the deletion of its object.
func (a *App) expireLocked(ctx context.Context, tx Tx, id Identity, e domain.DataExport, why string) (domain.DataExport, error) {
	now := a.storedNow()
	if err := e.Expire(now); err != nil {
		return e, &Error{Code: CodeInvalidState, Message: err.Error() + "; this one is " + string(e.State), Err: err}
	}
	if err := tx.UpdateDataExport(ctx, e); err != nil {
		return e, err
	}
	details, _ := json.Marshal(map[string]any{"exportId": e.ID.String(), "reason": why, "objectRef": e.ObjectRef})
	if _, err := a.recordCommandEvent(ctx, tx, id, e.ProjectID, "export.expired",
		domain.Resource{Type: "data_export", ID: e.ID.String()}, domain.RiskMedium, string(details), now); err != nil {
		return e, err
	}
	if e.ObjectRef == "" {
		return e, nil
	}
	return e, tx.EnqueueJobs(ctx, domain.OutboxJob{Args: jobargs.DeleteExportObjectArgs{ObjectRef: e.ObjectRef}})
}

// expirySubject is the identity the periodic expiry acts as.
const expirySubject = "system:export-expiry"

// ExpireDueDataExports expires READY exports past their expiresAt and
// FAILED exports older than the exports' TTL, up to limit of each, each in
// its own transaction (audited as export.expired by the system). It
// returns how many it expired.
func (a *App) ExpireDueDataExports(ctx context.Context, limit int) (_ int, err error) {
	ctx, span := a.startCommand(ctx, "ExpireDueDataExports")
	defer func() { a.endCommand(span, err) }()
	now := a.storedNow()
	due, err := a.store.DueDataExportExpiries(ctx, now, now.Add(-a.exports.TTL), limit)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, d := range due {
		sys := Identity{Subject: expirySubject, TenantID: d.TenantID}
		err := a.retryTx(ctx, func(ctx context.Context, tx Tx) error {
			e, err := tx.GetDataExport(ctx, d.TenantID, d.ID, true)
			if err != nil || e.State != d.State {
				return err
			}
			_, err = a.expireLocked(ctx, tx, sys, e, "past its expiry")
			return err
		})
		if err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// DeleteExpiredDataExportRows deletes up to limit rows of exports that
// expired longer than the exports' RowRetention ago (the export.expired
// event of each stays in the audit trail) and returns how many.
func (a *App) DeleteExpiredDataExportRows(ctx context.Context, limit int) (int64, error) {
	return a.store.DeleteExpiredDataExports(ctx, a.storedNow().Add(-a.exports.RowRetention), limit)
}

// DeleteExportObject deletes an expired export's object; an object already
// gone is fine.
func (a *App) DeleteExportObject(ctx context.Context, objectRef string) error {
	if a.exports.Bucket == nil {
		return errors.New("exports: no object storage configured")
	}
	err := a.exports.Bucket.Delete(ctx, objectRef)
	if err != nil && !isBlobNotFound(err) {
		return fmt.Errorf("deleting export object: %w", err)
	}
	return nil
}

// DataExportDownload is a minted download capability.
type DataExportDownload struct {
	// Token is the capability; the download URL is /api/v1/exports/download/<Token>.
	Token     string
	ExpiresAt time.Time
}

// DownloadPath is the path of a capability's download URL.
func DownloadPath(token string) string { return "/api/v1/exports/download/" + token }

// CreateDataExportDownload mints a short-lived capability to download a
// READY export (lifetime ttl, default DownloadTTL, at most MaxDownloadTTL).
// Needs exports:download; audited as export.download_created.
func (a *App) CreateDataExportDownload(ctx context.Context, id Identity, exportID string, ttl *time.Duration) (_ DataExportDownload, err error) {
	ctx, span := a.startCommand(ctx, "CreateDataExportDownload")
	defer func() { a.endCommand(span, err) }()
	if err := a.authorizeCommand(id, PermissionExportsDownload, tenantScope); err != nil {
		return DataExportDownload{}, err
	}
	life := a.exports.DownloadTTL
	if ttl != nil {
		if *ttl <= 0 || *ttl > MaxDownloadTTL {
			return DataExportDownload{}, badInput("ttlSeconds", fmt.Sprintf("must be between 1 and %d", int(MaxDownloadTTL/time.Second)))
		}
		life = *ttl
	}
	if len(a.exports.DownloadKey) < 32 {
		return DataExportDownload{}, errors.New("exports: no download key configured")
	}
	var out DataExportDownload
	err = a.retryTx(ctx, func(ctx context.Context, tx Tx) error {
		e, err := a.visibleExport(ctx, tx, id, exportID, false)
		if err != nil {
			return err
		}
		now := a.storedNow()
		if e.State != domain.DataExportReady {
			return &Error{Code: CodeInvalidState, Message: "only a READY export can be downloaded; this one is " + string(e.State)}
		}
		if e.ExpiresAt != nil && !now.Before(*e.ExpiresAt) {
			return &Error{Code: CodeInvalidState, Message: "the export has expired"}
		}
		// Capabilities carry whole seconds: round up, so a link lasts at
		// least its lifetime (but never past the export's expiry).
		expires := ceilSecond(now.Add(life))
		if e.ExpiresAt != nil && expires.After(*e.ExpiresAt) {
			expires = e.ExpiresAt.Truncate(time.Second)
			if !now.Before(expires) {
				// In the export's last fraction of a second a whole-second link
				// would be dead on arrival: refuse, as for an expired export.
				return &Error{Code: CodeInvalidState, Message: "the export has expired"}
			}
		}
		details, _ := json.Marshal(map[string]any{"exportId": e.ID.String(), "expiresAt": expires})
		if _, err := a.recordCommandEvent(ctx, tx, id, e.ProjectID, "export.download_created",
			domain.Resource{Type: "data_export", ID: e.ID.String()}, domain.RiskMedium, string(details), now); err != nil {
			return err
		}
		out = DataExportDownload{Token: export.SignDownload(a.exports.DownloadKey, e.ID, e.TenantID, expires), ExpiresAt: expires}
		return nil
	})
	return out, err
}

// Download errors, each mapped to an HTTP status by the server.
var (
	// ErrDownloadForbidden: the capability is malformed, tampered with or
	// past its expiry (403).
	ErrDownloadForbidden = newError(CodeForbidden, "the download link is invalid or has expired; create a new one")
	// ErrDownloadGone: the export has expired (410).
	ErrDownloadGone = newError(CodeInvalidState, "the export has expired")
)

// OpenedDownload is an export being downloaded.
type OpenedDownload struct {
	Export domain.DataExport
	Object *export.ObjectReader
}

// OpenDataExportDownload checks a download capability and opens the
// export's object. The capability itself is the authorization: it names the
// tenant and the export and expires. The caller closes Object.
func (a *App) OpenDataExportDownload(ctx context.Context, token string) (OpenedDownload, error) {
	if len(a.exports.DownloadKey) < 32 || a.exports.Bucket == nil {
		return OpenedDownload{}, errors.New("exports: downloads are not configured")
	}
	exportID, tenantID, _, err := export.VerifyDownload(a.exports.DownloadKey, token, a.now())
	// A tenant id PostgreSQL cannot take as text names no export.
	if err != nil || domain.ValidateText("tenantId", tenantID, export.MaxCapabilityTenantLen, true, true) != nil {
		return OpenedDownload{}, ErrDownloadForbidden
	}
	e, err := a.store.GetDataExport(ctx, tenantID, exportID, false)
	if errors.Is(err, domain.ErrNotFound) {
		return OpenedDownload{}, ErrDownloadForbidden
	}
	if err != nil {
		return OpenedDownload{}, err
	}
	if e.State != domain.DataExportReady {
		return OpenedDownload{}, ErrDownloadGone
	}
	r, err := export.NewObjectReader(ctx, a.exports.Bucket, e.ObjectRef)
	if err != nil {
		if isBlobNotFound(err) {
			return OpenedDownload{}, ErrDownloadGone
		}
		return OpenedDownload{}, err
	}
	return OpenedDownload{Export: e, Object: r}, nil
}

// ceilSecond rounds t up to a whole second.
func ceilSecond(t time.Time) time.Time {
	if r := t.Truncate(time.Second); r.Before(t) {
		return r.Add(time.Second)
	}
	return t
}
