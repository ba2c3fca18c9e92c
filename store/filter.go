package store

import (
	"strconv"
	"strings"

	"github.com/aetheriot/aether-audit/domain"
)

// filtered builds the one kind of SQL that is not static, and so not in
// queries/*.sql: a page of a filtered list, whose conditions depend on which
// filters the caller set, or the stream of a filtered export. Every filtered
// query of the store goes through it (SearchAuditEvents,
// SearchWebhookDeliveries, ListDataExports, and StreamAuditEventsByTime and
// StreamAuditEventsBySequence with a filter), so they all take the same
// shape: a base SELECT keyed by tenant and project ($1, $2), one AND
// condition per filter set, each with its own parameter, then the order and,
// for a page, a LIMIT parameter. Values are always parameters, never text in
// the statement.
type filtered struct {
	sb   strings.Builder
	args []any
}

// newFiltered starts a filtered query: base must end in a WHERE clause whose
// parameters are args.
func newFiltered(base string, args ...any) *filtered {
	f := &filtered{args: args}
	f.sb.WriteString(base)
	return f
}

// and adds the condition cond, in which each $? stands, in order, for the
// parameter of one of vs.
func (f *filtered) and(cond string, vs ...any) {
	f.sb.WriteString(" AND ")
	for _, v := range vs {
		before, after, ok := strings.Cut(cond, "$?")
		if !ok {
			panic("store: filter condition with fewer $? than values: " + cond)
		}
		f.args = append(f.args, v)
		f.sb.WriteString(before)
		f.sb.WriteByte('$')
		f.sb.WriteString(strconv.Itoa(len(f.args)))
		cond = after
	}
	if strings.Contains(cond, "$?") || len(vs) == 0 {
		panic("store: filter condition with more $? than values")
	}
	f.sb.WriteString(cond)
}

// ordered ends the query with ORDER BY orderBy and no LIMIT, for a stream,
// and returns it with its arguments.
func (f *filtered) ordered(orderBy string) (string, []any) {
	f.sb.WriteString(" ORDER BY ")
	f.sb.WriteString(orderBy)
	return f.sb.String(), f.args
}

// page ends the query with ORDER BY orderBy and a LIMIT of limit, and
// returns it with its arguments.
func (f *filtered) page(orderBy string, limit int) (string, []any) {
	f.args = append(f.args, limit)
	f.sb.WriteString(" ORDER BY ")
	f.sb.WriteString(orderBy)
	f.sb.WriteString(" LIMIT $")
	f.sb.WriteString(strconv.Itoa(len(f.args)))
	return f.sb.String(), f.args
}

// andAuditEventFilter adds the conditions of an audit event filter to a
// query of audit_events, one per condition set. It is the one translation
// of domain.AuditEventFilter into SQL (the in-memory twin is
// AuditEventFilter.Matches): the search (searchSQL) and the filtered export
// streams (filteredStream) both build their WHERE with it.
func andAuditEventFilter(fq *filtered, f domain.AuditEventFilter) {
	if a := f.Action; a != nil {
		if a.Prefix() != "" {
			// action is COLLATE "C": the prefix range is a plain byte range
			// ('/' follows '.'), served by the action index.
			fq.and("action >= $?", a.Prefix())
			fq.and("action < $?", strings.TrimSuffix(a.Prefix(), ".")+"/")
		} else {
			fq.and("action = $?", a.Exact())
		}
	}
	if f.SubjectID != "" {
		fq.and("subject_id = $?", f.SubjectID)
	}
	if f.RecordedBySubject != "" {
		fq.and("recorded_by_subject = $?", f.RecordedBySubject)
	}
	if f.TraceID != "" {
		fq.and("trace_id = $?", f.TraceID)
	}
	if f.RequestID != "" {
		fq.and("request_id = $?", f.RequestID)
	}
	if f.CausationID != "" {
		fq.and("causation_id = $?", f.CausationID)
	}
	if f.ResourceType != "" {
		fq.and("resource_type = $?", f.ResourceType)
	}
	if f.ResourceID != "" {
		fq.and("resource_id = $?", f.ResourceID)
	}
	if len(f.Outcomes) > 0 {
		outcomes := make([]string, len(f.Outcomes))
		for i, o := range f.Outcomes {
			outcomes[i] = string(o)
		}
		fq.and("outcome = ANY($?)", outcomes)
	}
	if f.OccurredFrom != nil {
		fq.and("occurred_at >= $?", *f.OccurredFrom)
	}
	if f.OccurredTo != nil {
		fq.and("occurred_at < $?", *f.OccurredTo)
	}
	if f.SequenceFrom != nil {
		fq.and("sequence >= $?", clampInt64(*f.SequenceFrom))
	}
	if f.SequenceTo != nil {
		fq.and("sequence <= $?", clampInt64(*f.SequenceTo))
	}
}
