package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/store/dbsqlc"
)

// destinationFromRow is the domain destination of a stored row (the rows
// of LockWebhookDestination and ListWebhookDestinations convert to
// dbsqlc.GetWebhookDestinationRow).
func destinationFromRow(r dbsqlc.GetWebhookDestinationRow) domain.WebhookDestination {
	d := domain.WebhookDestination{TenantID: r.TenantID, ProjectID: r.ProjectID, ID: r.ID, URL: r.Url,
		Description: r.Description, CreatedAt: r.CreatedAt.UTC(), CreatedBy: r.CreatedBy,
		SecretRotatedAt: utcPtr(r.SecretRotatedAt), ActiveSecrets: int(r.ActiveSecrets)}
	destinationLifecycleFromRow(&d, &r)
	return d
}

// scanDestination decodes a row of dbsqlc.GetWebhookDestination queued in a
// batch.
func scanDestination(row pgx.CollectableRow) (domain.WebhookDestination, error) {
	var r dbsqlc.GetWebhookDestinationRow
	err := row.Scan(&r.TenantID, &r.ProjectID, &r.ID, &r.Url, &r.Description, &r.CreatedAt, &r.CreatedBy,
		&r.SecretRotatedAt, &r.ActiveSecrets, &r.State, &r.DisabledReason, &r.DisabledAt, &r.DeletedAt,
		&r.RateLimitPerSecond, &r.MaxInFlight, &r.Headers, &r.ConsecutiveFailures, &r.FailingSince, &r.LastSuccessAt,
		&r.LastFailureAt, &r.CircuitOpenUntil, &r.CircuitOpens, &r.ProbeUntil, &r.HourStart, &r.HourSucceeded,
		&r.HourFailed, &r.PrevHourSucceeded, &r.PrevHourFailed)
	return destinationFromRow(r), err
}

// scanSecret decodes a row of dbsqlc.ValidWebhookDestinationSecrets queued
// in a batch.
func scanSecret(row pgx.CollectableRow) (domain.SealedWebhookSecret, error) {
	var r dbsqlc.ValidWebhookDestinationSecretsRow
	err := row.Scan(&r.ID, &r.Sealed, &r.CreatedAt, &r.ExpiresAt)
	return secretFromRow(r), err
}

// secretFromRow is the domain secret of a stored row.
func secretFromRow(r dbsqlc.ValidWebhookDestinationSecretsRow) domain.SealedWebhookSecret {
	return domain.SealedWebhookSecret{ID: r.ID, Sealed: r.Sealed, CreatedAt: r.CreatedAt, ExpiresAt: r.ExpiresAt}
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// InsertWebhookDestination stores a new destination with its first secret.
func (t *Tx) InsertWebhookDestination(ctx context.Context, d domain.WebhookDestination, secret domain.SealedWebhookSecret) error {
	b := &pgx.Batch{}
	b.Queue(dbsqlc.InsertWebhookDestination, d.TenantID, d.ProjectID, d.ID, d.URL, d.Description, d.CreatedAt, d.CreatedBy)
	b.Queue(dbsqlc.InsertWebhookDestinationSecret,
		d.ID, secret.ID, secret.Sealed, secret.CreatedAt)
	if err := t.tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("inserting webhook destination: %w", err)
	}
	return nil
}

// GetWebhookDestination returns a destination of the tenant; ErrNotFound when
// the tenant has none with this id. With lock, the row stays locked for the
// rest of the transaction.
func (q *queries) GetWebhookDestination(ctx context.Context, tenantID string, id uuid.UUID, lock bool) (domain.WebhookDestination, error) {
	var (
		r   dbsqlc.GetWebhookDestinationRow
		err error
	)
	if lock {
		var l dbsqlc.LockWebhookDestinationRow
		l, err = q.sqlc.LockWebhookDestination(ctx, dbsqlc.LockWebhookDestinationParams{TenantID: tenantID, ID: id})
		r = dbsqlc.GetWebhookDestinationRow(l)
	} else {
		r, err = q.sqlc.GetWebhookDestination(ctx, dbsqlc.GetWebhookDestinationParams{TenantID: tenantID, ID: id})
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return domain.WebhookDestination{}, ErrNotFound
	}
	if err != nil {
		return domain.WebhookDestination{}, fmt.Errorf("reading webhook destination: %w", err)
	}
	return destinationFromRow(r), nil
}

// ListWebhookDestinations returns up to limit destinations of tenant/project
// with ids after after (uuid.Nil: from the start), oldest first.
func (q *queries) ListWebhookDestinations(ctx context.Context, tenantID, projectID string, after uuid.UUID, limit int) ([]domain.WebhookDestination, error) {
	rows, err := q.sqlc.ListWebhookDestinations(ctx, dbsqlc.ListWebhookDestinationsParams{
		TenantID: tenantID, ProjectID: projectID, AfterID: after, RowLimit: int64(limit)})
	if err != nil {
		return nil, fmt.Errorf("listing webhook destinations: %w", err)
	}
	out := make([]domain.WebhookDestination, len(rows))
	for i, r := range rows {
		out[i] = destinationFromRow(dbsqlc.GetWebhookDestinationRow(r))
	}
	return out, nil
}

// RotateWebhookDestinationSecret makes secret the destination's current
// secret. Secrets still valid keep signing until graceUntil (or their own
// earlier expiry).
func (t *Tx) RotateWebhookDestinationSecret(ctx context.Context, destinationID uuid.UUID, secret domain.SealedWebhookSecret, graceUntil time.Time) error {
	b := &pgx.Batch{}
	b.Queue(dbsqlc.ExpireWebhookDestinationSecrets, destinationID, graceUntil, secret.CreatedAt)
	b.Queue(dbsqlc.InsertWebhookDestinationSecret,
		destinationID, secret.ID, secret.Sealed, secret.CreatedAt)
	b.Queue(dbsqlc.SetWebhookDestinationSecretRotated, destinationID, secret.CreatedAt)
	if err := t.tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("rotating webhook secret: %w", err)
	}
	return nil
}

