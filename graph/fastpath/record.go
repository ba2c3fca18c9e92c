package fastpath

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"time"

	"github.com/99designs/gqlgen/graphql"
	gojson "github.com/goccy/go-json"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/graph"
	"github.com/aetheriot/aether-audit/graph/model"
)

// invalidRecordPlan is the plan of a document that does not parse or
// validate: not eligible, and not cached.
var invalidRecordPlan = &recordPlan{}

// recordPlan is what a query document means for the fast path, computed once
// per document; eligible is false for documents it leaves to the executor.
type recordPlan struct {
	eligible bool
	name     string // the operation's name
	batch    bool   // recordAuditEvents rather than recordAuditEvent
	variable string // the variable holding the input
	field    *ast.Field
	payload  []graphql.CollectedField
	events   pageWriter // plans the payload's event selection
}

// TryServe serves the ingest mutations, recordAuditEvent and
// recordAuditEvents, without gqlgen's generic variable coercion, if the
// request is the fast path's to answer, and reports whether it did; when it
// returns false nothing was written. Coercing a batch of 500 events through
// the generic machinery (a map per object, reflection over every value,
// then the generated unmarshalling) costs several times recording the
// events. This path decodes the input variable straight into typed
// structs, strictly, and writes the payload from its selection set like
// AroundRootFields.
//
// It serves a request only when it is certain to answer exactly as the
// generic executor would: the document is a valid single mutation of one of
// those fields, taking its input from one variable, within the depth and
// complexity limits, and the variable decodes strictly (no unknown fields,
// no nulls for required ones, no coercions). Anything else, including every
// invalid input, goes the generic way, which reports it. Once it has called
// the use case it answers itself, errors included, so that a mutation never
// runs twice. Operation middlewares of the generic server do not see the
// requests it serves (see Config.OnServed).
func (p *Paths) TryServe(ctx context.Context, w io.Writer, query, operationName string, variables json.RawMessage) bool {
	var start time.Time
	if p.cfg.OnServed != nil {
		start = time.Now()
	}
	if !p.recordOn || !strings.Contains(query, "mutation") {
		return false // only mutations are planned: a query is not even looked up
	}
	plan := p.records.get(query, operationName)
	if !plan.eligible {
		return false
	}
	var vars map[string]gojson.RawMessage
	if len(variables) > 0 {
		if err := gojson.Unmarshal(variables, &vars); err != nil {
			return false
		}
	}
	raw, ok := vars[plan.variable]
	if !ok {
		return false
	}
	var inputs []fastEventInput
	key := ""
	if plan.batch {
		var in fastBatchInput
		if !strictDecode(raw, &in) || in.Events == nil {
			return false
		}
		inputs = *in.Events
		if in.IdempotencyKey != nil {
			key = *in.IdempotencyKey
		}
	} else {
		var in fastEventInput
		if !strictDecode(raw, &in) {
			return false
		}
		inputs = []fastEventInput{in}
	}
	models := make([]model.RecordAuditEventInput, len(inputs))
	for i := range inputs {
		m, ok := inputs[i].model()
		if !ok {
			return false
		}
		models[i] = m
	}

	// From here on the request is ours: the use case runs once.
	var (
		events []domain.AuditEvent
		err    error
	)
	id, traceID := app.IdentityFromContext(ctx), app.TraceIDFromContext(ctx)
	if plan.batch {
		in := app.RecordAuditEventsInput{Events: make([]domain.AuditEventDraft, len(models)), IdempotencyKey: key, TraceID: traceID}
		for i := range models {
			if in.Events[i], err = graph.DraftFromInput(graph.FieldIndex("events", i), models[i]); err != nil {
				break
			}
		}
		if err == nil {
			events, err = p.cfg.App.RecordAuditEvents(ctx, id, in)
		}
	} else {
		var d domain.AuditEventDraft
		if d, err = graph.DraftFromInput("", models[0]); err == nil {
			var e domain.AuditEvent
			e, err = p.cfg.App.RecordAuditEvent(ctx, id, d, traceID)
			events = []domain.AuditEvent{e}
		}
	}
	if err != nil {
		p.writeRecordError(ctx, w, plan, err)
	} else {
		p.writeRecordData(w, plan, events)
	}
	if p.cfg.OnServed != nil {
		p.cfg.OnServed(ctx, plan.name, err != nil, time.Since(start))
	}
	return true
}

