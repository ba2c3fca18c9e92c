package fastpath

import (
	"slices"
	"strings"

	"github.com/vektah/gqlparser/v2/ast"
)

// inputsRead are the arguments and input fields the fast paths read, by
// owner: "Type.field" for a field's arguments, the input type's name for
// its fields. A schema with other ones (an argument added, say) would have
// the paths serve operations whose meaning they do not know, so New turns
// a path off when its schema does not match: the executor then serves
// everything, and TestSchemaInputFieldsServed fails until the path learns
// the new input.
var inputsRead = map[string][]string{
	"Query.auditEvents":               {"projectId", "filter", "first", "after", "order"},
	"Subscription.auditEventRecorded": {"projectId", "afterSequence", "filter"},
	"Mutation.recordAuditEvent":       {"input"},
	"Mutation.recordAuditEvents":      {"input"},
	"AuditEventFilter":                {"action", "subjectId", "resourceType", "resourceId", "outcome", "occurredFrom", "occurredTo", "sequenceFrom", "sequenceTo", "recordedBySubject", "correlation"},
	"AuditCorrelationFilter":          {"traceId", "requestId", "causationId"},
	"RecordAuditEventsInput":          {"events", "idempotencyKey"},
	"RecordAuditEventInput":           {"projectId", "id", "action", "occurredAt", "subject", "resource", "outcome", "governance", "correlation", "evidenceDigests", "details"},
	"AuditSubjectInput":               {"type", "id", "displayName"},
	"AuditResourceInput":              {"type", "id"},
	"AuditGovernanceInput":            {"reason", "ticket", "risk", "confirmedBy"},
	"AuditCorrelationInput":           {"traceId", "requestId", "causationId"},
	"EvidenceDigestInput":             {"algorithm", "value", "label"},
}

// defaultsRead are the default values the fast paths apply themselves.
var defaultsRead = map[string]string{
	"Query.auditEvents.order": "OLDEST_FIRST",
}

// readsSchema reports whether the arguments and input fields of owners in
// schema are exactly those the fast paths read, with no default values but
// those they apply.
func readsSchema(schema *ast.Schema, owners ...string) bool {
	for _, owner := range owners {
		var names []string
		var defaults []*ast.Value
		if typ, field, isField := strings.Cut(owner, "."); isField {
			def := schema.Types[typ]
			if def == nil || def.Fields.ForName(field) == nil {
				return false
			}
			for _, a := range def.Fields.ForName(field).Arguments {
				names, defaults = append(names, a.Name), append(defaults, a.DefaultValue)
			}
		} else {
			def := schema.Types[owner]
			if def == nil || def.Kind != ast.InputObject {
				return false
			}
			for _, f := range def.Fields {
				names, defaults = append(names, f.Name), append(defaults, f.DefaultValue)
			}
		}
		read := inputsRead[owner]
		if len(names) != len(read) {
			return false
		}
		for i, name := range names {
			if !slices.Contains(read, name) {
				return false
			}
			want, applied := defaultsRead[owner+"."+name]
			if defaults[i] == nil && applied || defaults[i] != nil && (!applied || defaults[i].String() != want) {
				return false
			}
		}
	}
	return true
}