// subscriptionFromRow is the domain subscription of a stored row.
func subscriptionFromRow(r dbsqlc.WebhookSubscription) domain.WebhookSubscription {
	sub := domain.WebhookSubscription{TenantID: r.TenantID, ProjectID: r.ProjectID, ID: r.ID,
		DestinationID: r.DestinationID, EventTypes: r.EventTypes, Description: r.Description,
		State: domain.WebhookSubscriptionState(r.State), AfterSequence: uint64(r.AfterSequence),
		CreatedAt: r.CreatedAt.UTC(), CreatedBy: r.CreatedBy, DisabledAt: utcPtr(r.DisabledAt),
		Ordering: domain.WebhookOrdering(r.Ordering), PausedByDeliveryID: r.PausedByDeliveryID}
	if r.DisabledSequence != nil {
		sub.DisabledSequence = uint64(*r.DisabledSequence)
	}
	if r.FannedOutThrough != nil {
		sub.FannedOutThrough = uint64(*r.FannedOutThrough)
	}
	return sub
}

// subscriptionsFromRows converts rows with subscriptionFromRow.
func subscriptionsFromRows(rows []dbsqlc.WebhookSubscription) []domain.WebhookSubscription {
	out := make([]domain.WebhookSubscription, len(rows))
	for i := range rows {
		out[i] = subscriptionFromRow(rows[i])
	}
	return out
}

// InsertWebhookSubscription stores a new subscription.
func (t *Tx) InsertWebhookSubscription(ctx context.Context, sub domain.WebhookSubscription) error {
	var fannedOut *int64
	if sub.Ordering == domain.WebhookOrderingSequence {
		through := clampInt64(sub.FannedOutThrough)
		fannedOut = &through
	}
	err := t.sqlc.InsertWebhookSubscription(ctx, dbsqlc.InsertWebhookSubscriptionParams{
		TenantID: sub.TenantID, ProjectID: sub.ProjectID, ID: sub.ID, DestinationID: sub.DestinationID,
		EventTypes: sub.EventTypes, Description: sub.Description, State: string(sub.State),
		AfterSequence: clampInt64(sub.AfterSequence), CreatedAt: sub.CreatedAt, CreatedBy: sub.CreatedBy,
		DisabledAt: sub.DisabledAt, Ordering: string(sub.Ordering), FannedOutThrough: fannedOut})
	if err != nil {
		return fmt.Errorf("inserting webhook subscription: %w", err)
	}
	return nil
}

// GetWebhookSubscription returns a subscription of the tenant; ErrNotFound
// when the tenant has none with this id. With lock, the row stays locked for
// the rest of the transaction.
func (q *queries) GetWebhookSubscription(ctx context.Context, tenantID string, id uuid.UUID, lock bool) (domain.WebhookSubscription, error) {
	var (
		r   dbsqlc.WebhookSubscription
		err error
	)
	if lock {
		r, err = q.sqlc.LockWebhookSubscription(ctx, dbsqlc.LockWebhookSubscriptionParams{TenantID: tenantID, ID: id})
	} else {
		r, err = q.sqlc.GetWebhookSubscription(ctx, dbsqlc.GetWebhookSubscriptionParams{TenantID: tenantID, ID: id})
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return domain.WebhookSubscription{}, ErrNotFound
	}
	if err != nil {
		return domain.WebhookSubscription{}, fmt.Errorf("reading webhook subscription: %w", err)
	}
	return subscriptionFromRow(r), nil
}

// DisableWebhookSubscription persists a subscription disabled by the domain.
func (t *Tx) DisableWebhookSubscription(ctx context.Context, sub domain.WebhookSubscription) error {
	disabled := clampInt64(sub.DisabledSequence)
	err := t.sqlc.DisableWebhookSubscription(ctx, dbsqlc.DisableWebhookSubscriptionParams{
		TenantID: sub.TenantID, ID: sub.ID, State: string(sub.State), DisabledAt: sub.DisabledAt, DisabledSequence: &disabled})
	if err != nil {
		return fmt.Errorf("disabling webhook subscription: %w", err)
	}
	return nil
}

// ListWebhookSubscriptions returns up to limit subscriptions of
// tenant/project with ids after after, oldest first. With activeOnly, only
// ACTIVE ones.
func (q *queries) ListWebhookSubscriptions(ctx context.Context, tenantID, projectID string, activeOnly bool, after uuid.UUID, limit int) ([]domain.WebhookSubscription, error) {
	var (
		rows []dbsqlc.WebhookSubscription
		err  error
	)
	if activeOnly {
		rows, err = q.sqlc.ListActiveWebhookSubscriptions(ctx, dbsqlc.ListActiveWebhookSubscriptionsParams{
			TenantID: tenantID, ProjectID: projectID, AfterID: after, RowLimit: int64(limit)})
	} else {
		rows, err = q.sqlc.ListWebhookSubscriptions(ctx, dbsqlc.ListWebhookSubscriptionsParams{
			TenantID: tenantID, ProjectID: projectID, AfterID: after, RowLimit: int64(limit)})
	}
	if err != nil {
		return nil, fmt.Errorf("listing webhook subscriptions: %w", err)
	}
	return subscriptionsFromRows(rows), nil
}

// AuditEventRefs returns id, sequence and action of the events of
// tenant/project with sequence in [from, to], in sequence order, and for
// an operational webhook event the destination it is about.
func (q *queries) AuditEventRefs(ctx context.Context, tenantID, projectID string, from, to uint64) ([]domain.AuditEventRef, error) {
	segs, err := q.auditSegments(ctx, tenantID, projectID)
	if err != nil {
		return nil, fmt.Errorf("reading audit event refs: %w", err)
	}
	var out []domain.AuditEventRef
	err = segmentsIn(segs, from, to, false, func(s auditSegment) (bool, error) {
		rows, err := q.sqlc.AuditEventRefs(ctx, dbsqlc.AuditEventRefsParams{
			TenantID: tenantID, ProjectID: projectID, FromSequence: clampInt64(s.first), ToSequence: clampInt64(s.last),
			RecordedFrom: s.from, RecordedTo: s.to})
		if err != nil {
			return false, err
		}
		for _, r := range rows {
			ref := domain.AuditEventRef{ID: r.ID, Sequence: uint64(r.Sequence), Action: r.Action, RecordedAt: r.RecordedAt}
			if r.AboutDestination != "" {
				ref.AboutDestination, _ = uuid.Parse(r.AboutDestination)
			}
			out = append(out, ref)
		}
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading audit event refs: %w", err)
	}
	return out, nil
}

// InsertWebhookDeliveries stores new deliveries, all of them or none: a
// delivery whose id exists already (or, in the legacy partition of
// migration 00024, whose (subscription, event) pair does) fails the
// statement, and the transaction with it, with an error that wraps both
// domain.ErrWebhookDeliveryExists and PostgreSQL's unique_violation
// (IsRetryable). A plain insert: the caller that may meet deliveries
// already stored (a rerun) takes InsertMissingWebhookDeliveries, whose
// conflict-tolerant insert costs PostgreSQL a probe of the key, a lock and
// a confirmation record per row more (docs/benchmarks.md, "Fan-out ratio:
// database side").
//
// Hand-written, not in queries/: sqlc cannot type its multi-argument unnest.
func (t *Tx) InsertWebhookDeliveries(ctx context.Context, ds []domain.WebhookDelivery) error {
	if len(ds) == 0 {
		return nil
	}
	_, err := t.tx.Exec(ctx, insertDeliveries, deliveryInsertArgs(ds)...)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		return fmt.Errorf("inserting webhook deliveries: %w (%w)", domain.ErrWebhookDeliveryExists, err)
	}
	if err != nil {
		return fmt.Errorf("inserting webhook deliveries: %w", err)
	}
	return nil
}

