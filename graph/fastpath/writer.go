package fastpath

import (
	"fmt"
	"io"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/graph/scalar"
)

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
	recorder   []graphql.CollectedField
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
		"subject", "resource", "outcome", "governance", "correlation", "evidenceDigests", "details", "chainHash", "chainVersion", "recordedBy")
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
		case "recordedBy":
			w.recorder, ok = collect(f.Selections, "AuditRecorder", "issuer", "subject", "tokenId", "clientId")
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
		case "chainVersion":
			graphql.MarshalInt(e.ChainVersion).MarshalGQL(out)
		case "recordedBy":
			r := e.RecordedBy
			if r == nil {
				graphql.Null.MarshalGQL(out)
				return
			}
			object(out, "AuditRecorder", w.recorder, func(out io.Writer, f *graphql.CollectedField) {
				switch f.Name {
				case "issuer":
					str(r.Issuer)
				case "subject":
					str(r.Subject)
				case "tokenId":
					str(r.TokenID)
				case "clientId":
					str(r.ClientID)
				}
			})
		default:
			panic(fmt.Sprintf("fastpath: unplanned AuditEvent field %q", f.Name)) // plan refuses unknown fields
		}
	})
}
