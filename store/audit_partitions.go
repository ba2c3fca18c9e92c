package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/store/dbsqlc"
)

// audit_events is range-partitioned by month of recorded_at (migration
// 00022), and a project's recorded_at never goes back (domain.ChainHead.
// Append), so each month's partition holds one run of each project's
// sequences. audit_project_segments records where each run starts; every
// read by sequence (pages, verification ranges, exports, the live
// catch-up, the webhook fan-out) carries the recorded_at bounds of one run
// at a time, so that each statement prunes, when it is planned, to the one
// partition that holds the run and reads its index as it would read an
// unpartitioned table's: the plan does not depend on statistics of the
// other partitions (docs/architecture.md, "Partitioned audit history").

var (
	// unboundedBefore and unboundedAfter bound the recorded_at of a run
	// whose start or end time is unknown (the events stored before
	// partitioning; the newest run of a head that knows no time). They are
	// finite, so that they are plain parameters that prune at planning.
	unboundedBefore = time.Time{}.UTC()
	unboundedAfter  = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)
)

// auditSegment is a run of a project's sequences, first through last, all
// recorded in [from, to).
type auditSegment struct {
	first, last uint64
	from, to    time.Time
}

// auditSegments returns the runs of tenant/project's sequences, in order:
// none for a project without events. The newest run ends at the head's
// sequence as read, but its last is left open (a later append of the same
// month belongs to it); its to is the month after the head's.
//
// Each run is returned with recorded_at bounds that lie in one partition,
// so that every statement by sequence reads exactly one partition: a plan
// over several (an Append) is what goes wrong without fresh statistics
// (docs/architecture.md, "Query plans without fresh statistics"). A run
// that starts at a recorded month holds only that month's events (an
// append that moves the project into another month starts a new run), so
// its bounds end with the month. A run with no recorded start (events
// stored before partitioning, or loaded without their runs) is cut at
// every partition bound within it (auditPartitionBounds): it becomes
// several runs, in time order, each of which carries the whole run's
// sequences (which of them each part holds is not known).
func (q *queries) auditSegments(ctx context.Context, tenantID, projectID string) ([]auditSegment, error) {
	rows, err := q.sqlc.AuditProjectSegments(ctx, dbsqlc.AuditProjectSegmentsParams{TenantID: tenantID, ProjectID: projectID})
	if err != nil {
		return nil, fmt.Errorf("reading audit segments: %w", err)
	}
	if len(rows) == 0 || rows[len(rows)-1].FirstSequence <= 1 {
		// No head, or a head with no events.
		return nil, nil
	}
	segs := make([]auditSegment, 0, len(rows))
	if rows[0].Head || rows[0].FirstSequence > 1 {
		// Events before the first recorded run: stored before
		// partitioning, anywhere before the run that follows.
		segs = append(segs, auditSegment{first: 1, from: unboundedBefore})
	}
	for _, r := range rows {
		if n := len(segs); n > 0 {
			segs[n-1].last = uint64(r.FirstSequence) - 1
			if !r.Head {
				segs[n-1].to = r.RecordedFrom
			}
		}
		if r.Head {
			last := &segs[len(segs)-1]
			last.last = 1<<63 - 1
			last.to = unboundedAfter
			if !r.RecordedFrom.IsZero() && r.RecordedFrom.After(unboundedBefore) {
				last.to = monthStart(r.RecordedFrom).AddDate(0, 1, 0)
			}
			break
		}
		segs = append(segs, auditSegment{first: uint64(r.FirstSequence), from: r.RecordedFrom})
	}
	var open bool
	for i := range segs {
		if s := &segs[i]; s.from.Equal(unboundedBefore) {
			open = true
		} else if end := monthStart(s.from).AddDate(0, 1, 0); s.to.After(end) {
			// The project recorded nothing in the months up to the next
			// run (it would have started one): they are not read.
			s.to = end
		}
	}
	if !open {
		return segs, nil
	}
	bounds, err := q.auditPartitionBounds(ctx)
	if err != nil {
		return nil, err
	}
	return splitSegments(segs, bounds), nil
}