// InsertMissingWebhookDeliveries stores new deliveries, skipping any whose
// id exists already, and returns the ids of those it inserted. The
// fan-out's ids derive from (subscription, event)
// (domain.FanoutDeliveryID): this is what makes a rerun exactly-once. ON
// CONFLICT names no index: the legacy partition of migration 00024 also
// skips by its old (subscription, event) index.
func (t *Tx) InsertMissingWebhookDeliveries(ctx context.Context, ds []domain.WebhookDelivery) ([]uuid.UUID, error) {
	if len(ds) == 0 {
		return nil, nil
	}
	rows, _ := t.tx.Query(ctx, insertDeliveries+` ON CONFLICT DO NOTHING RETURNING id`, deliveryInsertArgs(ds)...)
	out, err := pgx.CollectRows(rows, rowToUUID)
	if err != nil {
		return nil, fmt.Errorf("inserting webhook deliveries: %w", err)
	}
	return out, nil
}

// insertDeliveries inserts the deliveries of deliveryInsertArgs.
const insertDeliveries = `INSERT INTO webhook_deliveries (tenant_id, project_id, id, subscription_id,
		destination_id, event_id, event_sequence, event_type, idempotency_key, state, max_attempts,
		next_attempt_at, created_at, updated_at, replay_of, ordered)
	SELECT t, p, i, s, d, e, q, y, k, st, m, c, c, c, r, o
	FROM unnest($1::text[], $2::text[], $3::uuid[], $4::uuid[], $5::uuid[], $6::uuid[], $7::bigint[],
		$8::text[], $9::text[], $10::text[], $11::int[], $12::timestamptz[], $13::uuid[], $14::boolean[])
		AS u(t, p, i, s, d, e, q, y, k, st, m, c, r, o)`

// deliveryInsertArgs are the arguments of insertDeliveries: one array per
// column, as the array parameters of array_params.go (no allocation per
// element).
func deliveryInsertArgs(ds []domain.WebhookDelivery) []any {
	n := len(ds)
	var (
		tenants, projects, types, keys, states = make(textParams, n), make(textParams, n), make(textParams, n), make(textParams, n), make(textParams, n)
		ids, subs, dests, events               = make(uuidParams, n), make(uuidParams, n), make(uuidParams, n), make(uuidParams, n)
		seqs                                   = make(nullIntParams, n)
		maxAttempts                            = make([]int32, n)
		created                                = make(timeParams, n)
		replayOf                               = make([]*uuid.UUID, n)
		ordered                                = make([]bool, n)
	)
	for i, d := range ds {
		tenants[i], projects[i], types[i], keys[i], states[i] = d.TenantID, d.ProjectID, d.EventType, d.IdempotencyKey, string(d.State)
		ids[i], subs[i], dests[i], events[i] = d.ID, d.SubscriptionID, d.DestinationID, d.EventID
		seqs[i] = pgtype.Int8{Int64: clampInt64(d.EventSequence), Valid: true}
		maxAttempts[i] = int32(d.MaxAttempts)
		created[i] = d.CreatedAt
		replayOf[i], ordered[i] = d.ReplayOf, d.Ordered
	}
	return []any{tenants, projects, ids, subs, dests, events, seqs, types, keys, states, maxAttempts, created, replayOf, ordered}
}

// rowToUUID scans a row of one uuid column. A binary uuid (what every
// statement returning ids here receives) is copied from the row's raw
// value without a scan: Scan's arguments escape, which cost two
// allocations per row of the delivery statements' RETURNING id.
func rowToUUID(row pgx.CollectableRow) (uuid.UUID, error) {
	if raw := row.RawValues(); len(raw) == 1 && len(raw[0]) == len(uuid.UUID{}) {
		if f := row.FieldDescriptions()[0]; f.Format == pgx.BinaryFormatCode && f.DataTypeOID == pgtype.UUIDOID {
			return uuid.UUID(raw[0]), nil
		}
	}
	var id uuid.UUID
	err := row.Scan((*[16]byte)(&id))
	return id, err
}

// deliveryColumns are the columns of dbsqlc.WebhookDelivery, for the
// filtered search, whose conditions depend on the filter (store.filtered).
const deliveryColumns = `tenant_id, project_id, id, subscription_id, destination_id, event_id, event_sequence,
	event_type, idempotency_key, state, attempt_count, max_attempts, next_attempt_at, created_at, updated_at,
	delivered_at, dead_lettered_at, last_error, replay_of, ordered, attempt_started_at, attempt_status_code,
	attempt_latency_us, attempt_response_body`

