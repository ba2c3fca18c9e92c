package graph

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"time"

	"github.com/99designs/gqlgen/graphql"
	gojson "github.com/goccy/go-json"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/graph/model"
)

// RecordFastPath serves the ingest mutations, recordAuditEvent and
// recordAuditEvents, without gqlgen's generic variable coercion. Coercing a
// batch of 500 events through the generic machinery (a map per object,
// reflection over every value, then the generated unmarshalling) costs
// several times recording the events. This path decodes the input variable
// straight into typed structs, strictly, and writes the payload from its
// selection set like AuditEventsFastPath.
//
// It serves a request only when it is certain to answer exactly as the
// generic executor would: the document is a valid single mutation of one of
// those fields, taking its input from one variable, within the depth and
// complexity limits, and the variable decodes strictly (no unknown fields,
// no nulls for required ones, no coercions). Anything else, including every
// invalid input, goes the generic way, which reports it. Once it has called
// the use case it answers itself, errors included, so that a mutation never
// runs twice. Operation middlewares of the generic server do not see the
// requests it serves.
type RecordFastPath struct {
	documents
	resolver *Resolver
	plans    *planCache[*recordPlan]
	// OnServed, if set, is called after each request the path served, with
	// the operation's name ("" when anonymous), whether it answered with an
	// error, and how long it took from TryServe's start: the generic
	// server's operation middlewares never see these requests.
	OnServed func(ctx context.Context, operationName string, failed bool, took time.Duration)
}

// NewRecordFastPath returns the fast path for es with the server's limits.
func NewRecordFastPath(r *Resolver, es graphql.ExecutableSchema, maxDepth, complexityLimit int) *RecordFastPath {
	p := &RecordFastPath{documents: documents{es, maxDepth, complexityLimit}, resolver: r}
	p.plans = newPlanCache(p.makePlan, func() *recordPlan { return &recordPlan{} })
	return p
}

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

// TryServe answers one GraphQL request if it is the fast path's to answer
// and reports whether it did; when it returns false nothing was written.
func (p *RecordFastPath) TryServe(ctx context.Context, w io.Writer, query, operationName string, variables json.RawMessage) bool {
	var start time.Time
	if p.OnServed != nil {
		start = time.Now()
	}
	plan := p.plans.get(query, operationName)
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
			if in.Events[i], err = draftFromInput(fieldIndex("events", i), models[i]); err != nil {
				break
			}
		}
		if err == nil {
			events, err = p.resolver.App.RecordAuditEvents(ctx, id, in)
		}
	} else {
		var d domain.AuditEventDraft
		if d, err = draftFromInput("", models[0]); err == nil {
			var e domain.AuditEvent
			e, err = p.resolver.App.RecordAuditEvent(ctx, id, d, traceID)
			events = []domain.AuditEvent{e}
		}
	}
	if err != nil {
		p.writeError(ctx, w, plan, err)
	} else {
		p.writeData(w, plan, events)
	}
	if p.OnServed != nil {
		p.OnServed(ctx, plan.name, err != nil, time.Since(start))
	}
	return true
}

func strictDecode(raw []byte, v any) bool {
	dec := gojson.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return false
	}
	return !dec.More()
}

