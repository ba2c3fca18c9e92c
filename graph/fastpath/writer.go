package fastpath

import (
	"encoding/hex"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/google/uuid"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
)

// pageWriter writes one connection for a fixed selection. The fields of
// each object type are collected once by plan and compiled into
// plannedFields: each response key encoded once, each field a kind the
// writer switches on. Events are appended to a byte slice with no
// allocation per event.
type pageWriter struct {
	oc         *graphql.OperationContext
	connection []plannedField
	edge       []plannedField
	pageInfo   []plannedField
	event      []plannedField
	subject    []plannedField
	resource   []plannedField
	governance []plannedField
	correl     []plannedField
	recorder   []plannedField
	digest     []plannedField
}

// plannedField is one field of an object's selection: its key, written
// with the comma before it when it is not the object's first (`,"alias":`),
// and what it writes.
type plannedField struct {
	key  string
	kind fieldKind
	// typename is the JSON string of the object's type, for __typename.
	typename string
}

// fieldKind is what a plannedField writes.
type fieldKind uint8

// The kinds of fields: __typename, then those of each object type.
const (
	fTypename fieldKind = iota
	fEdges
	fPageInfo
	fCursor
	fNode
	fHasNextPage
	fEndCursor
	fID
	fTenantID
	fProjectID
	fSequence
	fAction
	fOccurredAt
	fRecordedAt
	fSubject
	fResource
	fOutcome
	fGovernance
	fCorrelation
	fEvidenceDigests
	fDetails
	fChainHash
	fChainVersion
	fRecordedBy
	fType
	fDisplayName
	fReason
	fTicket
	fRisk
	fConfirmedBy
	fTraceID
	fRequestID
	fCausationID
	fIssuer
	fTokenID
	fClientID
	fAlgorithm
	fValue
	fLabel
	fRecorderSubject
)

// The fields each object type may select, and their kinds.
var (
	connectionKinds = map[string]fieldKind{"edges": fEdges, "pageInfo": fPageInfo}
	edgeKinds       = map[string]fieldKind{"cursor": fCursor, "node": fNode}
	pageInfoKinds   = map[string]fieldKind{"hasNextPage": fHasNextPage, "endCursor": fEndCursor}
	eventKinds      = map[string]fieldKind{"id": fID, "tenantId": fTenantID, "projectId": fProjectID, "sequence": fSequence,
		"action": fAction, "occurredAt": fOccurredAt, "recordedAt": fRecordedAt, "subject": fSubject, "resource": fResource,
		"outcome": fOutcome, "governance": fGovernance, "correlation": fCorrelation, "evidenceDigests": fEvidenceDigests,
		"details": fDetails, "chainHash": fChainHash, "chainVersion": fChainVersion, "recordedBy": fRecordedBy}
	subjectKinds    = map[string]fieldKind{"type": fType, "id": fID, "displayName": fDisplayName}
	resourceKinds   = map[string]fieldKind{"type": fType, "id": fID}
	governanceKinds = map[string]fieldKind{"reason": fReason, "ticket": fTicket, "risk": fRisk, "confirmedBy": fConfirmedBy}
	correlKinds     = map[string]fieldKind{"traceId": fTraceID, "requestId": fRequestID, "causationId": fCausationID}
	recorderKinds   = map[string]fieldKind{"issuer": fIssuer, "subject": fRecorderSubject, "tokenId": fTokenID, "clientId": fClientID}
	digestKinds     = map[string]fieldKind{"algorithm": fAlgorithm, "value": fValue, "label": fLabel}
)

// plan collects the selection of every object type on the page; it fails on
// any field it does not know.
func (w *pageWriter) plan(sel ast.SelectionSet) bool {
	var ok bool
	var fields []graphql.CollectedField
	if w.connection, fields, ok = w.collect(sel, "AuditEventConnection", connectionKinds); !ok {
		return false
	}
	for _, f := range fields {
		switch f.Name {
		case "edges":
			var edges []graphql.CollectedField
			if w.edge, edges, ok = w.collect(f.Selections, "AuditEventEdge", edgeKinds); !ok {
				return false
			}
			for _, e := range edges {
				if e.Name == "node" && !w.planEvent(e.Selections) {
					return false
				}
			}
		case "pageInfo":
			if w.pageInfo, _, ok = w.collect(f.Selections, "PageInfo", pageInfoKinds); !ok {
				return false
			}
		}
	}
	return true
}