// deliveryFromRow is the domain delivery (without attempts) of a stored row,
// with the succeeded attempt its row keeps (SaveWebhookDeliveriesIf).
func deliveryFromRow(r *dbsqlc.WebhookDelivery) domain.WebhookDelivery {
	d := domain.WebhookDelivery{TenantID: r.TenantID, ProjectID: r.ProjectID, ID: r.ID,
		SubscriptionID: r.SubscriptionID, DestinationID: r.DestinationID, EventID: r.EventID,
		EventSequence: uint64(r.EventSequence), EventType: r.EventType, IdempotencyKey: r.IdempotencyKey,
		State: domain.WebhookDeliveryState(r.State), AttemptCount: int(r.AttemptCount), MaxAttempts: int(r.MaxAttempts),
		NextAttemptAt: utcPtr(r.NextAttemptAt), CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
		DeliveredAt: utcPtr(r.DeliveredAt), DeadLetteredAt: utcPtr(r.DeadLetteredAt), LastError: r.LastError,
		ReplayOf: r.ReplayOf, Ordered: r.Ordered}
	if d.State == domain.WebhookDeliveryDelivered && r.AttemptStartedAt != nil && d.AttemptCount > 0 {
		a := attemptFromRow(&dbsqlc.WebhookDeliveryAttempt{Number: r.AttemptCount,
			Outcome: string(domain.WebhookAttemptSucceeded), StartedAt: *r.AttemptStartedAt, FinishedAt: r.DeliveredAt,
			StatusCode: r.AttemptStatusCode, LatencyUs: r.AttemptLatencyUs, ResponseBody: r.AttemptResponseBody})
		d.Succeeded = &a
	}
	return d
}

// scanDelivery decodes a whole delivery from a query sqlc does not run (the
// filtered search, dbsqlc.BatchSendWebhookDeliveries queued in a batch),
// its uuids binary, directly.
func scanDelivery(row pgx.CollectableRow) (domain.WebhookDelivery, error) {
	var r dbsqlc.WebhookDelivery
	err := row.Scan(&r.TenantID, &r.ProjectID, (*[16]byte)(&r.ID), (*[16]byte)(&r.SubscriptionID),
		(*[16]byte)(&r.DestinationID), (*[16]byte)(&r.EventID), &r.EventSequence,
		&r.EventType, &r.IdempotencyKey, &r.State, &r.AttemptCount, &r.MaxAttempts, &r.NextAttemptAt,
		&r.CreatedAt, &r.UpdatedAt, &r.DeliveredAt, &r.DeadLetteredAt, &r.LastError, &r.ReplayOf, &r.Ordered,
		&r.AttemptStartedAt, &r.AttemptStatusCode, &r.AttemptLatencyUs, &r.AttemptResponseBody)
	return deliveryFromRow(&r), err
}

// GetWebhookDelivery returns a delivery of the tenant (without attempts);
// ErrNotFound when the tenant has none with this id. With lock, the row stays
// locked for the rest of the transaction.
func (q *queries) GetWebhookDelivery(ctx context.Context, tenantID string, id uuid.UUID, lock bool) (domain.WebhookDelivery, error) {
	var (
		r   dbsqlc.WebhookDelivery
		err error
	)
	if lock {
		r, err = q.sqlc.LockWebhookDelivery(ctx, dbsqlc.LockWebhookDeliveryParams{TenantID: tenantID, ID: id})
	} else {
		r, err = q.sqlc.GetWebhookDelivery(ctx, dbsqlc.GetWebhookDeliveryParams{TenantID: tenantID, ID: id})
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return domain.WebhookDelivery{}, ErrNotFound
	}
	if err != nil {
		return domain.WebhookDelivery{}, fmt.Errorf("reading webhook delivery: %w", err)
	}
	return deliveryFromRow(&r), nil
}

// UpdateWebhookDelivery persists the state fields of a delivery changed by
// the domain.
func (t *Tx) UpdateWebhookDelivery(ctx context.Context, d domain.WebhookDelivery) error {
	err := t.sqlc.UpdateWebhookDelivery(ctx, dbsqlc.UpdateWebhookDeliveryParams{
		TenantID: d.TenantID, ID: d.ID, State: string(d.State), AttemptCount: int32(d.AttemptCount),
		MaxAttempts: int32(d.MaxAttempts), NextAttemptAt: d.NextAttemptAt, UpdatedAt: d.UpdatedAt,
		DeliveredAt: d.DeliveredAt, DeadLetteredAt: d.DeadLetteredAt, LastError: d.LastError})
	if err != nil {
		return fmt.Errorf("updating webhook delivery: %w", err)
	}
	return nil
}

// SearchWebhookDeliveries returns up to limit deliveries of tenant/project
// matching f, newest first, with ids before before (uuid.Nil: from the
// newest), each with its attempts.
func (q *queries) SearchWebhookDeliveries(ctx context.Context, tenantID, projectID string, f domain.WebhookDeliveryFilter, before uuid.UUID, limit int) ([]domain.WebhookDelivery, error) {
	fq := newFiltered(`SELECT `+deliveryColumns+` FROM webhook_deliveries WHERE tenant_id = $1 AND project_id = $2`, tenantID, projectID)
	if before != uuid.Nil {
		fq.and("id < $?", before)
	}
	if f.SubscriptionID != uuid.Nil {
		fq.and("subscription_id = $?", f.SubscriptionID)
	}
	if f.EventID != uuid.Nil {
		fq.and("event_id = $?", f.EventID)
	}
	if f.State != "" {
		fq.and("state = $?", string(f.State))
	}
	query, args := fq.page("id DESC", limit)
	rows, _ := q.db.Query(ctx, query, args...)
	out, err := pgx.CollectRows(rows, scanDelivery)
	if err != nil {
		return nil, fmt.Errorf("searching webhook deliveries: %w", err)
	}
	if err := q.fillAttempts(ctx, out); err != nil {
		return nil, err
	}
	return out, nil
}

// WebhookDeliveryWithAttempts returns a delivery of the tenant with its
// attempts; ErrNotFound when the tenant has none with this id.
func (q *queries) WebhookDeliveryWithAttempts(ctx context.Context, tenantID string, id uuid.UUID) (domain.WebhookDelivery, error) {
	d, err := q.GetWebhookDelivery(ctx, tenantID, id, false)
	if err != nil {
		return d, err
	}
	ds := []domain.WebhookDelivery{d}
	if err := q.fillAttempts(ctx, ds); err != nil {
		return d, err
	}
	return ds[0], nil
}

// attemptColumns are the columns of dbsqlc.WebhookDeliveryAttempt after
// delivery_id, for the attempts SaveWebhookDeliveriesIf inserts.
const attemptColumns = `number, outcome, started_at, finished_at, status_code, latency_us, error_class, error, response_body`

