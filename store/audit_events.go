package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/store/dbsqlc"
)

const auditEventColumns = `tenant_id, project_id, sequence, id, action, occurred_at, recorded_at,
	subject_type, subject_id, subject_display_name, resource_type, resource_id, outcome,
	governance_risk, governance_reason, governance_ticket, governance_confirmed_by,
	trace_id, request_id, causation_id, evidence_digests, details, input_fingerprint, chain_hash,
	chain_version, recorded_by_issuer, recorded_by_subject, recorded_by_token_id, recorded_by_client_id`

var auditEventColumnNames = []string{
	"tenant_id", "project_id", "sequence", "id", "action", "occurred_at", "recorded_at",
	"subject_type", "subject_id", "subject_display_name", "resource_type", "resource_id", "outcome",
	"governance_risk", "governance_reason", "governance_ticket", "governance_confirmed_by",
	"trace_id", "request_id", "causation_id", "evidence_digests", "details", "input_fingerprint", "chain_hash",
	"chain_version", "recorded_by_issuer", "recorded_by_subject", "recorded_by_token_id", "recorded_by_client_id",
}

// copyThreshold is the batch size from which CopyFrom beats a multi-row
// INSERT for appending events.
const copyThreshold = 16

// LockAuditHead locks the chain head of tenant/project for the rest of the
// transaction (creating it for a new project) and returns it. Every append
// to the project goes through this lock, which is what makes sequences dense
// and ordered by commit.
//
// webhooks reports whether the project has an active webhook subscription,
// read under the same lock: creating or disabling a subscription appends its
// own audit event and so takes this lock too, which orders it exactly
// against every other append of the project.
func (t *Tx) LockAuditHead(ctx context.Context, tenantID, projectID string) (head domain.ChainHead, webhooks bool, err error) {
	for attempt := 0; ; attempt++ {
		row, err := t.sqlc.LockAuditHead(ctx, dbsqlc.LockAuditHeadParams{TenantID: tenantID, ProjectID: projectID})
		if err == nil {
			head := domain.ChainHead{Sequence: uint64(row.LastSequence), RecordedAt: row.LastRecordedAt.UTC()}
			copy(head.Hash[:], row.LastHash)
			return head, row.Webhooks, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) || attempt > 0 {
			return domain.ChainHead{}, false, fmt.Errorf("locking audit head: %w", err)
		}
		// A new project: create its head (a concurrent creator wins the
		// race harmlessly) and lock it.
		if err := t.sqlc.CreateAuditHead(ctx, dbsqlc.CreateAuditHeadParams{TenantID: tenantID, ProjectID: projectID}); err != nil {
			return domain.ChainHead{}, false, fmt.Errorf("creating audit head: %w", err)
		}
	}
}

// ExpectAuditHead locks the chain head of tenant/project for the rest of
// the transaction, like LockAuditHead, when the caller already knows it
// (the head its own last append committed): the transaction fails, at the
// statement or commit it is sent with, with a retryable serialization
// failure unless the head is still head and the project's active webhook
// subscriptions are still as webhooks says. It is queued rather than sent
// (see txConn), so the append that follows it, with chain hashes computed
// from head, and the COMMIT travel in one round trip with the lock.
func (t *Tx) ExpectAuditHead(_ context.Context, tenantID, projectID string, head domain.ChainHead, webhooks bool) error {
	t.tx.queue("locking the expected audit head", dbsqlc.ExpectAuditHead, tenantID, projectID, int64(head.Sequence), head.Hash[:], webhooks)
	return nil
}

