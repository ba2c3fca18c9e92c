package fastpath_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/executor"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/graph"
	"github.com/aetheriot/aether-audit/graph/fastpath"
	"github.com/aetheriot/aether-audit/graph/generated"
)

// The schema coverage test: every field, argument and input field of the
// schema (schema/*.graphqls) that a fast-pathed operation reaches must be
// handled by its fast path. A field that is not falls back to the executor:
// the answer stays right but the speed is lost, silently, which is how the
// fast paths used to drift. The test walks the schema itself, so a field
// added there is checked without anyone listing it.
//
// Output fields: each is selected (under an alias) on its own, under every
// fast-pathed root that reaches its type; the fast path must serve the
// operation and write the field.
//
// Arguments and input fields: each is given a value (or, when required, a
// second value) on its own; the fast path must serve both requests and the
// use case must receive different inputs, so that the value reached it. A
// field the fast path ignored would reach nothing; one it does not know
// makes it step aside.

// fastRoots are the fast-pathed operations.
var fastRoots = []struct {
	op    ast.Operation
	field string
}{
	{ast.Query, "auditEvents"},
	{ast.Mutation, "recordAuditEvent"},
	{ast.Mutation, "recordAuditEvents"},
	{ast.Subscription, "auditEventRecorded"},
}

// loadSchemaFiles parses schema/*.graphqls, the source of the contract.
func loadSchemaFiles(t *testing.T) *ast.Schema {
	t.Helper()
	files, err := filepath.Glob("../../schema/*.graphqls")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	var sources []*ast.Source
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		sources = append(sources, &ast.Source{Name: f, Input: string(b)})
	}
	schema, gqlErr := gqlparser.LoadSchema(sources...)
	require.Nil(t, gqlErr, "schema/*.graphqls")
	return schema
}

func rootField(t *testing.T, schema *ast.Schema, op ast.Operation, name string) *ast.FieldDefinition {
	t.Helper()
	var obj *ast.Definition
	switch op {
	case ast.Query:
		obj = schema.Query
	case ast.Mutation:
		obj = schema.Mutation
	case ast.Subscription:
		obj = schema.Subscription
	}
	require.NotNil(t, obj)
	f := obj.Fields.ForName(name)
	require.NotNil(t, f, "%s.%s is in the schema", obj.Name, name)
	return f
}

// fakeUseCases stands in for the use cases: it records the input of each
// call and answers with fixtureEvent, whose every optional part is set.
type fakeUseCases struct {
	mu   sync.Mutex
	last any
}

func (f *fakeUseCases) record(in any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.last = in
}

func (f *fakeUseCases) take() any {
	f.mu.Lock()
	defer f.mu.Unlock()
	in := f.last
	f.last = nil
	return in
}

func fixtureEvent() domain.AuditEvent {
	t := time.Date(2026, 11, 30, 12, 0, 0, 500, time.UTC)
	return domain.AuditEvent{
		ID: uuid.MustParse("0193f3c4-0000-7000-8000-000000000001"), TenantID: "t1", ProjectID: "p1", Sequence: 7,
		Action: "device.updated", OccurredAt: t, RecordedAt: t,
		Subject:         domain.Subject{Type: domain.SubjectUser, ID: "u1", DisplayName: "Ada"},
		Resource:        domain.Resource{Type: "device", ID: "d1"},
		Outcome:         domain.OutcomeSuccess,
		Governance:      &domain.Governance{Reason: "r", Ticket: "T-1", Risk: domain.RiskHigh, ConfirmedBy: "c"},
		Correlation:     &domain.Correlation{TraceID: "0af7651916cd43dd8448eb211c80319c", RequestID: "q", CausationID: "c"},
		EvidenceDigests: []domain.EvidenceDigest{{Algorithm: "sha256", Value: "ab", Label: "l"}},
		Details:         json.RawMessage(`{"a":1}`),
		ChainVersion:    domain.ChainVersionRecordedBy,
		RecordedBy:      &domain.Recorder{Issuer: "https://idp", Subject: "svc", TokenID: "j", ClientID: "cl"},
	}
}

func (f *fakeUseCases) VisitAuditEvents(_ context.Context, _ app.Identity, in app.SearchAuditEventsInput, fn func(*domain.AuditEvent) error) (app.AuditEventPageInfo, error) {
	f.record(in)
	e := fixtureEvent()
	if err := fn(&e); err != nil {
		return app.AuditEventPageInfo{}, err
	}
	return app.AuditEventPageInfo{HasNextPage: true, EndCursor: app.EncodeCursor(in.Order, e.Sequence)}, nil
}