// fillAttempts sets the Attempts of ds, read with them: their rows, then
// the attempt each delivery's own row keeps (under way or succeeded).
func (q *queries) fillAttempts(ctx context.Context, ds []domain.WebhookDelivery) error {
	if len(ds) == 0 {
		return nil
	}
	ids := make([]uuid.UUID, len(ds))
	index := make(map[uuid.UUID]int, len(ds))
	for i := range ds {
		ids[i] = ds[i].ID
		index[ds[i].ID] = i
		ds[i].Attempts = []domain.WebhookDeliveryAttempt{}
	}
	rows, err := q.sqlc.ListWebhookDeliveryAttempts(ctx, ids)
	if err != nil {
		return fmt.Errorf("reading webhook attempts: %w", err)
	}
	for j := range rows {
		i := index[rows[j].DeliveryID]
		ds[i].Attempts = append(ds[i].Attempts, attemptFromRow(&rows[j]))
	}
	// An attempt under way has no row yet (rows written before
	// SaveWebhookDeliveriesIf stopped writing one at the start still do),
	// nor has a succeeded one (rows written before its delivery's row kept
	// it still do): each lives in its delivery's row, and is the last.
	for i := range ds {
		a, ok := ds[i].AttemptUnderWay()
		if !ok && ds[i].Succeeded != nil {
			a, ok = *ds[i].Succeeded, true
		}
		if ok && (len(ds[i].Attempts) == 0 || ds[i].Attempts[len(ds[i].Attempts)-1].Number < a.Number) {
			ds[i].Attempts = append(ds[i].Attempts, a)
		}
	}
	return nil
}

// attemptFromRow is the domain attempt of a stored row.
func attemptFromRow(r *dbsqlc.WebhookDeliveryAttempt) domain.WebhookDeliveryAttempt {
	a := domain.WebhookDeliveryAttempt{Number: int(r.Number), Outcome: domain.WebhookAttemptOutcome(r.Outcome),
		StartedAt: r.StartedAt.UTC(), FinishedAt: utcPtr(r.FinishedAt), ErrorClass: r.ErrorClass, Error: r.Error,
		ResponseBody: r.ResponseBody}
	if r.StatusCode != nil {
		code := int(*r.StatusCode)
		a.StatusCode = &code
	}
	if r.LatencyUs != nil {
		a.Latency = time.Duration(*r.LatencyUs) * time.Microsecond
	}
	return a
}

// SaveWebhookAttempt inserts or updates (by number) an attempt of a delivery.
func (t *Tx) SaveWebhookAttempt(ctx context.Context, deliveryID uuid.UUID, a domain.WebhookDeliveryAttempt) error {
	var latency *int64
	if a.Outcome != domain.WebhookAttemptDelivering {
		us := a.Latency.Microseconds()
		latency = &us
	}
	var status *int32
	if a.StatusCode != nil {
		code := int32(*a.StatusCode)
		status = &code
	}
	err := t.sqlc.SaveWebhookDeliveryAttempt(ctx, dbsqlc.SaveWebhookDeliveryAttemptParams{
		DeliveryID: deliveryID, Number: int32(a.Number), Outcome: string(a.Outcome), StartedAt: a.StartedAt,
		FinishedAt: a.FinishedAt, StatusCode: status, LatencyUs: latency, ErrorClass: a.ErrorClass, Error: a.Error,
		ResponseBody: a.ResponseBody})
	if err != nil {
		return fmt.Errorf("saving webhook attempt: %w", err)
	}
	return nil
}