// BoundAppendWaits bounds, in PostgreSQL and for the rest of the
// transaction, its waits to end at lock and its idle time while it holds
// locks to idle (idle_in_transaction_session_timeout), each at least a
// millisecond. A transaction that waits for the head held by another
// session gives up by itself at lock (lock_timeout), rolled back with
// nothing written and its connection still usable. A wait that
// lock_timeout does not end by then (a second lock wait, which
// lock_timeout times from its own start, or one while PostgreSQL prepares
// a statement of the first batch, before the setting takes effect) is
// canceled boundCancelDelay later by a cancel request; the transaction
// then rolls back with nothing written too, and its connection is
// discarded. Either error is one IsPastBound reports. A transaction of
// ours whose process stalls cannot hold the head longer than idle. Like
// ExpectAuditHead the setting is queued, sent with the transaction's
// first statement: call it once, first, before the lock.
func (t *Tx) BoundAppendWaits(lock, idle time.Duration) {
	t.tx.queue("bounding the append's lock waits", dbsqlc.BoundAppendWaits, pgMillis(lock), pgMillis(idle))
	t.tx.cancelAfter(lock + boundCancelDelay)
}

// pgMillis is d as a PostgreSQL setting value in whole milliseconds, at
// least 1 (0 would turn a timeout off).
func pgMillis(d time.Duration) string {
	return strconv.FormatInt(max(d.Milliseconds(), 1), 10) + "ms"
}

// AppendAuditEvents inserts sealed events of tenant/project (see
// domain.ChainHead.Append), moves the project's head, locked by
// LockAuditHead in the same transaction, from prev to head, and notifies
// the live hubs (pg_notify on live.Channel, delivered at commit) with the
// tenant, project and new head sequence, never the events. When the events
// are the project's first or the first of a new month, it also records
// where the project's new run of sequences starts (audit_project_segments,
// see auditSegment), in the same batch.
//
// Small appends are a multi-row INSERT, the head UPDATE and the
// notification; large ones COPY the events first. These writes have no
// result but their success, so they are queued on the transaction rather
// than sent (see txConn): they go to the server with its next statement or
// its COMMIT, in one round trip. Their error, if any, is then that
// statement's or the commit's, and the transaction rolls back.
//
// The events' INSERT is written here, not in queries/audit_events.sql: its
// number of VALUES rows varies with the batch, which sqlc cannot express,
// and it shares auditEventValues with COPY. The head update and the
// notification are sqlc's.
func (t *Tx) AppendAuditEvents(ctx context.Context, tenantID, projectID string, events []domain.AuditEvent, prev, head domain.ChainHead) error {
	note, err := json.Marshal(AuditEventsNotification{TenantID: tenantID, ProjectID: projectID, Sequence: head.Sequence})
	if err != nil {
		return fmt.Errorf("encoding notification: %w", err)
	}
	rows := make([][]any, len(events))
	for i := range events {
		rows[i] = auditEventValues(&events[i])
	}
	if len(events) >= copyThreshold {
		if _, err := t.tx.CopyFrom(ctx, pgx.Identifier{"audit_events"}, auditEventColumnNames, pgx.CopyFromRows(rows)); err != nil {
			return fmt.Errorf("copying audit events: %w", err)
		}
	} else {
		var sb strings.Builder
		sb.WriteString("INSERT INTO audit_events (" + auditEventColumns + ") VALUES ")
		args := make([]any, 0, len(events)*len(auditEventColumnNames))
		for i, row := range rows {
			if i > 0 {
				sb.WriteString(", ")
			}
			sb.WriteByte('(')
			for j := range row {
				if j > 0 {
					sb.WriteString(", ")
				}
				sb.WriteByte('$')
				sb.WriteString(strconv.Itoa(len(args) + j + 1))
			}
			sb.WriteByte(')')
			args = append(args, row...)
		}
		t.tx.queue("inserting audit events", sb.String(), args...)
	}
	// A head that knows no time (its events were appended before
	// migration 00022) starts no run: its events so far, whenever they
	// were recorded, stay in the project's first run, which ends where the
	// first month the head moves into with a known time begins.
	if len(events) > 0 {
		if month := monthStart(events[0].RecordedAt); prev.Sequence == 0 ||
			!prev.RecordedAt.IsZero() && !month.Equal(monthStart(prev.RecordedAt)) {
			t.tx.queue("recording the audit segment", dbsqlc.InsertAuditProjectSegment, tenantID, projectID, int64(events[0].Sequence), month)
		}
	}
	t.tx.queue("updating audit head", dbsqlc.UpdateAuditHead, tenantID, projectID, int64(head.Sequence), head.Hash[:], head.RecordedAt)
	t.tx.queue("notifying audit events", dbsqlc.NotifyAuditEvents, AuditEventsChannel, string(note))
	return nil
}

