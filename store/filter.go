package store

import (
	"strconv"
	"strings"
)

// filtered builds the one kind of SQL that is not static, and so not in
// queries/*.sql: a page of a filtered list, whose conditions depend on which
// filters the caller set. Every filtered query of the store goes through it
// (SearchAuditEvents, SearchWebhookDeliveries, ListDataExports), so they all
// take the same shape: a base SELECT keyed by tenant and project ($1, $2),
// one AND condition per filter set, each with its own parameter, then the
// order and a LIMIT parameter. Values are always parameters, never text in
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

// and adds the condition cond, in which $? stands for v's parameter.
func (f *filtered) and(cond string, v any) {
	f.args = append(f.args, v)
	before, after, ok := strings.Cut(cond, "$?")
	if !ok {
		panic("store: filter condition without $?: " + cond)
	}
	f.sb.WriteString(" AND ")
	f.sb.WriteString(before)
	f.sb.WriteByte('$')
	f.sb.WriteString(strconv.Itoa(len(f.args)))
	f.sb.WriteString(after)
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