// SaveWebhookDeliveriesIf persists, in one statement, deliveries of one
// tenant changed by the domain, each with one of its attempts, each only if
// the stored delivery is still in the state (and attempt count) the change
// was computed from: compare and set. It returns the ids of the deliveries
// it saved; a missing one was moved by another run meanwhile.
//
// The changes either all start attempts (outcome DELIVERING), all end
// them, or all withdraw attempts that were never sent (no attempt: zero
// Number; the delivery goes back to the state it was in). An attempt under
// way lives in its delivery's row alone: state DELIVERING, attemptCount its
// number, updatedAt its start (domain.WebhookDelivery.AttemptUnderWay), so
// that starting writes one row per delivery. Ending an attempt that
// succeeded keeps it in its delivery's row too (its start, status, latency
// and response in the attempt_* columns, its end deliveredAt; migration
// 00028): no attempt row, as a success is always a delivery's last
// attempt. Ending any other attempt inserts the finished attempt's row. An
// attempt row is thus written once, never updated, and only for an attempt
// that did not succeed.
//
// Hand-written, not in queries/: sqlc cannot type their multi-argument unnest.
func (q *queries) SaveWebhookDeliveriesIf(ctx context.Context, changes []domain.WebhookDeliveryChange) ([]uuid.UUID, error) {
	if len(changes) == 0 {
		return nil, nil
	}
	n := len(changes)
	var (
		ids                  = make(uuidParams, n)
		prevStates           = make(textParams, n)
		prevAttempts, counts = make([]int32, n), make([]int32, n)
	)
	tenantID := changes[0].Delivery.TenantID
	kind := func(a domain.WebhookDeliveryAttempt) int {
		switch {
		case a.Number == 0:
			return 0 // withdrawn
		case a.Outcome == domain.WebhookAttemptDelivering:
			return 1 // started
		}
		return 2 // ended
	}
	batch := kind(changes[0].Attempt)
	starting, ending := batch == 1, batch == 2
	for i, c := range changes {
		d, a := c.Delivery, c.Attempt
		if d.TenantID != tenantID {
			return nil, fmt.Errorf("saving webhook deliveries: more than one tenant")
		}
		if kind(a) != batch {
			return nil, fmt.Errorf("saving webhook deliveries: attempts started, ended or withdrawn in one batch")
		}
		if starting && (d.State != domain.WebhookDeliveryDelivering || a.Number != d.AttemptCount || !a.StartedAt.Equal(d.UpdatedAt)) {
			return nil, fmt.Errorf("saving webhook deliveries: attempt %d of delivery %s is not the one its row records", a.Number, d.ID)
		}
		if ending && a.Outcome == domain.WebhookAttemptSucceeded &&
			(d.State != domain.WebhookDeliveryDelivered || a.Number != d.AttemptCount || a.ErrorClass != "" || a.Error != "" ||
				a.FinishedAt == nil || d.DeliveredAt == nil || !a.FinishedAt.Equal(*d.DeliveredAt)) {
			return nil, fmt.Errorf("saving webhook deliveries: succeeded attempt %d of delivery %s cannot be kept in its row", a.Number, d.ID)
		}
		if batch == 0 && d.State == domain.WebhookDeliveryDelivering {
			return nil, fmt.Errorf("saving webhook deliveries: delivery %s withdrawn to DELIVERING", d.ID)
		}
		ids[i], prevStates[i], prevAttempts[i], counts[i] = d.ID, string(c.PrevState), int32(c.PrevAttempts), int32(d.AttemptCount)
	}
	// The common batches, every attempt of a job started or every one
	// succeeded at one instant, have statements of their own that send
	// only what differs between deliveries.
	lo, hi := idBounds(ids)
	if starting && uniformStarts(changes) {
		return q.collectSaved(ctx, startAttempts, tenantID, ids, prevStates, prevAttempts, changes[0].Delivery.UpdatedAt, lo, hi)
	}
	if ending && uniformSuccesses(changes) {
		started, statuses, latency, bodies := make(timeParams, n), make(nullIntParams, n), make(nullIntParams, n), make(textParams, n)
		for i, c := range changes {
			started[i], bodies[i] = c.Attempt.StartedAt, c.Attempt.ResponseBody
			statuses[i], latency[i] = statusCodeParam(c.Attempt), latencyParam(c.Attempt)
		}
		return q.collectSaved(ctx, recordSuccesses, tenantID, ids, counts, started, statuses, latency, bodies, *changes[0].Delivery.DeliveredAt, lo, hi)
	}
	var (
		states, lastErrors          = make(textParams, n), make(textParams, n)
		maxAttempts                 = make([]int32, n)
		nextAt, deliveredAt, deadAt = make([]*time.Time, n), make([]*time.Time, n), make([]*time.Time, n)
		updatedAt                   = make(timeParams, n)
	)
	for i, c := range changes {
		d := c.Delivery
		states[i], maxAttempts[i], lastErrors[i] = string(d.State), int32(d.MaxAttempts), d.LastError
		nextAt[i], updatedAt[i], deliveredAt[i], deadAt[i] = d.NextAttemptAt, d.UpdatedAt, d.DeliveredAt, d.DeadLetteredAt
	}
	// c is MATERIALIZED and carries the tenant, so that the tenant is a
	// join condition with each id, not a filter of its own: the plan is one
	// primary-key lookup per change. With w.tenant_id = $1, a tenant the
	// statistics do not know yet (or know smaller than it is) was read
	// whole through webhook_deliveries_event_idx on every call (see
	// docs/benchmarks.md, "Trickle rows: plans"). w.id = ANY($2) repeats
	// the ids as a condition on the partition key, so that only the
	// partitions of those ids are read (migration 00024).
	args := []any{tenantID, ids, prevStates, prevAttempts, states, counts, maxAttempts, nextAt, updatedAt, deliveredAt, deadAt, lastErrors}
	// An ending batch also writes the succeeded attempts' fields into
	// their deliveries' rows ($13 to $16; NULL for the others).
	foldColumns, foldSet, inserts := "", "", ""
	if ending {
		var (
			started  = make([]*time.Time, n)
			statuses = make([]*int32, n)
			latency  = make([]*int64, n)
			bodies   = make(textParams, n)
			failed   []int
		)
		for i, c := range changes {
			a := c.Attempt
			if a.Outcome != domain.WebhookAttemptSucceeded {
				failed = append(failed, i)
				continue
			}
			started[i], statuses[i], latency[i], bodies[i] = &changes[i].Attempt.StartedAt, statusCode(a), latencyUs(a), a.ResponseBody
		}
		foldColumns = `, $13::timestamptz[], $14::int[], $15::bigint[], $16::text[]`
		foldSet = `, attempt_started_at = c.fold_started_at, attempt_status_code = c.fold_status_code,
				attempt_latency_us = c.fold_latency_us, attempt_response_body = c.fold_response_body`
		args = append(args, started, statuses, latency, bodies)
		if len(failed) > 0 {
			inserts = attemptInserts(changes, failed, &args)
		}
	}
	// c is MATERIALIZED and carries the tenant, so that the tenant is a
	// join condition with each id, not a filter of its own: the plan is one
	// primary-key lookup per change. With w.tenant_id = $1, a tenant the
	// statistics do not know yet (or know smaller than it is) was read
	// whole through webhook_deliveries_event_idx on every call (see
	// docs/benchmarks.md, "Trickle rows: plans"). w.id = ANY($2) repeats
	// the ids as a condition on the partition key, so that a custom plan
	// reads only the partitions of those ids (migration 00024); the ids'
	// bounds (idBounds) do the same for a generic plan, when it starts.
	// They come last, after the attempts' arrays.
	args = append(args, lo, hi)
	bounds := fmt.Sprintf("AND w.id BETWEEN $%d::uuid AND $%d::uuid", len(args)-1, len(args))
	cols := `id, prev_state, prev_attempts, state, attempt_count, max_attempts, next_attempt_at, updated_at,
				delivered_at, dead_lettered_at, last_error`
	if ending {
		cols += `, fold_started_at, fold_status_code, fold_latency_us, fold_response_body`
	}
	query := `WITH c AS MATERIALIZED (
			SELECT $1::text AS tenant_id, u.* FROM unnest($2::uuid[], $3::text[], $4::int[], $5::text[], $6::int[], $7::int[],
				$8::timestamptz[], $9::timestamptz[], $10::timestamptz[], $11::timestamptz[], $12::text[]` + foldColumns + `)
			AS u(` + cols + `)
		), d AS (
			UPDATE webhook_deliveries w SET state = c.state, attempt_count = c.attempt_count, max_attempts = c.max_attempts,
				next_attempt_at = c.next_attempt_at, updated_at = c.updated_at, delivered_at = c.delivered_at,
				dead_lettered_at = c.dead_lettered_at, last_error = c.last_error` + foldSet + `
			FROM c
			WHERE w.tenant_id = c.tenant_id AND w.id = c.id AND w.state = c.prev_state AND w.attempt_count = c.prev_attempts
				AND w.id = ANY($2::uuid[]) ` + bounds + `
			RETURNING w.id
		)` + inserts + `
		SELECT id FROM d`
	return q.collectSaved(ctx, query, args...)
}

