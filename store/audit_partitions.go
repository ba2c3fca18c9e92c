package store

import (
	"context"
	"fmt"
	"time"

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
	return segs, nil
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

// segmentOf returns the run that holds seq, if any.
func segmentOf(segs []auditSegment, seq uint64) (auditSegment, bool) {
	for _, s := range segs {
		if s.first <= seq && seq <= s.last {
			return s, true
		}
	}
	return auditSegment{}, false
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