func (f *fakeUseCases) RecordAuditEvent(_ context.Context, _ app.Identity, draft domain.AuditEventDraft, traceID string) (domain.AuditEvent, error) {
	f.record([]any{draft, traceID})
	return fixtureEvent(), nil
}

func (f *fakeUseCases) RecordAuditEvents(_ context.Context, _ app.Identity, in app.RecordAuditEventsInput) ([]domain.AuditEvent, error) {
	f.record(in)
	return []domain.AuditEvent{fixtureEvent()}, nil
}

func (f *fakeUseCases) SubscribeAuditEvents(_ context.Context, _ app.Identity, in app.SubscribeAuditEventsInput) (app.AuditEventStream, error) {
	f.record(in)
	return &fixtureStream{}, nil
}

// fixtureStream yields fixtureEvent once, then waits for the end.
type fixtureStream struct{ sent bool }

func (s *fixtureStream) Next(ctx context.Context) (*domain.AuditEvent, error) {
	if !s.sent {
		s.sent = true
		e := fixtureEvent()
		return &e, nil
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

func (s *fixtureStream) Close() {}

// coverageRig runs requests through the fast paths over fakeUseCases.
type coverageRig struct {
	uc    *fakeUseCases
	paths *fastpath.Paths
	exec  *executor.Executor
}

func newCoverageRig() *coverageRig {
	uc := &fakeUseCases{}
	es := generated.NewExecutableSchema(generated.Config{Resolvers: &graph.Resolver{}, Complexity: graph.Complexity()})
	paths := fastpath.New(fastpath.Config{App: uc, Schema: es, MaxDepth: 50, MaxComplexity: 1 << 30})
	exec := executor.New(es)
	exec.AroundRootFields(paths.AroundRootFields)
	exec.SetRecoverFunc(func(context.Context, any) error { return fmt.Errorf("the executor ran a resolver") })
	return &coverageRig{uc: uc, paths: paths, exec: exec}
}

// serve runs one operation of root through its fast path: served reports
// whether the fast path answered, out is the answer and in what the use
// case received.
func (r *coverageRig) serve(t *testing.T, op ast.Operation, query string, vars map[string]any) (served bool, out string, in any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(app.ContextWithIdentity(context.Background(), app.Identity{TenantID: "t1"}), 10*time.Second)
	defer cancel()
	r.uc.take()
	switch op {
	case ast.Query:
		before := r.paths.PagesServed()
		params := &graphql.RawParams{Query: query, Variables: vars, ReadTime: graphql.TraceTiming{Start: graphql.Now(), End: graphql.Now()}}
		ctx = graphql.StartOperationTrace(ctx)
		oc, errs := r.exec.CreateOperationContext(ctx, params)
		if errs != nil {
			return false, errs.Error(), r.uc.take() // a schema newer than the generated code, say
		}
		responses, ctx := r.exec.DispatchOperation(ctx, oc)
		resp := responses(ctx)
		b, err := json.Marshal(resp)
		require.NoError(t, err)
		return r.paths.PagesServed() > before, string(b), r.uc.take()
	case ast.Mutation:
		raw, err := json.Marshal(vars)
		require.NoError(t, err)
		var buf strings.Builder
		served := r.paths.TryServe(ctx, &buf, query, "", raw)
		return served, buf.String(), r.uc.take()
	default:
		sub, ok := r.paths.Open(ctx, &graphql.RawParams{Query: query, Variables: vars}, nil)
		if !ok {
			return false, "", r.uc.take()
		}
		defer sub.Close()
		payload, more := sub.Wait(ctx)
		require.True(t, more)
		return true, string(payload), r.uc.take()
	}
}

// TestSchemaOutputFieldsServed selects each output field a fast-pathed
// operation reaches, one at a time, and requires its fast path to serve and
// write it.
func TestSchemaOutputFieldsServed(t *testing.T) {
	schema := loadSchemaFiles(t)
	if unread := fastpath.UnreadInputs(schema); len(unread) > 0 {
		t.Fatalf("the fast paths are off while they do not read every input of their operations (see TestSchemaInputFieldsServed): %v", unread)
	}
	rig := newCoverageRig()
	checked := 0
	for _, root := range fastRoots {
		def := rootField(t, schema, root.op, root.field)
		args := argsOf(def)
		vars := buildArgs(t, schema, root.field, args, nil, nil)
		visited := map[string]bool{}
		var walk func(typ *ast.Definition, at string, wrap func(string) string)
		walk = func(typ *ast.Definition, at string, wrap func(string) string) {
			if visited[typ.Name] {
				return
			}
			visited[typ.Name] = true
			if typ.Kind != ast.Object {
				t.Errorf("%s: %s (at %s) is a %s: the fast path writes objects only; teach it and this test", root.field, typ.Name, at, typ.Kind)
				return
			}
			for _, f := range typ.Fields {
				if strings.HasPrefix(f.Name, "__") {
					continue
				}
				where := at + "." + f.Name
				for _, a := range f.Arguments {
					if a.Type.NonNull && a.DefaultValue == nil {
						t.Errorf("%s: field %s.%s (at %s) takes a required argument %s: teach the fast path and this test", root.field, typ.Name, f.Name, where, a.Name)
					}
				}
				fieldType := schema.Types[f.Type.Name()]
				sub := ""
				if fieldType.Kind != ast.Scalar && fieldType.Kind != ast.Enum {
					sub = " { __typename }"
				}
				probe := "probe_" + typ.Name + "_" + f.Name
				served, out, _ := rig.serve(t, root.op, operation(root.op, root.field, args, vars, wrap(probe+": "+f.Name+sub)), vars)
				checked++
				if !served {
					t.Errorf("%s: field %s.%s (at %s) is not handled by the fast path: the operation fell back to the executor", root.field, typ.Name, f.Name, where)
				} else if !strings.Contains(out, `"`+probe+`":`) || !json.Valid([]byte(out)) {
					t.Errorf("%s: field %s.%s (at %s) is not written by the fast path: %s", root.field, typ.Name, f.Name, where, out)
				}
				if sub != "" {
					name := f.Name
					walk(fieldType, where, func(inner string) string { return wrap(name + " { " + inner + " }") })
				}
			}
		}
		walk(schema.Types[def.Type.Name()], root.field, func(inner string) string { return inner })
	}
	require.Greater(t, checked, 40, "output fields checked")
}

// TestSchemaInputFieldsServed gives each argument and input field a
// fast-pathed operation takes a value of its own, and requires its fast
// path to serve the operation and pass the value on to the use case.
func TestSchemaInputFieldsServed(t *testing.T) {
	schema := loadSchemaFiles(t)
	if unread := fastpath.UnreadInputs(schema); len(unread) > 0 {
		// The paths are off (see New) until they read what the schema has.
		for _, u := range unread {
			t.Error(u)
		}
		return
	}
	rig := newCoverageRig()
	checked := 0
	for _, root := range fastRoots {
		def := rootField(t, schema, root.op, root.field)
		args := argsOf(def)
		selection := "__typename"
		if root.op == ast.Subscription {
			selection = "id"
		}
		try := func(vars map[string]any) (bool, any) {
			served, _, in := rig.serve(t, root.op, operation(root.op, root.field, args, vars, selection), vars)
			return served, in
		}
		var walk func(owner string, fields []inputField, path []inputStep)
		walk = func(owner string, fields []inputField, path []inputStep) {
			for _, f := range fields {
				where := root.field + "(" + pathString(path, f.name) + ")"
				coord := owner + "." + f.name
				base := buildArgs(t, schema, root.field, args, path, nil)
				with := buildArgs(t, schema, root.field, args, path, &leaf{f.name, sample(t, schema, coord, f.typ, 1)})
				checked++
				value := with
				for _, s := range path {
					if s.list {
						value = value[s.name].([]any)[0].(map[string]any)
					} else {
						value = value[s.name].(map[string]any)
					}
				}
				empty := reflect.DeepEqual(value[f.name], map[string]any{}) // as good as absent
				servedBase, inBase := try(base)
				servedWith, inWith := try(with)
				switch {
				case !servedBase:
					t.Errorf("%s: the fast path does not serve the operation without %s (at %s)", root.field, coord, where)
				case !servedWith:
					t.Errorf("%s: %s (at %s) is not handled by the fast path: given a value, the operation fell back to the executor", root.field, coord, where)
				case !empty && reflect.DeepEqual(inBase, inWith):
					t.Errorf("%s: %s (at %s) is not handled by the fast path: its value does not reach the use case", root.field, coord, where)
				}
				named := schema.Types[f.typ.Name()]
				if named.Kind == ast.Enum {
					for _, v := range named.EnumValues {
						var value any = v.Name
						if f.typ.Elem != nil {
							value = []any{v.Name}
						}
						if served, _ := try(buildArgs(t, schema, root.field, args, path, &leaf{f.name, value})); !served {
							t.Errorf("%s: value %s of %s (at %s) is not handled by the fast path", root.field, v.Name, coord, where)
						}
					}
				}
				if named.Kind == ast.InputObject {
					walk(named.Name, fieldsOf(named), append(append([]inputStep(nil), path...), inputStep{f.name, f.typ.Elem != nil, named}))
				}
			}
		}
		walk(root.field, args, nil)
	}
	require.Greater(t, checked, 30, "arguments and input fields checked")
}

// inputField is an argument or an input object's field.
type inputField struct {
	name       string
	typ        *ast.Type
	hasDefault bool
}

func (f inputField) required() bool { return f.typ.NonNull && !f.hasDefault }

func argsOf(def *ast.FieldDefinition) []inputField {
	var out []inputField
	for _, a := range def.Arguments {
		out = append(out, inputField{a.Name, a.Type, a.DefaultValue != nil})
	}
	return out
}

func fieldsOf(def *ast.Definition) []inputField {
	var out []inputField
	for _, f := range def.Fields {
		out = append(out, inputField{f.Name, f.Type, f.DefaultValue != nil})
	}
	return out
}

// inputStep is one step from the arguments down to an input field: the
// field name, whether its value is a list (of one object), and the object's
// type.
type inputStep struct {
	name string
	list bool
	def  *ast.Definition
}

func pathString(path []inputStep, name string) string {
	var parts []string
	for _, s := range path {
		parts = append(parts, s.name)
	}
	return strings.Join(append(parts, name), ".")
}

// leaf is a value to set at the end of a path.
type leaf struct {
	name  string
	value any
}

// buildArgs returns the arguments of root: its required arguments and input
// fields (sample values 0), each object on path present, and set, if not
// nil, set in the last of them.
func buildArgs(t *testing.T, schema *ast.Schema, root string, args []inputField, path []inputStep, set *leaf) map[string]any {
	top := requiredObject(t, schema, root, args, 0)
	cur := top
	for _, s := range path {
		v, ok := cur[s.name]
		if !ok {
			obj := requiredObject(t, schema, s.def.Name, fieldsOf(s.def), 0)
			v = obj
			if s.list {
				v = []any{obj}
			}
			cur[s.name] = v
		}
		if s.list {
			v = v.([]any)[0]
		}
		cur = v.(map[string]any)
	}
	if set != nil {
		cur[set.name] = set.value
	}
	return top
}

// requiredObject returns an input object (or arguments) holding its required
// fields only, as sample values of variant.
func requiredObject(t *testing.T, schema *ast.Schema, owner string, fields []inputField, variant int) map[string]any {
	obj := map[string]any{}
	for _, f := range fields {
		if f.required() {
			obj[f.name] = sample(t, schema, owner+"."+f.name, f.typ, variant)
		}
	}
	return obj
}

// sample returns a value of typ for the input field coord; variants 0 and 1
// differ.
func sample(t *testing.T, schema *ast.Schema, coord string, typ *ast.Type, variant int) any {
	if typ.Elem != nil {
		return []any{sample(t, schema, coord, typ.Elem, variant)}
	}
	if coord == "RecordAuditEventInput.id" {
		return []string{"0193f3c4-0000-7000-8000-00000000000a", "0193f3c4-0000-7000-8000-00000000000b"}[variant]
	}
	def := schema.Types[typ.Name()]
	switch def.Kind {
	case ast.Enum:
		return def.EnumValues[variant*(len(def.EnumValues)-1)].Name
	case ast.InputObject:
		return requiredObject(t, schema, def.Name, fieldsOf(def), variant)
	}
	switch def.Name {
	case "String":
		return []string{"a", "b"}[variant]
	case "ID":
		return []string{"p1", "p2"}[variant]
	case "Int":
		return 5 + variant
	case "Float":
		return 1.5 + float64(variant)
	case "Boolean":
		return variant == 1
	case "Time":
		return []string{"2026-11-30T12:00:00Z", "2026-12-01T12:00:00.5Z"}[variant]
	case "Uint64":
		return []string{"1", "2"}[variant]
	case "JSON":
		return map[string]any{"k": variant}
	}
	t.Fatalf("%s: no sample values for the scalar %s: add them to this test", coord, def.Name)
	return nil
}

// operation returns a document of op selecting root with selection, the
// arguments in vars passed as variables of their schema types.
func operation(op ast.Operation, root string, args []inputField, vars map[string]any, selection string) string {
	var decl, pass []string
	names := make([]string, 0, len(vars))
	for name := range vars {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		for _, a := range args {
			if a.name == name {
				decl = append(decl, "$"+name+": "+a.typ.String())
				pass = append(pass, name+": $"+name)
			}
		}
	}
	doc := string(op)
	if len(decl) > 0 {
		doc += "(" + strings.Join(decl, ", ") + ")"
	}
	doc += " { " + root
	if len(pass) > 0 {
		doc += "(" + strings.Join(pass, ", ") + ")"
	}
	return doc + " { " + selection + " } }"
}
