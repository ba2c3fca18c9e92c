package graph

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/graph/scalar"
)

// AuditEventsFastPath is a root field interceptor that serves
// Query.auditEvents without gqlgen's per-field execution. A page of 100
// events selects some 3,000 fields, and resolving each through the generic
// executor (a context, closures and boxed values per field) costs several
// times the query itself. Every field of an audit event page is a plain
// value, so this path runs the same use case and writes the page straight
// from the selection set, collected once per page (fragments, aliases and
// @skip/@include handled by gqlgen's CollectFields).
//
// It produces byte for byte what the generic executor produces (a test
// holds the two equal over many selections) and steps aside to it whenever
// it would not: for any other field, arguments it cannot read, or an error
// of the use case, which the generic path then reports in the usual way.
func (r *Resolver) AuditEventsFastPath(ctx context.Context, next graphql.RootResolver) graphql.Marshaler {
	rfc := graphql.GetRootFieldContext(ctx)
	if rfc == nil || rfc.Field.Field == nil || rfc.Field.ObjectDefinition == nil || rfc.Field.ObjectDefinition.Name != "Query" ||
		rfc.Field.Name != "auditEvents" || len(rfc.Field.Directives) > 0 {
		return next(ctx)
	}
	oc := graphql.GetOperationContext(ctx)
	in, ok := auditEventsArgs(rfc.Field.Field, oc.Variables)
	if !ok {
		return next(ctx)
	}
	page, err := r.App.SearchAuditEvents(ctx, app.IdentityFromContext(ctx), in)
	if err != nil {
		return next(ctx)
	}
	w := &pageWriter{oc: oc}
	if !w.plan(rfc.Field.Selections) {
		return next(ctx)
	}
	r.fastPages.Add(1)
	return graphql.WriterFunc(func(out io.Writer) { w.writeConnection(out, &page) })
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

// pageWriter writes one connection for a fixed selection. The fields of
// each object type are collected once by plan.
type pageWriter struct {
	oc         *graphql.OperationContext
	connection []graphql.CollectedField
	edge       []graphql.CollectedField
	pageInfo   []graphql.CollectedField
	event      []graphql.CollectedField
	subject    []graphql.CollectedField
	resource   []graphql.CollectedField
	governance []graphql.CollectedField
	correl     []graphql.CollectedField
	digest     []graphql.CollectedField
}

// plan collects the selection of every object type on the page; it fails on
// any field it does not know.
func (w *pageWriter) plan(sel ast.SelectionSet) bool {
	collect := w.collect
	var ok bool
	if w.connection, ok = collect(sel, "AuditEventConnection", "edges", "pageInfo"); !ok {
		return false
	}
	for _, f := range w.connection {
		switch f.Name {
		case "edges":
			if w.edge, ok = collect(f.Selections, "AuditEventEdge", "cursor", "node"); !ok {
				return false
			}
			for _, e := range w.edge {
				if e.Name == "node" && !w.planEvent(e.Selections) {
					return false
				}
			}
		case "pageInfo":
			if w.pageInfo, ok = collect(f.Selections, "PageInfo", "hasNextPage", "endCursor"); !ok {
				return false
			}
		}
	}
	return true
}

// collect returns the fields of set on an object of type typ. It fails on
// any field not in known, on directives other than @skip and @include, and
// when a composite field appears under two response keys: the writer keeps
// one plan per object type.
func (w *pageWriter) collect(set ast.SelectionSet, typ string, known ...string) ([]graphql.CollectedField, bool) {
	fields := graphql.CollectFields(w.oc, set, []string{typ})
	seen := map[string]bool{}
	for _, f := range fields {
		if f.Name == "__typename" {
			continue
		}
		found := false
		for _, k := range known {
			found = found || f.Name == k
		}
		if !found || len(f.Directives) > 0 && !onlySkipInclude(f.Directives) {
			return nil, false
		}
		if len(f.Selections) > 0 {
			if seen[f.Name] {
				return nil, false
			}
			seen[f.Name] = true
		}
	}
	return fields, true
}

// planEvent collects the selection of an audit event and its objects.
func (w *pageWriter) planEvent(sel ast.SelectionSet) bool {
	collect := w.collect
	var ok bool
	w.event, ok = collect(sel, "AuditEvent", "id", "tenantId", "projectId", "sequence", "action", "occurredAt", "recordedAt",
		"subject", "resource", "outcome", "governance", "correlation", "evidenceDigests", "details", "chainHash")
	if !ok {
		return false
	}
	for _, f := range w.event {
		switch f.Name {
		case "subject":
			w.subject, ok = collect(f.Selections, "AuditSubject", "type", "id", "displayName")
		case "resource":
			w.resource, ok = collect(f.Selections, "AuditResource", "type", "id")
		case "governance":
			w.governance, ok = collect(f.Selections, "AuditGovernance", "reason", "ticket", "risk", "confirmedBy")
		case "correlation":
			w.correl, ok = collect(f.Selections, "AuditCorrelation", "traceId", "requestId", "causationId")
		case "evidenceDigests":
			w.digest, ok = collect(f.Selections, "EvidenceDigest", "algorithm", "value", "label")
		}
		if !ok {
			return false
		}
	}
	return true
}

func onlySkipInclude(dirs ast.DirectiveList) bool {
	for _, d := range dirs {
		if d.Name != "skip" && d.Name != "include" {
			return false
		}
	}
	return true
}

// object writes one object: its collected fields in order, each response
// key once, values written by value.
func object(out io.Writer, typ string, fields []graphql.CollectedField, value func(out io.Writer, f *graphql.CollectedField)) {
	_, _ = io.WriteString(out, "{")
	written := 0
	for i := range fields {
		f := &fields[i]
		dup := false
		for j := 0; j < i; j++ {
			dup = dup || fields[j].Alias == f.Alias
		}
		if dup {
			continue
		}
		if written > 0 {
			_, _ = io.WriteString(out, ",")
		}
		written++
		graphql.MarshalString(f.Alias).MarshalGQL(out)
		_, _ = io.WriteString(out, ":")
		if f.Name == "__typename" {
			graphql.MarshalString(typ).MarshalGQL(out)
			continue
		}
		value(out, f)
	}
	_, _ = io.WriteString(out, "}")
}

func (w *pageWriter) writeConnection(out io.Writer, page *app.AuditEventPage) {
	object(out, "AuditEventConnection", w.connection, func(out io.Writer, f *graphql.CollectedField) {
		switch f.Name {
		case "edges":
			_, _ = io.WriteString(out, "[")
			for i := range page.Edges {
				if i > 0 {
					_, _ = io.WriteString(out, ",")
				}
				edge := &page.Edges[i]
				object(out, "AuditEventEdge", w.edge, func(out io.Writer, f *graphql.CollectedField) {
					if f.Name == "cursor" {
						graphql.MarshalString(edge.Cursor).MarshalGQL(out)
						return
					}
					w.writeEvent(out, &edge.Event)
				})
			}
			_, _ = io.WriteString(out, "]")
		case "pageInfo":
			object(out, "PageInfo", w.pageInfo, func(out io.Writer, f *graphql.CollectedField) {
				if f.Name == "hasNextPage" {
					graphql.MarshalBoolean(page.HasNextPage).MarshalGQL(out)
					return
				}
				if page.EndCursor == "" {
					graphql.Null.MarshalGQL(out)
					return
				}
				graphql.MarshalString(page.EndCursor).MarshalGQL(out)
			})
		}
	})
}

func (w *pageWriter) writeEvent(out io.Writer, e *domain.AuditEvent) {
	str := func(s string) { graphql.MarshalString(s).MarshalGQL(out) }
	object(out, "AuditEvent", w.event, func(out io.Writer, f *graphql.CollectedField) {
		switch f.Name {
		case "id":
			graphql.MarshalUUID(e.ID).MarshalGQL(out)
		case "tenantId":
			str(e.TenantID)
		case "projectId":
			str(e.ProjectID)
		case "sequence":
			scalar.MarshalUint64(e.Sequence).MarshalGQL(out)
		case "action":
			str(e.Action)
		case "occurredAt":
			graphql.MarshalTime(e.OccurredAt).MarshalGQL(out)
		case "recordedAt":
			graphql.MarshalTime(e.RecordedAt).MarshalGQL(out)
		case "subject":
			object(out, "AuditSubject", w.subject, func(out io.Writer, f *graphql.CollectedField) {
				switch f.Name {
				case "type":
					graphql.MarshalString(string(e.Subject.Type)).MarshalGQL(out)
				case "id":
					str(e.Subject.ID)
				case "displayName":
					str(e.Subject.DisplayName)
				}
			})
		case "resource":
			object(out, "AuditResource", w.resource, func(out io.Writer, f *graphql.CollectedField) {
				if f.Name == "type" {
					str(e.Resource.Type)
				} else {
					str(e.Resource.ID)
				}
			})
		case "outcome":
			graphql.MarshalString(string(e.Outcome)).MarshalGQL(out)
		case "governance":
			g := e.Governance
			if g == nil {
				graphql.Null.MarshalGQL(out)
				return
			}
			object(out, "AuditGovernance", w.governance, func(out io.Writer, f *graphql.CollectedField) {
				switch f.Name {
				case "reason":
					str(g.Reason)
				case "ticket":
					str(g.Ticket)
				case "risk":
					graphql.MarshalString(string(g.Risk)).MarshalGQL(out)
				case "confirmedBy":
					str(g.ConfirmedBy)
				}
			})
		case "correlation":
			c := e.Correlation
			if c == nil {
				graphql.Null.MarshalGQL(out)
				return
			}
			object(out, "AuditCorrelation", w.correl, func(out io.Writer, f *graphql.CollectedField) {
				switch f.Name {
				case "traceId":
					str(c.TraceID)
				case "requestId":
					str(c.RequestID)
				case "causationId":
					str(c.CausationID)
				}
			})
		case "evidenceDigests":
			_, _ = io.WriteString(out, "[")
			for i := range e.EvidenceDigests {
				if i > 0 {
					_, _ = io.WriteString(out, ",")
				}
				d := &e.EvidenceDigests[i]
				object(out, "EvidenceDigest", w.digest, func(out io.Writer, f *graphql.CollectedField) {
					switch f.Name {
					case "algorithm":
						str(d.Algorithm)
					case "value":
						str(d.Value)
					case "label":
						str(d.Label)
					}
				})
			}
			_, _ = io.WriteString(out, "]")
		case "details":
			scalar.MarshalJSON(e.Details).MarshalGQL(out)
		case "chainHash":
			scalar.MarshalHash(e.ChainHash).MarshalGQL(out)
		default:
			panic(fmt.Sprintf("graph: unplanned AuditEvent field %q", f.Name)) // plan refuses unknown fields
		}
	})
}
