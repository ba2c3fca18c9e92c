package store

import (
	"context"
	"fmt"
	"time"

	"github.com/aetheriot/aether-audit/domain"
)

// timeExportPage is how many events of one run StreamAuditEventsByTime
// reads per statement when it merges runs.
const timeExportPage = 1000

// StreamAuditEventsByTime calls fn for each audit event of tenant/project
// with occurredAt in [from, to) that passes f (nil: every event), ordered by
// occurredAt then sequence, streaming rows from the server rather than
// loading them. The event fn gets borrows the row's buffer: it is valid only
// during the call, and fn must not keep it or anything in it.
//
// occurredAt is not the partition key: an event recorded in any month
// since from minus domain.MaxOccurredAtSkew may have occurred in the range.
// Every statement still reads one partition (auditSegment): with one run to
// read, the events stream from one statement; with several, each run is
// read in keyset pages of timeExportPage events by (occurredAt, sequence),
// and the runs' pages are merged in that order.
func (q *queries) StreamAuditEventsByTime(ctx context.Context, tenantID, projectID string, from, to time.Time, f *domain.AuditEventFilter, fn func(*domain.AuditEvent) error) error {
	segs, err := q.auditSegments(ctx, tenantID, projectID)
	if err != nil {
		return fmt.Errorf("streaming audit events: %w", err)
	}
	earliest := from.Add(-domain.MaxOccurredAtSkew)
	var runs []*timeRun
	for _, s := range segs {
		if s.to.After(earliest) {
			runs = append(runs, &timeRun{seg: s})
		}
	}
	if len(runs) == 1 {
		query, args := byTimeSQL(tenantID, projectID, from, to, f, runs[0].seg, nil, 0)
		return q.streamAuditEvents(ctx, fn, query, args...)
	}
	for {
		var next *timeRun
		for _, r := range runs {
			if err := q.fillTimeRun(ctx, r, tenantID, projectID, from, to, f); err != nil {
				return err
			}
			if r.i < len(r.buf) && (next == nil || r.buf[r.i].OccurredAt.Before(next.buf[next.i].OccurredAt) ||
				r.buf[r.i].OccurredAt.Equal(next.buf[next.i].OccurredAt) && r.buf[r.i].Sequence < next.buf[next.i].Sequence) {
				next = r
			}
		}
		if next == nil {
			return nil
		}
		e := &next.buf[next.i]
		next.i++
		if err := fn(e); err != nil {
			return err
		}
	}
}

// timeRun is the read position of StreamAuditEventsByTime in one run.
type timeRun struct {
	seg  auditSegment
	buf  []domain.AuditEvent
	i    int
	done bool
}

// fillTimeRun reads r's next page once its buffer is consumed.
func (q *queries) fillTimeRun(ctx context.Context, r *timeRun, tenantID, projectID string, from, to time.Time, f *domain.AuditEventFilter) error {
	if r.i < len(r.buf) || r.done {
		return nil
	}
	var after *domain.AuditEvent
	if len(r.buf) > 0 {
		last := r.buf[len(r.buf)-1]
		after = &last
	}
	query, args := byTimeSQL(tenantID, projectID, from, to, f, r.seg, after, timeExportPage)
	rows, err := q.db.Query(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("streaming audit events: %w", err)
	}
	r.buf = r.buf[:0]
	r.i = 0
	for rows.Next() {
		e, err := scanAuditEvent(rows)
		if err != nil {
			rows.Close()
			return fmt.Errorf("streaming audit events: %w", err)
		}
		r.buf = append(r.buf, e)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("streaming audit events: %w", err)
	}
	r.done = len(r.buf) < timeExportPage
	return nil
}

// byTimeSQL is the statement of one run of StreamAuditEventsByTime: the
// events of the run s that occurred in [from, to) and pass f, after the
// event after (nil: from the start), at most limit of them (0: all).
//
// Hand-written, not in queries/: its conditions depend on the filter.
func byTimeSQL(tenantID, projectID string, from, to time.Time, f *domain.AuditEventFilter, s auditSegment, after *domain.AuditEvent, limit int) (string, []any) {
	fq := newFiltered(`SELECT `+auditEventColumns+` FROM audit_events WHERE tenant_id = $1 AND project_id = $2`, tenantID, projectID)
	if f != nil {
		andAuditEventFilter(fq, *f)
	}
	fq.and("occurred_at >= $?", from)
	fq.and("occurred_at < $?", to)
	andSegment(fq, s)
	if after != nil {
		fq.and("(occurred_at, sequence) > ($?, $?)", after.OccurredAt, int64(after.Sequence))
	}
	if limit > 0 {
		return fq.page("occurred_at, sequence", limit)
	}
	return fq.ordered("occurred_at, sequence")
}