// collect returns the fields of set on an object of type typ, compiled, and
// as collected. It fails on any field not in kinds, on directives other
// than @skip and @include, and when a composite field appears under two
// response keys: the writer keeps one plan per object type. A response key
// collected twice is written once, as its first field.
func (w *pageWriter) collect(set ast.SelectionSet, typ string, kinds map[string]fieldKind) ([]plannedField, []graphql.CollectedField, bool) {
	fields := graphql.CollectFields(w.oc, set, []string{typ})
	seen := map[string]bool{}
	planned := make([]plannedField, 0, len(fields))
	keys := map[string]bool{}
	for _, f := range fields {
		kind, found := kinds[f.Name]
		if f.Name == "__typename" {
			kind, found = fTypename, true
		}
		if !found || len(f.Directives) > 0 && !onlySkipInclude(f.Directives) {
			return nil, nil, false
		}
		if len(f.Selections) > 0 {
			if seen[f.Name] {
				return nil, nil, false
			}
			seen[f.Name] = true
		}
		if keys[f.Alias] {
			continue
		}
		keys[f.Alias] = true
		key := appendString(nil, f.Alias)
		if len(planned) > 0 {
			key = append([]byte{','}, key...)
		}
		planned = append(planned, plannedField{key: string(append(key, ':')), kind: kind, typename: string(appendString(nil, typ))})
	}
	return planned, fields, true
}