// splitSegments cuts each run of segs that starts at unboundedBefore at
// every instant of bounds (ascending) within its recorded_at bounds.
func splitSegments(segs []auditSegment, bounds []time.Time) []auditSegment {
	out := make([]auditSegment, 0, len(segs)+len(bounds))
	for _, s := range segs {
		if !s.from.Equal(unboundedBefore) {
			out = append(out, s)
			continue
		}
		for _, b := range bounds {
			if b.After(s.from) && b.Before(s.to) {
				part := s
				part.to = b
				out = append(out, part)
				s.from = b
			}
		}
		out = append(out, s)
	}
	return out
}

// auditPartitionBoundsSQL lists the instants at which a partition of
// audit_events starts or ends, ascending (MINVALUE and MAXVALUE are not
// instants; the DEFAULT partition has no bounds). Hand-written, not in
// queries/: sqlc does not know pg_inherits.
const auditPartitionBoundsSQL = `SELECT DISTINCT b.at FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid,
    LATERAL (VALUES (substring(pg_get_expr(c.relpartbound, c.oid) FROM 'FROM \(''([^'']+)''\)')::timestamptz),
        (substring(pg_get_expr(c.relpartbound, c.oid) FROM 'TO \(''([^'']+)''\)')::timestamptz)) AS b(at)
WHERE i.inhparent = 'audit_events'::regclass AND b.at IS NOT NULL
ORDER BY b.at`

// auditPartitionBounds returns the instants at which a partition of
// audit_events starts or ends, ascending: between two consecutive ones,
// recorded_at lies in one partition (a bounded one, or the DEFAULT one).
func (q *queries) auditPartitionBounds(ctx context.Context) ([]time.Time, error) {
	rows, err := q.db.Query(ctx, auditPartitionBoundsSQL)
	if err != nil {
		return nil, fmt.Errorf("reading audit partition bounds: %w", err)
	}
	bounds, err := pgx.CollectRows(rows, pgx.RowTo[time.Time])
	if err != nil {
		return nil, fmt.Errorf("reading audit partition bounds: %w", err)
	}
	return bounds, nil
}

// segmentsIn calls fn for each run that holds sequences in [from, to], in
// ascending order (or descending when desc), with the run's sequences
// narrowed to [from, to], until fn returns false or an error.
func segmentsIn(segs []auditSegment, from, to uint64, desc bool, fn func(s auditSegment) (bool, error)) error {
	for i := range segs {
		s := segs[i]
		if desc {
			s = segs[len(segs)-1-i]
		}
		if s.last < from || s.first > to {
			continue
		}
		s.first, s.last = max(s.first, from), min(s.last, to)
		more, err := fn(s)
		if err != nil || !more {
			return err
		}
	}
	return nil
}

// monthStart is the first instant of t's month, in UTC: the lower bound
// of t's partition.
func monthStart(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}

// CreateAuditPartitions creates the monthly partitions of audit_events
// that do not exist yet through the month of through, through the
// SECURITY DEFINER function of migration 00022, and returns how many it
// created.
func (s *Store) CreateAuditPartitions(ctx context.Context, through time.Time) (int, error) {
	n, err := s.queries.sqlc.CreateAuditPartitions(ctx, through)
	if err != nil {
		return 0, fmt.Errorf("creating audit partitions: %w", err)
	}
	return int(n), nil
}

// CreatePastAuditPartitions creates the monthly partitions of audit_events
// from the month of from through the month of through, past months
// included, that no partition covers yet, and returns how many it created:
// what a load of old history (an import, the scale benchmark) needs before
// it writes, so that no event lands in the DEFAULT partition. It goes
// through the SECURITY DEFINER function of migration 00026, which only the
// owner (the login that migrates) may execute: the runtime role gets an
// insufficient_privilege error. A range of more than 240 months, one that
// ends more than ten years ahead, or one that ends before it starts, is
// refused (invalid_parameter_value).
func (s *Store) CreatePastAuditPartitions(ctx context.Context, from, through time.Time) (int, error) {
	n, err := s.queries.sqlc.CreatePastAuditPartitions(ctx, dbsqlc.CreatePastAuditPartitionsParams{FromTime: from, Through: through})
	if err != nil {
		return 0, fmt.Errorf("creating past audit partitions: %w", err)
	}
	return int(n), nil
}