// collectSaved runs one of SaveWebhookDeliveriesIf's statements and returns
// the ids it saved.
func (q *queries) collectSaved(ctx context.Context, query string, args ...any) ([]uuid.UUID, error) {
	rows, _ := q.db.Query(ctx, query, args...)
	saved, err := pgx.CollectRows(rows, rowToUUID)
	if err != nil {
		return nil, fmt.Errorf("saving webhook deliveries: %w", err)
	}
	return saved, nil
}

// startAttempts is SaveWebhookDeliveriesIf's statement for attempts started
// at one instant ($5), each as domain.WebhookDelivery.StartAttempt computes
// it: DELIVERING, the next attempt, no next time. The delivery's other
// fields stay as stored (StartAttempt does not change them). Its plan is
// the general statement's (c MATERIALIZED, w.id = ANY($2), w.id within
// the ids' bounds $6 and $7).
const startAttempts = `WITH c AS MATERIALIZED (
		SELECT $1::text AS tenant_id, u.* FROM unnest($2::uuid[], $3::text[], $4::int[]) AS u(id, prev_state, prev_attempts)
	)
	UPDATE webhook_deliveries w SET state = 'DELIVERING', attempt_count = c.prev_attempts + 1, next_attempt_at = NULL,
		updated_at = $5::timestamptz
	FROM c
	WHERE w.tenant_id = c.tenant_id AND w.id = c.id AND w.state = c.prev_state AND w.attempt_count = c.prev_attempts
		AND w.id = ANY($2::uuid[]) AND w.id BETWEEN $6::uuid AND $7::uuid
	RETURNING w.id`

// uniformStarts reports whether changes (attempts started) fit
// startAttempts: each is StartAttempt's change at the first one's instant.
func uniformStarts(changes []domain.WebhookDeliveryChange) bool {
	at := changes[0].Delivery.UpdatedAt
	for _, c := range changes {
		d := c.Delivery
		if d.AttemptCount != c.PrevAttempts+1 || d.NextAttemptAt != nil || !d.UpdatedAt.Equal(at) ||
			(c.PrevState != domain.WebhookDeliveryPending && c.PrevState != domain.WebhookDeliveryRetrying) {
			return false
		}
	}
	return true
}

// recordSuccesses is SaveWebhookDeliveriesIf's statement for attempts that
// succeeded, each ended at one instant ($8) as domain.WebhookDelivery.Succeed
// computes it: DELIVERED then, no error, no next time, the attempt kept in
// the row (its start, status, latency and response; $3 its number). The
// delivery's other fields stay as stored.
const recordSuccesses = `WITH c AS MATERIALIZED (
		SELECT $1::text AS tenant_id, u.* FROM unnest($2::uuid[], $3::int[], $4::timestamptz[], $5::int[], $6::bigint[], $7::text[])
		AS u(id, attempt_count, started_at, status_code, latency_us, response_body)
	)
	UPDATE webhook_deliveries w SET state = 'DELIVERED', delivered_at = $8::timestamptz, updated_at = $8::timestamptz,
		next_attempt_at = NULL, last_error = '', attempt_started_at = c.started_at, attempt_status_code = c.status_code,
		attempt_latency_us = c.latency_us, attempt_response_body = c.response_body
	FROM c
	WHERE w.tenant_id = c.tenant_id AND w.id = c.id AND w.state = 'DELIVERING' AND w.attempt_count = c.attempt_count
		AND w.id = ANY($2::uuid[]) AND w.id BETWEEN $9::uuid AND $10::uuid
	RETURNING w.id`

// uniformSuccesses reports whether changes (attempts ended) fit
// recordSuccesses: each is Succeed's change at the first one's instant,
// of the attempt under way, which ended then.
func uniformSuccesses(changes []domain.WebhookDeliveryChange) bool {
	at := changes[0].Delivery.DeliveredAt
	if at == nil {
		return false
	}
	for _, c := range changes {
		d, a := c.Delivery, c.Attempt
		if a.Outcome != domain.WebhookAttemptSucceeded || d.State != domain.WebhookDeliveryDelivered ||
			c.PrevState != domain.WebhookDeliveryDelivering || d.AttemptCount != c.PrevAttempts ||
			d.DeliveredAt == nil || !d.DeliveredAt.Equal(*at) || !d.UpdatedAt.Equal(*at) ||
			a.FinishedAt == nil || !a.FinishedAt.Equal(*at) || d.LastError != "" || d.NextAttemptAt != nil {
			return false
		}
	}
	return true
}

// attemptInserts is the part of SaveWebhookDeliveriesIf's statement that
// inserts the rows of the attempts of changes[failed] (those that did not
// succeed), with their arrays appended to args ($17 on). It joins d, so
// that only the attempts of the deliveries the compare and set moved are
// inserted: their attempt is this run's, so that no row of it can exist
// yet.
func attemptInserts(changes []domain.WebhookDeliveryChange, failed []int, args *[]any) string {
	n := len(failed)
	var (
		ids                            = make(uuidParams, n)
		numbers                        = make([]int32, n)
		outcomes, classes, errs, texts = make(textParams, n), make(textParams, n), make(textParams, n), make(textParams, n)
		startedAt                      = make(timeParams, n)
		finishedAt                     = make([]*time.Time, n)
		statuses                       = make([]*int32, n)
		latencies                      = make([]*int64, n)
	)
	for j, i := range failed {
		a := changes[i].Attempt
		ids[j], numbers[j], outcomes[j], startedAt[j], finishedAt[j] = changes[i].Delivery.ID, int32(a.Number), string(a.Outcome), a.StartedAt, a.FinishedAt
		classes[j], errs[j], texts[j] = a.ErrorClass, a.Error, a.ResponseBody
		statuses[j], latencies[j] = statusCode(a), latencyUs(a)
	}
	*args = append(*args, ids, numbers, outcomes, startedAt, finishedAt, statuses, latencies, classes, errs, texts)
	return `, a AS (
			INSERT INTO webhook_delivery_attempts (delivery_id, ` + attemptColumns + `)
			SELECT x.id, x.number, x.outcome, x.started_at, x.finished_at, x.status_code, x.latency_us, x.error_class,
				x.error, x.response_body
			FROM unnest($17::uuid[], $18::int[], $19::text[], $20::timestamptz[], $21::timestamptz[], $22::int[],
				$23::bigint[], $24::text[], $25::text[], $26::text[])
				AS x(id, number, outcome, started_at, finished_at, status_code, latency_us, error_class, error, response_body)
			JOIN d ON d.id = x.id
		)`
}

