package fastpath

import (
	"context"
	"encoding/json"
	"io"
	"strconv"
	"sync"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/graph/scalar"
)

// AroundRootFields is a root field interceptor (handler.Server's
// AroundRootFields) that serves Query.auditEvents without gqlgen's per-field
// execution. A page of 100 events selects some 3,000 fields, and resolving
// each through the generic executor (a context, closures and boxed values
// per field) costs several times the query itself. Every field of an audit
// event page is a plain value, so this path runs the same use case and
// writes the page straight from the selection set, collected once per page
// (fragments, aliases and @skip/@include handled by gqlgen's
// CollectFields).
//
// It produces byte for byte what the generic executor produces and steps
// aside to it whenever it would not: for any other field, arguments it
// cannot read, or an error of the use case, which the generic path then
// reports in the usual way.
func (p *Paths) AroundRootFields(ctx context.Context, next graphql.RootResolver) graphql.Marshaler {
	rfc := graphql.GetRootFieldContext(ctx)
	if !p.pagesOn || rfc == nil || rfc.Field.Field == nil || rfc.Field.ObjectDefinition == nil || rfc.Field.ObjectDefinition.Name != "Query" ||
		rfc.Field.Name != "auditEvents" || len(rfc.Field.Directives) > 0 {
		return next(ctx)
	}
	oc := graphql.GetOperationContext(ctx)
	in, ok := auditEventsArgs(rfc.Field.Field, oc.Variables)
	if !ok {
		return next(ctx)
	}
	w := &pageWriter{oc: oc}
	if !w.plan(rfc.Field.Selections) {
		return next(ctx)
	}
	// Each event is written as its row arrives, straight from the row's
	// buffer, into one pooled buffer that the response then copies.
	buf := pageBuffers.Get().(*[]byte)
	edges := (*buf)[:0]
	info, err := p.cfg.App.VisitAuditEvents(ctx, app.IdentityFromContext(ctx), in, func(e *domain.AuditEvent) error {
		if len(edges) > 0 {
			edges = append(edges, ',')
		}
		edges = w.appendEdge(edges, in.Order, e)
		return nil
	})
	if err != nil {
		putPageBuffer(buf, edges)
		return next(ctx)
	}
	p.pages.Add(1)
	return graphql.WriterFunc(func(out io.Writer) {
		w.writeConnection(out, edges, &info)
		putPageBuffer(buf, edges)
	})
}

// pageBuffers holds the buffers pages are written into.
var pageBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}

// maxPooledPageBuffer is the largest buffer kept for another page: a page of
// 500 events with large details is not kept.
const maxPooledPageBuffer = 1 << 20

// putPageBuffer returns the buffer, grown to b, to the pool.
func putPageBuffer(buf *[]byte, b []byte) {
	if cap(b) > maxPooledPageBuffer {
		return
	}
	*buf = b[:0]
	pageBuffers.Put(buf)
}

// auditEventsArgs reads the arguments of auditEvents as the generated code
// would; ok is false for anything unexpected.
func auditEventsArgs(field *ast.Field, vars map[string]any) (in app.SearchAuditEventsInput, ok bool) {
	ok = readArgs(field, vars, func(args map[string]any) bool {
		if !projectAndFilter(args, &in.ProjectID, &in.Filter) {
			return false
		}
		if v, present := args["first"]; present && v != nil {
			n, ok := toInt(v)
			if !ok {
				return false
			}
			in.First = &n
		}
		if v, present := args["after"]; present && v != nil {
			var ok bool
			if in.After, ok = v.(string); !ok {
				return false
			}
		}
		switch args["order"] {
		case nil, "OLDEST_FIRST":
		case "NEWEST_FIRST":
			in.Order = domain.NewestFirst
		default:
			return false
		}
		return true
	})
	return in, ok
}

func filterArgs(f map[string]any, out *app.AuditEventFilterInput) bool {
	for k, v := range f {
		if v == nil {
			continue
		}
		var ok bool
		switch k {
		case "action":
			out.Action, ok = v.(string)
		case "subjectId":
			out.SubjectID, ok = v.(string)
		case "recordedBySubject":
			out.RecordedBySubject, ok = v.(string)
		case "correlation":
			var c map[string]any
			if c, ok = v.(map[string]any); ok {
				ok = correlationFilterArgs(c, out)
			}
		case "resourceType":
			out.ResourceType, ok = v.(string)
		case "resourceId":
			out.ResourceID, ok = v.(string)
		case "outcome":
			list, isList := v.([]any)
			ok = isList
			for _, o := range list {
				outcome, valid := enumValue(o, domain.Outcome.Valid)
				if !valid {
					return false
				}
				out.Outcomes = append(out.Outcomes, outcome)
			}
		case "occurredFrom", "occurredTo":
			t, err := graphql.UnmarshalTime(v)
			if ok = err == nil; ok {
				if k == "occurredFrom" {
					out.OccurredFrom = &t
				} else {
					out.OccurredTo = &t
				}
			}
		case "sequenceFrom", "sequenceTo":
			n, err := scalar.UnmarshalUint64(v)
			if ok = err == nil; ok {
				if k == "sequenceFrom" {
					out.SequenceFrom = &n
				} else {
					out.SequenceTo = &n
				}
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// correlationFilterArgs reads AuditCorrelationFilter's fields.
func correlationFilterArgs(c map[string]any, out *app.AuditEventFilterInput) bool {
	for k, v := range c {
		if v == nil {
			continue
		}
		s, ok := v.(string)
		if !ok {
			return false
		}
		switch k {
		case "traceId":
			out.TraceID = s
		case "requestId":
			out.RequestID = s
		case "causationId":
			out.CausationID = s
		default:
			return false
		}
	}
	return true
}

func toInt(v any) (int, bool) {
	switch n := v.(type) {
	case int:
		return n, true
	case int64:
		return int(n), int64(int(n)) == n
	case json.Number:
		i, err := strconv.Atoi(string(n))
		return i, err == nil
	case float64:
		return int(n), float64(int(n)) == n
	}
	return 0, false
}
