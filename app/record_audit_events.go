package app

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/aetheriot/aether-audit/domain"
)

// MaxRecordBatch is the most events one RecordAuditEvents call appends.
const MaxRecordBatch = 1000

const operationRecordAuditEvents = "recordAuditEvents"

// RecordAuditEventsInput is a batch of events to append, all or nothing.
type RecordAuditEventsInput struct {
	Events []domain.AuditEventDraft
	// IdempotencyKey, when set, makes the whole call idempotent: a repeat
	// with the same events returns the first call's events; with other
	// events it fails with IDEMPOTENCY_CONFLICT.
	IdempotencyKey string
	// TraceID is the W3C trace id of the request (from its traceparent
	// header), filled into correlation.traceId of events that carry none.
	TraceID string
}

// RecordAuditEvent appends one event; see RecordAuditEvents.
func (a *App) RecordAuditEvent(ctx context.Context, id Identity, draft domain.AuditEventDraft, traceID string) (_ domain.AuditEvent, err error) {
	ctx, span := a.startCommand(ctx, "RecordAuditEvent")
	defer func() { a.endCommand(span, err) }()
	events, err := a.recordAuditEvents(ctx, id, RecordAuditEventsInput{Events: []domain.AuditEventDraft{draft}, TraceID: traceID}, "")
	if err != nil {
		return domain.AuditEvent{}, err
	}
	return events[0], nil
}

// RecordAuditEvents appends up to MaxRecordBatch events in one transaction,
// all or nothing, for an identity with audit:write and access to each
// event's project. Within each project, events get the next dense sequences
// in input order and are chained (see domain.ChainHead.Append).
//
// An event with a client-supplied id is idempotent: re-sending it returns the
// stored event unchanged (same sequence), while the same id with different
// content fails closed with IDEMPOTENCY_CONFLICT. Events are returned in
// input order.
//
// This transaction is the one place where recorded evidence will get its
// follow-up work (the outbox jobs of webhook deliveries, the live-feed
// notification), so that such work exists exactly when the events do.
func (a *App) RecordAuditEvents(ctx context.Context, id Identity, in RecordAuditEventsInput) (_ []domain.AuditEvent, err error) {
	ctx, span := a.startCommand(ctx, "RecordAuditEvents")
	defer func() { a.endCommand(span, err) }()
	return a.recordAuditEvents(ctx, id, in, "events")
}