// AuditHead returns the committed head of tenant/project without locking it;
// the zero head for a project with no events.
func (q *queries) AuditHead(ctx context.Context, tenantID, projectID string) (domain.ChainHead, error) {
	row, err := q.sqlc.GetAuditHead(ctx, dbsqlc.GetAuditHeadParams{TenantID: tenantID, ProjectID: projectID})
	if errors.Is(err, pgx.ErrNoRows) {
		return domain.ChainHead{}, nil
	}
	if err != nil {
		return domain.ChainHead{}, fmt.Errorf("reading audit head: %w", err)
	}
	head := domain.ChainHead{Sequence: uint64(row.LastSequence), RecordedAt: row.LastRecordedAt.UTC()}
	copy(head.Hash[:], row.LastHash)
	return head, nil
}

// AuditEventColumns returns the audit_events columns in the order of
// AuditEventRow: for tools and benchmarks that write rows the store's way.
func AuditEventColumns() []string { return slices.Clone(auditEventColumnNames) }

// AuditEventRow returns e's values for AuditEventColumns, as the store
// writes them.
func AuditEventRow(e *domain.AuditEvent) []any { return auditEventValues(e) }

func auditEventValues(e *domain.AuditEvent) []any {
	var (
		risk                          *string
		reason, ticket, confirmedBy   string
		traceID, requestID, causation string
	)
	if g := e.Governance; g != nil {
		r := string(g.Risk)
		risk, reason, ticket, confirmedBy = &r, g.Reason, g.Ticket, g.ConfirmedBy
	}
	if c := e.Correlation; c != nil {
		traceID, requestID, causation = c.TraceID, c.RequestID, c.CausationID
	}
	var recorder domain.Recorder
	if e.RecordedBy != nil {
		recorder = *e.RecordedBy
	}
	version := int16(e.ChainVersion)
	if version < domain.ChainVersionOriginal {
		version = domain.ChainVersionOriginal
	}
	digests := []byte("[]")
	if len(e.EvidenceDigests) > 0 {
		// Plain strings in a fixed struct: encoding cannot fail.
		digests, _ = json.Marshal(e.EvidenceDigests)
	}
	return []any{
		e.TenantID, e.ProjectID, int64(e.Sequence), e.ID, e.Action, e.OccurredAt, e.RecordedAt,
		string(e.Subject.Type), e.Subject.ID, e.Subject.DisplayName, e.Resource.Type, e.Resource.ID, string(e.Outcome),
		risk, reason, ticket, confirmedBy, traceID, requestID, causation,
		digests, string(e.Details), e.InputFingerprint[:], e.ChainHash[:],
		version, recorder.Issuer, recorder.Subject, recorder.TokenID, recorder.ClientID,
	}
}

// FindAuditEventsByID returns the tenant's stored events among ids, keyed by
// id, in any project. Missing ids are simply absent.
func (q *queries) FindAuditEventsByID(ctx context.Context, tenantID string, ids []uuid.UUID) (map[uuid.UUID]domain.AuditEvent, error) {
	rows, err := q.sqlc.FindAuditEventsByID(ctx, dbsqlc.FindAuditEventsByIDParams{TenantID: tenantID, Ids: ids})
	if err != nil {
		return nil, fmt.Errorf("finding audit events: %w", err)
	}
	out := make(map[uuid.UUID]domain.AuditEvent, len(rows))
	for i := range rows {
		e, err := auditEventFromRow(&rows[i])
		if err != nil {
			return nil, fmt.Errorf("finding audit events: %w", err)
		}
		out[e.ID] = e
	}
	return out, nil
}