// statusCode is a's status code as stored: NULL without a response.
func statusCode(a domain.WebhookDeliveryAttempt) *int32 {
	if a.StatusCode == nil {
		return nil
	}
	code := int32(*a.StatusCode)
	return &code
}

// statusCodeParam is statusCode as an element of nullIntParams.
func statusCodeParam(a domain.WebhookDeliveryAttempt) pgtype.Int8 {
	if a.StatusCode == nil {
		return pgtype.Int8{}
	}
	return pgtype.Int8{Int64: int64(*a.StatusCode), Valid: true}
}

// latencyParam is latencyUs as an element of nullIntParams.
func latencyParam(a domain.WebhookDeliveryAttempt) pgtype.Int8 {
	return pgtype.Int8{Int64: a.Latency.Microseconds(), Valid: true}
}

// latencyUs is a's latency as stored, in microseconds.
func latencyUs(a domain.WebhookDeliveryAttempt) *int64 {
	us := a.Latency.Microseconds()
	return &us
}

// WebhookBatchSendContext reads, in one round trip, what first attempts of
// deliveries to one destination need: the destination with its valid sealed
// secrets, the deliveries and their events (by id). Deliveries or events
// the tenant does not have are simply absent.
//
// The events are read recorded within the times of the delivery ids
// (fanoutRecordedRange), so that the partitions of audit_events that cannot
// hold them are pruned; an event not found there (the delivery of a
// replay, whose id is of its own time) is read again by the same statement
// without bounds, in a second round trip.
func (q *queries) WebhookBatchSendContext(ctx context.Context, tenantID string, destinationID uuid.UUID, deliveryIDs, eventIDs []uuid.UUID, now time.Time) (domain.WebhookBatchSendContext, error) {
	var out domain.WebhookBatchSendContext
	b := &pgx.Batch{}
	b.Queue(dbsqlc.GetWebhookDestination, tenantID, destinationID)
	b.Queue(dbsqlc.ValidWebhookDestinationSecrets, destinationID, now)
	lo, hi := idBounds(deliveryIDs)
	b.Queue(dbsqlc.BatchSendWebhookDeliveries, tenantID, uuidParams(deliveryIDs), destinationID, lo, hi)
	from, to := fanoutRecordedRange(deliveryIDs)
	b.Queue(dbsqlc.FindAuditEventsByID, tenantID, uuidParams(eventIDs), from, to)
	br := q.db.SendBatch(ctx, b)
	defer br.Close()
	rows, _ := br.Query()
	d, err := pgx.CollectExactlyOneRow(rows, scanDestination)
	if errors.Is(err, pgx.ErrNoRows) {
		return out, ErrNotFound
	}
	if err != nil {
		return out, fmt.Errorf("reading webhook destination: %w", err)
	}
	out.Destination = d
	rows, _ = br.Query()
	out.Secrets, err = pgx.CollectRows(rows, scanSecret)
	if err != nil {
		return out, fmt.Errorf("reading webhook secrets: %w", err)
	}
	// At most one row per id: the slices are allocated once, at their
	// size, not grown row by row (copying the large event structs).
	// The rows' repeated text values are shared (batch_scan.go).
	seen := textInterner{}
	rows, _ = br.Query()
	if out.Deliveries, err = pgx.AppendRows(make([]domain.WebhookDelivery, 0, len(deliveryIDs)), rows, newDeliveryBatchScanner(seen).scan); err != nil {
		return out, fmt.Errorf("reading webhook deliveries: %w", err)
	}
	rows, _ = br.Query()
	events, err := pgx.AppendRows(make([]domain.AuditEvent, 0, len(eventIDs)), rows, newEventBatchScanner(seen, len(eventIDs)).scan)
	if err != nil {
		return out, fmt.Errorf("reading events of webhook deliveries: %w", err)
	}
	out.Events = make(map[uuid.UUID]*domain.AuditEvent, len(events))
	for i := range events {
		out.Events[events[i].ID] = &events[i]
	}
	if err := br.Close(); err != nil {
		return out, err
	}
	var missing []uuid.UUID
	for _, id := range eventIDs {
		if out.Events[id] == nil && !slices.Contains(missing, id) {
			missing = append(missing, id)
		}
	}
	if len(missing) == 0 {
		return out, nil
	}
	rows, _ = q.db.Query(ctx, dbsqlc.FindAuditEventsByID, tenantID, uuidParams(missing), nil, nil)
	more, err := pgx.CollectRows(rows, scanAuditEvent)
	if err != nil {
		return out, fmt.Errorf("reading events of webhook deliveries: %w", err)
	}
	for i := range more {
		out.Events[more[i].ID] = &more[i]
	}
	return out, nil
}

// fanoutRecordedRange is the times [from, to) within which the events of
// fan-out deliveries with ids ids were recorded: a fan-out delivery's id is
// a UUIDv7 of its event's recording, to the millisecond
// (domain.FanoutDeliveryID).
func fanoutRecordedRange(ids []uuid.UUID) (from, to time.Time) {
	var lo, hi int64
	for i, id := range ids {
		ms := int64(id[0])<<40 | int64(id[1])<<32 | int64(id[2])<<24 | int64(id[3])<<16 | int64(id[4])<<8 | int64(id[5])
		if i == 0 || ms < lo {
			lo = ms
		}
		if i == 0 || ms > hi {
			hi = ms
		}
	}
	return time.UnixMilli(lo), time.UnixMilli(hi + 1)
}

// FanOutWebhookSubscriptions returns the subscriptions of tenant/project
// that may want events with sequences in [from, to]: created before to, and
// active or disabled after from (at most limit).
func (q *queries) FanOutWebhookSubscriptions(ctx context.Context, tenantID, projectID string, from, to uint64, limit int) ([]domain.WebhookSubscription, error) {
	rows, err := q.sqlc.FanOutWebhookSubscriptions(ctx, dbsqlc.FanOutWebhookSubscriptionsParams{
		TenantID: tenantID, ProjectID: projectID, FromSequence: clampInt64(from), ToSequence: clampInt64(to),
		RowLimit: int64(limit)})
	if err != nil {
		return nil, fmt.Errorf("listing webhook subscriptions to fan out to: %w", err)
	}
	return subscriptionsFromRows(rows), nil
}