func (a *App) recordAuditEvents(ctx context.Context, id Identity, in RecordAuditEventsInput, path string) ([]domain.AuditEvent, error) {
	if err := a.authorizeCommand(id, PermissionAuditWrite, tenantScope); err != nil {
		return nil, err
	}
	if len(in.Events) == 0 {
		return nil, badInput(path, "must contain at least one event")
	}
	if len(in.Events) > MaxRecordBatch {
		return nil, badInput(path, fmt.Sprintf("must contain at most %d events", MaxRecordBatch))
	}
	if err := checkIdempotencyKey(in.IdempotencyKey); err != nil {
		return nil, err
	}
	// The tenant's event volume: a batch counts its events.
	if err := allowN(nil, a.limits.eventsTenant, id, len(in.Events), "events", a.now()); err != nil {
		return nil, err
	}
	now := a.now()
	drafts := slices.Clone(in.Events)
	for i := range drafts {
		p := ""
		if path != "" {
			p = path + "[" + strconv.Itoa(i) + "]"
		}
		if err := drafts[i].Normalize(p, now); err != nil {
			return nil, err
		}
		if err := drafts[i].CheckClientWritable(p); err != nil {
			return nil, err
		}
		if !id.CanAccessProject(drafts[i].ProjectID) {
			return nil, ErrProjectNotFound
		}
	}

	// Fingerprints cover what the client sent; a generated id or the
	// request's trace id are filled in afterwards.
	// The request fingerprint (for the idempotency key) covers the drafts as
	// sent, so a retry of events without ids matches.
	var requestFP domain.Hash
	if in.IdempotencyKey != "" {
		fps := make([]domain.Hash, len(drafts))
		for i := range drafts {
			fps[i] = drafts[i].Fingerprint()
		}
		requestFP = batchFingerprint(fps)
	}
	fingerprints := make([]domain.Hash, len(drafts))
	clientIDs := false
	// Who records the events comes from the verified token, never from the
	// input; it is outside the fingerprints.
	recorder := id.Recorder()
	for i := range drafts {
		drafts[i].RecordedBy = recorder
		if drafts[i].ID == uuid.Nil {
			drafts[i].ID = uuid.Must(uuid.NewV7())
		} else {
			clientIDs = true
		}
		fingerprints[i] = drafts[i].Fingerprint()
		if in.TraceID != "" && (drafts[i].Correlation == nil || drafts[i].Correlation.TraceID == "") {
			c := domain.Correlation{}
			if drafts[i].Correlation != nil {
				c = *drafts[i].Correlation
			}
			c.TraceID = in.TraceID
			drafts[i].Correlation = &c
		}
	}
	// Within one batch an id may repeat only with identical content.
	firstByID := make(map[uuid.UUID]int, len(drafts))
	for i := range drafts {
		if j, ok := firstByID[drafts[i].ID]; ok {
			if fingerprints[j] != fingerprints[i] {
				return nil, idempotencyConflict(drafts[i].ID)
			}
			continue
		}
		firstByID[drafts[i].ID] = i
	}

	req := &appendRequest{drafts: drafts, fingerprints: fingerprints, clientIDs: clientIDs}
	if in.IdempotencyKey == "" && singleProject(drafts) {
		return a.appendCoalesced(ctx, id.TenantID, drafts[0].ProjectID, req)
	}
	var out []domain.AuditEvent
	err := a.boundedAppendTx(ctx, time.Now().Add(a.appendTimeout), func(ctx context.Context, tx Tx) error {
		var err error
		out, err = a.appendInTx(ctx, tx, id.TenantID, req, in.IdempotencyKey, requestFP)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func singleProject(drafts []domain.AuditEventDraft) bool {
	for i := range drafts {
		if drafts[i].ProjectID != drafts[0].ProjectID {
			return false
		}
	}
	return true
}

// appendInTx appends one request, possibly spanning projects, in the
// transaction tx: the idempotency claim, each project's head locked in
// a fixed order (so concurrent batches cannot deadlock), then the events.
func (a *App) appendInTx(ctx context.Context, tx Tx, tenantID string, req *appendRequest, idempotencyKey string, requestFP domain.Hash) ([]domain.AuditEvent, error) {
	if idempotencyKey != "" {
		result, found, err := a.claimIdempotency(ctx, tx, tenantID, operationRecordAuditEvents, idempotencyKey, requestFP)
		if err != nil {
			return nil, err
		}
		if found {
			return a.replayBatch(ctx, tx, tenantID, result)
		}
	}

	byProject := map[string][]int{}
	for i := range req.drafts {
		byProject[req.drafts[i].ProjectID] = append(byProject[req.drafts[i].ProjectID], i)
	}
	projects := make([]string, 0, len(byProject))
	for p := range byProject {
		projects = append(projects, p)
	}
	slices.Sort(projects)
	heads := make(map[string]lockedHead, len(projects))
	for _, p := range projects {
		head, webhooks, err := tx.LockAuditHead(ctx, tenantID, p)
		if err != nil {
			return nil, err
		}
		heads[p] = lockedHead{head, webhooks}
	}
	existing, err := a.findExisting(ctx, tx, tenantID, []*appendRequest{req})
	if err != nil {
		return nil, err
	}

	req.reset()
	batch := newSealBatch(existing)
	recordedAt := a.now()
	for _, p := range projects {
		part := &appendRequest{}
		for _, i := range byProject[p] {
			part.drafts = append(part.drafts, req.drafts[i])
			part.fingerprints = append(part.fingerprints, req.fingerprints[i])
		}
		part.reset()
		if _, err := a.sealAndInsert(ctx, tx, tenantID, p, heads[p], batch, []*appendRequest{part}, recordedAt); err != nil {
			return nil, err
		}
		if part.err != nil {
			return nil, part.err
		}
		for k, i := range byProject[p] {
			req.events[i] = part.events[k]
		}
	}

	if idempotencyKey != "" {
		ids := make([]uuid.UUID, len(req.drafts))
		for i := range req.drafts {
			ids[i] = req.drafts[i].ID
		}
		result, err := json.Marshal(ids)
		if err != nil {
			return nil, fmt.Errorf("encoding idempotency result: %w", err)
		}
		if err := tx.CompleteIdempotencyKey(ctx, tenantID, operationRecordAuditEvents, idempotencyKey, result); err != nil {
			return nil, err
		}
	}
	return req.events, nil
}

// findExisting looks up, among the client-supplied ids of reqs, the events
// already stored, in transaction tx. Server-generated ids are fresh UUIDv7s and need no lookup.
func (a *App) findExisting(ctx context.Context, tx Tx, tenantID string, reqs []*appendRequest) (map[uuid.UUID]domain.AuditEvent, error) {
	var ids []uuid.UUID
	for _, r := range reqs {
		if r.clientIDs {
			for i := range r.drafts {
				ids = append(ids, r.drafts[i].ID)
			}
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	return tx.FindAuditEventsByID(ctx, tenantID, ids)
}

// lockedHead is a project's chain head, locked in the transaction, and
// whether the project has active webhook subscriptions.
type lockedHead struct {
	head     domain.ChainHead
	webhooks bool
}

// sealAndInsert seals reqs (all of one project, whose head is locked) into
// events after head, then inserts them and moves the head; see sealBatch.
// When the project has active webhook subscriptions, the same transaction
// enqueues the fan-out of the new events: the outbox fact of their
// deliveries (scheduled ahead as the rescue of the webhook dispatcher, if
// this process runs one: RunWebhookDispatch). It returns the head the
// transaction leaves.
func (a *App) sealAndInsert(ctx context.Context, tx Tx, tenantID, projectID string, head lockedHead, batch *sealBatch, reqs []*appendRequest, recordedAt time.Time) (domain.ChainHead, error) {
	events, newHead := batch.seal(tenantID, head.head, reqs, recordedAt)
	if len(events) == 0 {
		return head.head, nil
	}
	if err := tx.AppendAuditEvents(ctx, tenantID, projectID, events, head.head, newHead); err != nil {
		return head.head, err
	}
	if !head.webhooks {
		return newHead, nil
	}
	from, to := events[0].Sequence, newHead.Sequence
	job, dispatch := a.fanoutRescue(tenantID, projectID, from, to)
	if dispatch == nil {
		return newHead, tx.EnqueueJobs(ctx, job)
	}
	ids, err := tx.EnqueueJobIDs(ctx, job)
	if err != nil {
		return head.head, err
	}
	tx.AfterCommit(func() { dispatch.dispatched(tenantID, projectID, from, to, ids[0]) })
	return newHead, nil
}

// replayBatch returns the events a completed idempotent call recorded.
func (a *App) replayBatch(ctx context.Context, tx Tx, tenantID string, result []byte) ([]domain.AuditEvent, error) {
	var ids []uuid.UUID
	if err := json.Unmarshal(result, &ids); err != nil {
		return nil, fmt.Errorf("decoding idempotency result: %w", err)
	}
	found, err := tx.FindAuditEventsByID(ctx, tenantID, ids)
	if err != nil {
		return nil, err
	}
	out := make([]domain.AuditEvent, len(ids))
	for i, id := range ids {
		e, ok := found[id]
		if !ok {
			return nil, fmt.Errorf("idempotent replay: event %s missing", id)
		}
		out[i] = e
	}
	return out, nil
}

func batchFingerprint(fps []domain.Hash) domain.Hash {
	h := sha256.New()
	for _, fp := range fps {
		h.Write(fp[:])
	}
	var out domain.Hash
	h.Sum(out[:0])
	return out
}

func idempotencyConflict(id uuid.UUID) error {
	return &Error{Code: CodeIdempotencyConflict, Field: "id",
		Message: "event " + id.String() + " was already recorded with different content"}
}