func (p *RecordFastPath) makePlan(query, operationName string) *recordPlan {
	no := &recordPlan{}
	doc, op, field, ok := p.singleRootField(query, operationName, ast.Mutation)
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
func (p *RecordFastPath) writeData(w io.Writer, plan *recordPlan, events []domain.AuditEvent) {
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
func (p *RecordFastPath) writeError(ctx context.Context, w io.Writer, plan *recordPlan, err error) {
	appErr := app.ErrorOf(p.resolver.fail(ctx, err))
	gqlErr := &gqlerror.Error{
		Message: appErr.Error(),
		Path:    ast.Path{ast.PathName(plan.field.Alias)},
		Locations: []gqlerror.Location{{
			Line: plan.field.Position.Line, Column: plan.field.Position.Column,
		}},
		Extensions: AppErrorExtensions(appErr),
	}
	b, merr := json.Marshal(&graphql.Response{Errors: gqlerror.List{gqlErr}, Data: json.RawMessage("null")})
	if merr != nil {
		b = []byte(`{"errors":[{"message":"internal error","extensions":{"code":"INTERNAL"}}],"data":null}`)
	}
	_, _ = w.Write(b)
}

// AppErrorExtensions returns the extensions of a GraphQL error for a use
// case's error: its code, the offending input field when known, and for
// RATE_LIMITED the whole seconds to wait (retryAfterSeconds).
func AppErrorExtensions(appErr *app.Error) map[string]any {
	ext := map[string]any{"code": appErr.Code}
	if appErr.Field != "" {
		ext["field"] = appErr.Field
	}
	if appErr.RetryAfter > 0 {
		ext["retryAfterSeconds"] = app.RetryAfterSeconds(appErr.RetryAfter)
	}
	return ext
}

// The strict input shapes: every field a pointer, so that a null or missing
// required field is seen (and left to the executor to report).
type fastBatchInput struct {
	Events         *[]fastEventInput `json:"events"`
	IdempotencyKey *string           `json:"idempotencyKey"`
}

type fastEventInput struct {
	ProjectID       *string            `json:"projectId"`
	ID              *string            `json:"id"`
	Action          *string            `json:"action"`
	OccurredAt      *string            `json:"occurredAt"`
	Subject         *fastSubject       `json:"subject"`
	Resource        *fastResource      `json:"resource"`
	Outcome         *string            `json:"outcome"`
	Governance      *fastGovernance    `json:"governance"`
	Correlation     *fastCorrelation   `json:"correlation"`
	EvidenceDigests *[]*fastDigest     `json:"evidenceDigests"`
	Details         *gojson.RawMessage `json:"details"`
}

type fastSubject struct {
	Type        *string `json:"type"`
	ID          *string `json:"id"`
	DisplayName *string `json:"displayName"`
}

type fastResource struct {
	Type *string `json:"type"`
	ID   *string `json:"id"`
}

type fastGovernance struct {
	Reason      *string `json:"reason"`
	Ticket      *string `json:"ticket"`
	Risk        *string `json:"risk"`
	ConfirmedBy *string `json:"confirmedBy"`
}

type fastCorrelation struct {
	TraceID     *string `json:"traceId"`
	RequestID   *string `json:"requestId"`
	CausationID *string `json:"causationId"`
}

type fastDigest struct {
	Algorithm *string `json:"algorithm"`
	Value     *string `json:"value"`
	Label     *string `json:"label"`
}

// model converts the input as the generated unmarshalling would; ok is false
// where that would fail or coerce.
func (in *fastEventInput) model() (m model.RecordAuditEventInput, ok bool) {
	if in.ProjectID == nil || in.Action == nil || in.OccurredAt == nil || in.Subject == nil ||
		in.Resource == nil || in.Outcome == nil {
		return m, false
	}
	t, err := graphql.UnmarshalTime(*in.OccurredAt)
	if err != nil {
		return m, false
	}
	outcome, valid := enumValue(*in.Outcome, domain.Outcome.Valid)
	if !valid {
		return m, false
	}
	m = model.RecordAuditEventInput{ProjectID: *in.ProjectID, ID: in.ID, Action: *in.Action, OccurredAt: t, Outcome: outcome}
	s := in.Subject
	if s.Type == nil || s.ID == nil {
		return m, false
	}
	st, valid := enumValue(*s.Type, domain.SubjectType.Valid)
	if !valid {
		return m, false
	}
	m.Subject = &model.AuditSubjectInput{Type: st, ID: *s.ID, DisplayName: s.DisplayName}
	if in.Resource.Type == nil || in.Resource.ID == nil {
		return m, false
	}
	m.Resource = &model.AuditResourceInput{Type: *in.Resource.Type, ID: *in.Resource.ID}
	if g := in.Governance; g != nil {
		m.Governance = &model.AuditGovernanceInput{Reason: g.Reason, Ticket: g.Ticket, ConfirmedBy: g.ConfirmedBy}
		if g.Risk != nil {
			r, valid := enumValue(*g.Risk, domain.Risk.Valid)
			if !valid {
				return m, false
			}
			m.Governance.Risk = &r
		}
	}
	if c := in.Correlation; c != nil {
		m.Correlation = &model.AuditCorrelationInput{TraceID: c.TraceID, RequestID: c.RequestID, CausationID: c.CausationID}
	}
	if in.EvidenceDigests != nil {
		m.EvidenceDigests = make([]model.EvidenceDigestInput, 0, len(*in.EvidenceDigests))
		for _, d := range *in.EvidenceDigests {
			if d == nil || d.Algorithm == nil || d.Value == nil {
				return m, false
			}
			m.EvidenceDigests = append(m.EvidenceDigests, model.EvidenceDigestInput{Algorithm: *d.Algorithm, Value: *d.Value, Label: d.Label})
		}
	}
	if in.Details != nil {
		raw := []byte(*in.Details)
		if string(raw) != "null" {
			if len(raw) == 0 || raw[0] != '{' {
				return m, false // the JSON scalar takes objects only
			}
			m.Details = json.RawMessage(raw)
		}
	}
	return m, true
}