// FindAuditEventsByID, in a transaction, first takes a transaction-level
// advisory lock on each of the tenant's ids (in id order), then looks them
// up as queries.FindAuditEventsByID does. An event id is unique per tenant,
// but each partition of audit_events has its own unique index: two
// transactions recording one new id in two months (at a month's turn)
// would not meet on one. The lock makes the second wait until the first
// commits; its lookup, a later statement with a later snapshot, then finds
// the first's event. Both statements travel in one round trip.
func (t *Tx) FindAuditEventsByID(ctx context.Context, tenantID string, ids []uuid.UUID) (map[uuid.UUID]domain.AuditEvent, error) {
	if len(ids) > 0 {
		t.tx.queue("locking audit event ids", dbsqlc.LockAuditEventIDs, tenantID, ids)
	}
	return t.queries.FindAuditEventsByID(ctx, tenantID, ids)
}

// GetAuditEvent returns one event of tenant/project by id, or ErrNotFound.
func (q *queries) GetAuditEvent(ctx context.Context, tenantID, projectID string, id uuid.UUID) (domain.AuditEvent, error) {
	row, err := q.sqlc.GetAuditEvent(ctx, dbsqlc.GetAuditEventParams{TenantID: tenantID, ProjectID: projectID, ID: id})
	return gotAuditEvent(&row, err)
}

// GetAuditEventBySequence returns the event of tenant/project at seq, or
// ErrNotFound. It is read as the range [seq, seq] of ScanAuditEvents, so
// that it takes the range's plan (the primary key, in sequence order): an
// equality on sequence makes the order moot, and at a one-row estimate of
// an unknown project any index that starts with (tenant_id, project_id)
// then costs the same, one that reads the whole project included.
func (q *queries) GetAuditEventBySequence(ctx context.Context, tenantID, projectID string, seq uint64) (domain.AuditEvent, error) {
	var (
		e     domain.AuditEvent
		found bool
	)
	err := q.ScanAuditEvents(ctx, tenantID, projectID, seq, seq, func(got *domain.AuditEvent) error {
		e, found = *got, true
		return nil
	})
	if err != nil {
		return domain.AuditEvent{}, fmt.Errorf("getting audit event: %w", err)
	}
	if !found {
		return domain.AuditEvent{}, ErrNotFound
	}
	return e, nil
}

// gotAuditEvent is the event of a read of one event: ErrNotFound without
// a row.
func gotAuditEvent(row *dbsqlc.AuditEvent, err error) (domain.AuditEvent, error) {
	if errors.Is(err, pgx.ErrNoRows) {
		return domain.AuditEvent{}, ErrNotFound
	}
	if err != nil {
		return domain.AuditEvent{}, fmt.Errorf("getting audit event: %w", err)
	}
	e, err := auditEventFromRow(row)
	if err != nil {
		return domain.AuditEvent{}, fmt.Errorf("getting audit event: %w", err)
	}
	return e, nil
}

// SearchAuditEvents returns one keyset page of tenant/project's events that
// pass the filter, in page.Order. Every condition is keyed by tenant and
// project first so the indexes serve it.
func (q *queries) SearchAuditEvents(ctx context.Context, tenantID, projectID string, f domain.AuditEventFilter, page domain.AuditEventPage) ([]domain.AuditEvent, error) {
	var events []domain.AuditEvent
	err := q.visitPage(ctx, tenantID, projectID, f, page, func(sql string, args []any) (int, error) {
		rows, err := q.db.Query(ctx, sql, args...)
		if err != nil {
			return 0, err
		}
		got, err := pgx.CollectRows(rows, scanAuditEvent)
		events = append(events, got...)
		return len(got), err
	})
	if err != nil {
		return nil, fmt.Errorf("searching audit events: %w", err)
	}
	return events, nil
}

// VisitAuditEvents runs the query of SearchAuditEvents and calls fn for
// each event as its row arrives, decoded into one reused event that borrows
// the row's buffer (see rawEventDecoder): valid only during the call.
func (q *queries) VisitAuditEvents(ctx context.Context, tenantID, projectID string, f domain.AuditEventFilter, page domain.AuditEventPage, fn func(*domain.AuditEvent) error) error {
	return q.visitPage(ctx, tenantID, projectID, f, page, func(sql string, args []any) (int, error) {
		n := 0
		err := q.streamAuditEvents(ctx, func(e *domain.AuditEvent) error { n++; return fn(e) }, sql, args...)
		return n, err
	})
}