// expiredAuditPartitionsSQL lists the bounded partitions of audit_events
// whose upper bound is at or before $1, oldest first. Hand-written, not in
// queries/: sqlc does not know pg_inherits.
const expiredAuditPartitionsSQL = `SELECT c.relname::text,
    COALESCE(substring(pg_get_expr(c.relpartbound, c.oid) FROM 'FROM \(''([^'']+)''\)')::timestamptz, '0001-01-01 00:00:00+00'),
    substring(pg_get_expr(c.relpartbound, c.oid) FROM 'TO \(''([^'']+)''\)')::timestamptz AS upper_bound
FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
WHERE i.inhparent = 'audit_events'::regclass AND pg_get_expr(c.relpartbound, c.oid) <> 'DEFAULT'
  AND substring(pg_get_expr(c.relpartbound, c.oid) FROM 'TO \(''([^'']+)''\)')::timestamptz <= $1
ORDER BY upper_bound`

// ExpiredAuditPartitions returns the bounded partitions of audit_events
// whose every event was recorded before cutoff, oldest first.
func (s *Store) ExpiredAuditPartitions(ctx context.Context, cutoff time.Time) ([]domain.AuditPartition, error) {
	rows, err := s.pool.Query(ctx, expiredAuditPartitionsSQL, cutoff)
	if err != nil {
		return nil, fmt.Errorf("listing expired audit partitions: %w", err)
	}
	parts, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (domain.AuditPartition, error) {
		var p domain.AuditPartition
		err := row.Scan(&p.Name, &p.From, &p.To)
		p.From, p.To = p.From.UTC(), p.To.UTC()
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("listing expired audit partitions: %w", err)
	}
	return parts, nil
}

// MaxAuditRetentionDays returns the longest retention any tenant's
// override sets, 0 when none does.
func (q *queries) MaxAuditRetentionDays(ctx context.Context) (int, error) {
	days, err := q.sqlc.MaxAuditRetentionDays(ctx)
	if err != nil {
		return 0, fmt.Errorf("reading the longest audit retention: %w", err)
	}
	return int(days), nil
}

// PurgeAuditPartition moves, in the transaction, the purged prefix of each
// project over its events of partition p, all recorded before cutoff,
// through aether_purge_audit_partition (migration 00022), without deleting
// them (DropAuditPartition does, at once), and dead-letters the webhook
// deliveries of those events still to be sent. A project whose events in p
// do not follow its purged prefix is skipped (the prefix delete purges its
// older events first). It returns one purge per project whose prefix moved.
func (t *Tx) PurgeAuditPartition(ctx context.Context, p domain.AuditPartition, cutoff, now time.Time) ([]domain.AuditPurge, error) {
	rows, err := t.sqlc.PurgeAuditPartition(ctx, dbsqlc.PurgeAuditPartitionParams{FromTime: p.From, ToTime: p.To, Cutoff: cutoff})
	if err != nil {
		return nil, fmt.Errorf("purging audit partition %s: %w", p.Name, err)
	}
	out := make([]domain.AuditPurge, len(rows))
	for i, r := range rows {
		out[i] = domain.AuditPurge{TenantID: r.TenantID, ProjectID: r.ProjectID, From: uint64(r.PurgeFrom),
			Through: uint64(r.PurgeThrough), Count: r.Purged, Cutoff: p.To}
		copy(out[i].ThroughHash[:], r.ThroughHash)
		if out[i].DeadLettered, err = t.DeadLetterPurgedWebhookDeliveries(ctx, r.TenantID, r.ProjectID, now); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// DropAuditPartition detaches and drops the partition name of audit_events
// through aether_drop_audit_partition (migration 00022), if every event in
// it lies within its project's purged prefix, waiting at most lockTimeout
// for its locks; it reports whether it did.
func (s *Store) DropAuditPartition(ctx context.Context, name string, lockTimeout time.Duration) (bool, error) {
	dropped, err := s.sqlc.DropAuditPartition(ctx, dbsqlc.DropAuditPartitionParams{Name: name, LockTimeout: lockTimeout})
	if err != nil {
		return false, fmt.Errorf("dropping audit partition %s: %w", name, err)
	}
	return dropped, nil
}