func (p *Paths) makeRecordPlan(query, operationName string) *recordPlan {
	no := &recordPlan{}
	doc, op, field, ok, valid := p.documents.singleRootField(query, operationName, ast.Mutation)
	if !valid {
		return invalidRecordPlan
	}
	if !ok || len(op.VariableDefinitions) != 1 || len(field.Arguments) != 1 {
		return no
	}
	plan := &recordPlan{field: field, name: op.Name}
	vdef := op.VariableDefinitions[0]
	switch {
	case field.Name == "recordAuditEvents" && vdef.Type.String() == "RecordAuditEventsInput!":
		plan.batch = true
	case field.Name == "recordAuditEvent" && vdef.Type.String() == "RecordAuditEventInput!":
	default:
		return no
	}
	arg := field.Arguments[0]
	if arg.Name != "input" || arg.Value.Kind != ast.Variable || arg.Value.Raw != vdef.Variable {
		return no
	}
	plan.variable = vdef.Variable

	oc := &graphql.OperationContext{RawQuery: query, Doc: doc, Operation: op, Variables: map[string]any{}}
	payloadType, eventsField := "RecordAuditEventPayload", "event"
	if plan.batch {
		payloadType, eventsField = "RecordAuditEventsPayload", "events"
	}
	plan.payload = graphql.CollectFields(oc, field.SelectionSet, []string{payloadType})
	plan.events.oc = oc
	seen := false
	for _, f := range plan.payload {
		switch f.Name {
		case "__typename":
		case eventsField:
			if seen || len(f.Directives) > 0 {
				return no
			}
			seen = true
			if !plan.events.planEvent(f.Selections) {
				return no
			}
		default:
			return no
		}
	}
	plan.eligible = true
	return plan
}

// writeData writes the payload of a successful mutation.
func (p *Paths) writeRecordData(w io.Writer, plan *recordPlan, events []domain.AuditEvent) {
	payloadType := "RecordAuditEventPayload"
	if plan.batch {
		payloadType = "RecordAuditEventsPayload"
	}
	_, _ = io.WriteString(w, `{"data":{`)
	graphql.MarshalString(plan.field.Alias).MarshalGQL(w)
	_, _ = io.WriteString(w, ":")
	object(w, payloadType, plan.payload, func(w io.Writer, f *graphql.CollectedField) {
		if !plan.batch {
			plan.events.writeEvent(w, &events[0])
			return
		}
		_, _ = io.WriteString(w, "[")
		for i := range events {
			if i > 0 {
				_, _ = io.WriteString(w, ",")
			}
			plan.events.writeEvent(w, &events[i])
		}
		_, _ = io.WriteString(w, "]")
	})
	_, _ = io.WriteString(w, "}}")
}

// writeError writes a failed mutation as the executor would: the error at
// the field's path and location, with its code, and null data.
func (p *Paths) writeRecordError(ctx context.Context, w io.Writer, plan *recordPlan, err error) {
	appErr := app.ErrorOf(err)
	if appErr.Code == app.CodeInternal && p.cfg.Logger != nil {
		p.cfg.Logger.ErrorContext(ctx, "graphql resolver failed", "field", plan.field.Name, "err", err)
	}
	gqlErr := &gqlerror.Error{
		Message: appErr.Error(),
		Path:    ast.Path{ast.PathName(plan.field.Alias)},
		Locations: []gqlerror.Location{{
			Line: plan.field.Position.Line, Column: plan.field.Position.Column,
		}},
		Extensions: graph.AppErrorExtensions(appErr),
	}
	b, merr := json.Marshal(&graphql.Response{Errors: gqlerror.List{gqlErr}, Data: json.RawMessage("null")})
	if merr != nil {
		b = []byte(`{"errors":[{"message":"internal error","extensions":{"code":"INTERNAL"}}],"data":null}`)
	}
	_, _ = w.Write(b)
}