// visitPage runs the page's query one run of the project's sequences at a
// time (auditSegment), from the page's cursor in its order, each within the
// run's recorded_at bounds so that it reads one partition, until the page is
// full or the runs end. run executes one statement and returns how many
// events it read.
func (q *queries) visitPage(ctx context.Context, tenantID, projectID string, f domain.AuditEventFilter, page domain.AuditEventPage, run func(sql string, args []any) (int, error)) error {
	segs, err := q.auditSegments(ctx, tenantID, projectID)
	if err != nil {
		return err
	}
	from, to, desc := uint64(1), uint64(1<<63-1), page.Order == domain.NewestFirst
	if page.After != nil {
		if desc {
			if *page.After <= 1 {
				return nil
			}
			to = *page.After - 1
		} else {
			from = *page.After + 1
		}
	}
	left := page.Limit
	return segmentsIn(segs, from, to, desc, func(s auditSegment) (bool, error) {
		sql, args := searchSQL(tenantID, projectID, f, page, s, left)
		n, err := run(sql, args)
		left -= n
		return err == nil && left > 0, err
	})
}

// searchSQL is the statement of one run of a page: the filter, the page's
// cursor, and the run's recorded_at bounds, limited to limit events.
func searchSQL(tenantID, projectID string, f domain.AuditEventFilter, page domain.AuditEventPage, s auditSegment, limit int) (string, []any) {
	q := newFiltered(`SELECT `+auditEventColumns+` FROM audit_events WHERE tenant_id = $1 AND project_id = $2`, tenantID, projectID)
	andAuditEventFilter(q, f)
	order := "sequence ASC"
	if page.Order == domain.NewestFirst {
		order = "sequence DESC"
		if page.After != nil {
			q.and("sequence < $?", clampInt64(*page.After))
		}
	} else if page.After != nil {
		q.and("sequence > $?", clampInt64(*page.After))
	}
	andSegment(q, s)
	return q.page(order, limit)
}

// andSegment adds the recorded_at bounds of the run s.
func andSegment(q *filtered, s auditSegment) {
	q.and("recorded_at >= $?", s.from)
	q.and("recorded_at < $?", s.to)
}

// clampInt64 maps a uint64 bound onto the bigint column's range.
func clampInt64(v uint64) int64 {
	if v > 1<<63-1 {
		return 1<<63 - 1
	}
	return int64(v)
}