// planEvent collects the selection of an audit event and its objects.
func (w *pageWriter) planEvent(sel ast.SelectionSet) bool {
	var ok bool
	var fields []graphql.CollectedField
	if w.event, fields, ok = w.collect(sel, "AuditEvent", eventKinds); !ok {
		return false
	}
	for _, f := range fields {
		switch f.Name {
		case "subject":
			w.subject, _, ok = w.collect(f.Selections, "AuditSubject", subjectKinds)
		case "resource":
			w.resource, _, ok = w.collect(f.Selections, "AuditResource", resourceKinds)
		case "governance":
			w.governance, _, ok = w.collect(f.Selections, "AuditGovernance", governanceKinds)
		case "correlation":
			w.correl, _, ok = w.collect(f.Selections, "AuditCorrelation", correlKinds)
		case "recordedBy":
			w.recorder, _, ok = w.collect(f.Selections, "AuditRecorder", recorderKinds)
		case "evidenceDigests":
			w.digest, _, ok = w.collect(f.Selections, "EvidenceDigest", digestKinds)
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
// key once, values written by value. (The mutation payloads, once per
// request; the events are compiled.)
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

// appendEdge appends the edge of e, with its cursor in order.
func (w *pageWriter) appendEdge(b []byte, order domain.SortOrder, e *domain.AuditEvent) []byte {
	b = append(b, '{')
	for i := range w.edge {
		f := &w.edge[i]
		b = append(b, f.key...)
		switch f.kind {
		case fTypename:
			b = append(b, f.typename...)
		case fCursor:
			b = append(b, '"')
			b = app.AppendCursor(b, order, e.Sequence)
			b = append(b, '"')
		case fNode:
			b = w.appendEvent(b, e)
		}
	}
	return append(b, '}')
}

// writeConnection writes the connection whose edges appendEdge wrote into
// edges, comma separated.
func (w *pageWriter) writeConnection(out io.Writer, edges []byte, info *app.AuditEventPageInfo) {
	b := make([]byte, 0, 256)
	b = append(b, '{')
	for i := range w.connection {
		f := &w.connection[i]
		b = append(b, f.key...)
		switch f.kind {
		case fTypename:
			b = append(b, f.typename...)
		case fEdges:
			b = append(b, '[')
			_, _ = out.Write(b)
			_, _ = out.Write(edges)
			b = append(b[:0], ']')
		case fPageInfo:
			b = w.appendPageInfo(b, info)
		}
	}
	b = append(b, '}')
	_, _ = out.Write(b)
}

func (w *pageWriter) appendPageInfo(b []byte, info *app.AuditEventPageInfo) []byte {
	b = append(b, '{')
	for i := range w.pageInfo {
		f := &w.pageInfo[i]
		b = append(b, f.key...)
		switch f.kind {
		case fTypename:
			b = append(b, f.typename...)
		case fHasNextPage:
			b = strconv.AppendBool(b, info.HasNextPage)
		case fEndCursor:
			if info.EndCursor == "" {
				b = append(b, "null"...)
			} else {
				b = appendString(b, info.EndCursor)
			}
		}
	}
	return append(b, '}')
}

// writeEvent writes the event as appendEvent does.
func (w *pageWriter) writeEvent(out io.Writer, e *domain.AuditEvent) {
	_, _ = out.Write(w.appendEvent(make([]byte, 0, 1024), e))
}

// appendEvent appends the selected fields of e.
func (w *pageWriter) appendEvent(b []byte, e *domain.AuditEvent) []byte {
	b = append(b, '{')
	for i := range w.event {
		f := &w.event[i]
		b = append(b, f.key...)
		switch f.kind {
		case fTypename:
			b = append(b, f.typename...)
		case fID:
			b = appendUUID(b, e.ID)
		case fTenantID:
			b = appendString(b, e.TenantID)
		case fProjectID:
			b = appendString(b, e.ProjectID)
		case fSequence:
			b = append(b, '"')
			b = strconv.AppendUint(b, e.Sequence, 10)
			b = append(b, '"')
		case fAction:
			b = appendString(b, e.Action)
		case fOccurredAt:
			b = appendTime(b, e.OccurredAt)
		case fRecordedAt:
			b = appendTime(b, e.RecordedAt)
		case fSubject:
			b = w.appendSubject(b, &e.Subject)
		case fResource:
			b = w.appendResource(b, &e.Resource)
		case fOutcome:
			b = appendString(b, string(e.Outcome))
		case fGovernance:
			b = w.appendGovernance(b, e.Governance)
		case fCorrelation:
			b = w.appendCorrelation(b, e.Correlation)
		case fEvidenceDigests:
			b = append(b, '[')
			for j := range e.EvidenceDigests {
				if j > 0 {
					b = append(b, ',')
				}
				b = w.appendDigest(b, &e.EvidenceDigests[j])
			}
			b = append(b, ']')
		case fDetails:
			if len(e.Details) == 0 {
				b = append(b, "{}"...)
			} else {
				b = append(b, e.Details...)
			}
		case fChainHash:
			b = append(b, '"')
			b = hex.AppendEncode(b, e.ChainHash[:])
			b = append(b, '"')
		case fChainVersion:
			b = strconv.AppendInt(b, int64(e.ChainVersion), 10)
		case fRecordedBy:
			b = w.appendRecorder(b, e.RecordedBy)
		default:
			panic(fmt.Sprintf("fastpath: unplanned AuditEvent field kind %d", f.kind)) // plan refuses unknown fields
		}
	}
	return append(b, '}')
}

func (w *pageWriter) appendSubject(b []byte, s *domain.Subject) []byte {
	b = append(b, '{')
	for i := range w.subject {
		f := &w.subject[i]
		b = append(b, f.key...)
		switch f.kind {
		case fTypename:
			b = append(b, f.typename...)
		case fType:
			b = appendString(b, string(s.Type))
		case fID:
			b = appendString(b, s.ID)
		case fDisplayName:
			b = appendString(b, s.DisplayName)
		}
	}
	return append(b, '}')
}

func (w *pageWriter) appendResource(b []byte, r *domain.Resource) []byte {
	b = append(b, '{')
	for i := range w.resource {
		f := &w.resource[i]
		b = append(b, f.key...)
		switch f.kind {
		case fTypename:
			b = append(b, f.typename...)
		case fType:
			b = appendString(b, r.Type)
		case fID:
			b = appendString(b, r.ID)
		}
	}
	return append(b, '}')
}

func (w *pageWriter) appendGovernance(b []byte, g *domain.Governance) []byte {
	if g == nil {
		return append(b, "null"...)
	}
	b = append(b, '{')
	for i := range w.governance {
		f := &w.governance[i]
		b = append(b, f.key...)
		switch f.kind {
		case fTypename:
			b = append(b, f.typename...)
		case fReason:
			b = appendString(b, g.Reason)
		case fTicket:
			b = appendString(b, g.Ticket)
		case fRisk:
			b = appendString(b, string(g.Risk))
		case fConfirmedBy:
			b = appendString(b, g.ConfirmedBy)
		}
	}
	return append(b, '}')
}

func (w *pageWriter) appendCorrelation(b []byte, c *domain.Correlation) []byte {
	if c == nil {
		return append(b, "null"...)
	}
	b = append(b, '{')
	for i := range w.correl {
		f := &w.correl[i]
		b = append(b, f.key...)
		switch f.kind {
		case fTypename:
			b = append(b, f.typename...)
		case fTraceID:
			b = appendString(b, c.TraceID)
		case fRequestID:
			b = appendString(b, c.RequestID)
		case fCausationID:
			b = appendString(b, c.CausationID)
		}
	}
	return append(b, '}')
}

func (w *pageWriter) appendDigest(b []byte, d *domain.EvidenceDigest) []byte {
	b = append(b, '{')
	for i := range w.digest {
		f := &w.digest[i]
		b = append(b, f.key...)
		switch f.kind {
		case fTypename:
			b = append(b, f.typename...)
		case fAlgorithm:
			b = appendString(b, d.Algorithm)
		case fValue:
			b = appendString(b, d.Value)
		case fLabel:
			b = appendString(b, d.Label)
		}
	}
	return append(b, '}')
}

func (w *pageWriter) appendRecorder(b []byte, r *domain.Recorder) []byte {
	if r == nil {
		return append(b, "null"...)
	}
	b = append(b, '{')
	for i := range w.recorder {
		f := &w.recorder[i]
		b = append(b, f.key...)
		switch f.kind {
		case fTypename:
			b = append(b, f.typename...)
		case fIssuer:
			b = appendString(b, r.Issuer)
		case fRecorderSubject:
			b = appendString(b, r.Subject)
		case fTokenID:
			b = appendString(b, r.TokenID)
		case fClientID:
			b = appendString(b, r.ClientID)
		}
	}
	return append(b, '}')
}

// hexUpper is the digits of graphql.MarshalString's \u00XX escapes.
const hexUpper = "0123456789ABCDEF"

// appendString appends s as graphql.MarshalString writes it: quoted, with
// `"`, `\` and control characters escaped and every other byte as is.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '\\' && c != '"' {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '\t':
			b = append(b, `\t`...)
		case '\r':
			b = append(b, `\r`...)
		case '\n':
			b = append(b, `\n`...)
		case '\\':
			b = append(b, `\\`...)
		case '"':
			b = append(b, `\"`...)
		default:
			b = append(b, '\\', 'u', '0', '0', hexUpper[c>>4], hexUpper[c&0xf])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendTime appends t as graphql.MarshalTime writes it: null for the zero
// time, else RFC 3339 with nanoseconds, quoted.
func appendTime(b []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(b, "null"...)
	}
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

// appendUUID appends id as graphql.MarshalUUID writes it: null for the nil
// UUID, else its canonical text, quoted.
func appendUUID(b []byte, id uuid.UUID) []byte {
	if id == uuid.Nil {
		return append(b, "null"...)
	}
	b = append(b, '"')
	b = hex.AppendEncode(b, id[0:4])
	b = append(b, '-')
	b = hex.AppendEncode(b, id[4:6])
	b = append(b, '-')
	b = hex.AppendEncode(b, id[6:8])
	b = append(b, '-')
	b = hex.AppendEncode(b, id[8:10])
	b = append(b, '-')
	b = hex.AppendEncode(b, id[10:16])
	return append(b, '"')
}