// ScanAuditEvents calls fn for each event of tenant/project with sequence in
// [from, to], in sequence order, streaming rows rather than loading them all.
func (q *queries) ScanAuditEvents(ctx context.Context, tenantID, projectID string, from, to uint64, fn func(*domain.AuditEvent) error) error {
	segs, err := q.auditSegments(ctx, tenantID, projectID)
	if err != nil {
		return fmt.Errorf("scanning audit events: %w", err)
	}
	return segmentsIn(segs, from, to, false, func(s auditSegment) (bool, error) {
		rows, err := q.db.Query(ctx, dbsqlc.ScanAuditEvents, tenantID, projectID, clampInt64(s.first), clampInt64(s.last), s.from, s.to)
		if err != nil {
			return false, fmt.Errorf("scanning audit events: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			e, err := scanAuditEvent(rows)
			if err != nil {
				return false, fmt.Errorf("scanning audit events: %w", err)
			}
			if err := fn(&e); err != nil {
				return false, err
			}
		}
		if err := rows.Err(); err != nil {
			return false, fmt.Errorf("scanning audit events: %w", err)
		}
		return true, nil
	})
}

// scanAuditEvent scans a row of whole events (auditEventColumns) from a
// query run without sqlc's functions: the filtered search and the streams.
func scanAuditEvent(row pgx.CollectableRow) (domain.AuditEvent, error) {
	var r dbsqlc.AuditEvent
	err := row.Scan(&r.TenantID, &r.ProjectID, &r.Sequence, &r.ID, &r.Action, &r.OccurredAt, &r.RecordedAt,
		&r.SubjectType, &r.SubjectID, &r.SubjectDisplayName, &r.ResourceType, &r.ResourceID, &r.Outcome,
		&r.GovernanceRisk, &r.GovernanceReason, &r.GovernanceTicket, &r.GovernanceConfirmedBy,
		&r.TraceID, &r.RequestID, &r.CausationID, &r.EvidenceDigests, &r.Details, &r.InputFingerprint, &r.ChainHash,
		&r.ChainVersion, &r.RecordedByIssuer, &r.RecordedBySubject, &r.RecordedByTokenID, &r.RecordedByClientID)
	if err != nil {
		return domain.AuditEvent{}, err
	}
	return auditEventFromRow(&r)
}

// auditEventFromRow is the domain event of a stored row.
func auditEventFromRow(r *dbsqlc.AuditEvent) (domain.AuditEvent, error) {
	return auditEventFromRowIn(r, nil)
}

// noDigests is the evidence of an event without digests (shared: never
// appended to, of no capacity).
var noDigests = []domain.EvidenceDigest{}

// auditEventFromRowIn is auditEventFromRow with the event's governance,
// correlation and recorder taken from parts (nil: allocated each).
func auditEventFromRowIn(r *dbsqlc.AuditEvent, parts *eventParts) (domain.AuditEvent, error) {
	e := domain.AuditEvent{
		TenantID: r.TenantID, ProjectID: r.ProjectID, Sequence: uint64(r.Sequence), ID: r.ID, Action: r.Action,
		OccurredAt: r.OccurredAt.UTC(), RecordedAt: r.RecordedAt.UTC(),
		Subject:  domain.Subject{Type: domain.SubjectType(r.SubjectType), ID: r.SubjectID, DisplayName: r.SubjectDisplayName},
		Resource: domain.Resource{Type: r.ResourceType, ID: r.ResourceID},
		Outcome:  domain.Outcome(r.Outcome),
		Details:  json.RawMessage(r.Details),
	}
	if r.GovernanceRisk != nil {
		e.Governance = take(parts.governance())
		*e.Governance = domain.Governance{Reason: r.GovernanceReason, Ticket: r.GovernanceTicket,
			Risk: domain.Risk(*r.GovernanceRisk), ConfirmedBy: r.GovernanceConfirmedBy}
	}
	if r.TraceID != "" || r.RequestID != "" || r.CausationID != "" {
		e.Correlation = take(parts.correlations())
		*e.Correlation = domain.Correlation{TraceID: r.TraceID, RequestID: r.RequestID, CausationID: r.CausationID}
	}
	// Most events have none ("[]"): decoding into a variable of its own
	// keeps e off the heap (&e.EvidenceDigests given to Unmarshal moved
	// the whole event there, one allocation per row).
	e.EvidenceDigests = noDigests
	if len(r.EvidenceDigests) > 2 {
		var digests []domain.EvidenceDigest
		if err := json.Unmarshal(r.EvidenceDigests, &digests); err != nil {
			return e, fmt.Errorf("decoding evidence digests: %w", err)
		}
		e.EvidenceDigests = digests
	}
	copy(e.InputFingerprint[:], r.InputFingerprint)
	copy(e.ChainHash[:], r.ChainHash)
	e.ChainVersion = int(r.ChainVersion)
	if e.ChainVersion >= domain.ChainVersionRecordedBy {
		e.RecordedBy = take(parts.recorders())
		*e.RecordedBy = domain.Recorder{Issuer: r.RecordedByIssuer, Subject: r.RecordedBySubject,
			TokenID: r.RecordedByTokenID, ClientID: r.RecordedByClientID}
	}
	return e, nil
}

// AuditEventsChannel is the PostgreSQL notification channel on which
// AppendAuditEvents announces appended events, for the live hubs.
const AuditEventsChannel = "aether_audit_events"

// AuditEventsNotification is the payload sent on AuditEventsChannel: which
// project grew and its newest sequence. It never carries the events.
type AuditEventsNotification struct {
	TenantID  string `json:"t"`
	ProjectID string `json:"p"`
	Sequence  uint64 `json:"s"`
}
