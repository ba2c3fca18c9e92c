package fastpath_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"

	gojson "github.com/goccy/go-json"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
)

// The values of generated operations. Besides strings, numbers, booleans,
// nil and []any lists:
type (
	// enumLit is an enum value: bare in a literal, a string in JSON.
	enumLit string
	// numLit is a number written as given, in literals and JSON.
	numLit string
	// rawJSON is JSON written as given (variables only; literals decode it).
	rawJSON string
	// obj is an object with its members in order, duplicates allowed.
	obj []kv
)

type kv struct {
	k string
	v any
}

// encodeJSON writes v as JSON.
func encodeJSON(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case enumLit:
		return jsonString(string(v))
	case numLit:
		return string(v)
	case rawJSON:
		return string(v)
	case obj:
		parts := make([]string, len(v))
		for i, m := range v {
			parts[i] = jsonString(m.k) + ":" + encodeJSON(m.v)
		}
		return "{" + strings.Join(parts, ",") + "}"
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = encodeJSON(e)
		}
		return "[" + strings.Join(parts, ",") + "]"
	default:
		b, err := json.Marshal(v)
		if err != nil {
			panic(err)
		}
		return string(b)
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// literal writes v as a GraphQL literal.
func literal(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case enumLit:
		return string(v)
	case numLit:
		return string(v)
	case string:
		return jsonString(v)
	case rawJSON:
		var decoded any
		dec := gojson.NewDecoder(strings.NewReader(string(v)))
		dec.UseNumber()
		if err := dec.Decode(&decoded); err != nil {
			return "null"
		}
		return literal(fromDecoded(decoded))
	case obj:
		parts := make([]string, len(v))
		for i, m := range v {
			parts[i] = m.k + ": " + literal(m.v)
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = literal(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	default:
		return encodeJSON(v)
	}
}

func fromDecoded(v any) any {
	switch v := v.(type) {
	case map[string]any:
		var o obj
		for k, e := range v {
			o = append(o, kv{k, fromDecoded(e)})
		}
		return o
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = fromDecoded(e)
		}
		return out
	case json.Number:
		return numLit(v)
	}
	return v
}

// opGen generates operations. Most are valid, so that the fast paths serve
// them and their answers are compared; a wild one (one in four) also takes
// invalid values, types, directives and selections.
type opGen struct {
	r        *rand.Rand
	schema   *ast.Schema
	frags    []string
	usesB    bool // a directive takes $b
	wild     bool
	aliases  int
	flatFrom int // the depth from which selections prefer scalar fields
}

func (g *opGen) pick(options ...any) any { return options[g.r.IntN(len(options))] }
func (g *opGen) chance(n int) bool       { return g.r.IntN(n) == 0 }

// wildly is true, in a wild operation, one time in n.
func (g *opGen) wildly(n int) bool { return g.wild && g.chance(n) }

// v picks a valid value, or in a wild operation sometimes an invalid one.
func (g *opGen) v(valid []any, invalid ...any) any {
	if len(invalid) > 0 && g.wildly(3) {
		return invalid[g.r.IntN(len(invalid))]
	}
	return valid[g.r.IntN(len(valid))]
}

func (g *opGen) identity() app.Identity {
	switch g.r.IntN(20) {
	case 0:
		return diffReadOnly
	case 1:
		return diffP1Only
	}
	return diffWriter
}

// arg is an argument of the root field; absent ones are not passed.
type arg struct {
	name    string
	value   any
	present bool
}

// start begins an operation.
func (g *opGen) start(flatFrom int) {
	g.frags, g.usesB, g.aliases, g.flatFrom = nil, false, 0, flatFrom
	g.wild = g.chance(4)
}

// passArgs writes args as literals or variables: the argument list, the
// variable definitions and the variables' values.
func (g *opGen) passArgs(field *ast.FieldDefinition, args []arg) (list string, decls []string, vars obj) {
	var parts []string
	for _, a := range args {
		if !a.present {
			continue
		}
		if g.chance(2) {
			parts = append(parts, a.name+": "+literal(a.value))
			continue
		}
		typ := "String"
		if def := field.Arguments.ForName(a.name); def != nil {
			typ = def.Type.String()
		}
		if g.wildly(10) {
			typ = g.pick("String", "Int", typ+"!", "["+typ+"]", "Boolean!").(string)
		} else if !strings.HasSuffix(typ, "!") && g.chance(5) {
			typ += "!" // a non-null variable where a nullable one will do
		}
		name := "v_" + a.name
		decls = append(decls, "$"+name+": "+typ)
		parts = append(parts, a.name+": $"+name)
		switch {
		case g.wildly(10):
		case a.value == nil && g.chance(2):
		default:
			vars = append(vars, kv{name, a.value})
		}
	}
	if len(parts) > 0 {
		list = "(" + strings.Join(parts, ", ") + ")"
	}
	return list, decls, vars
}

// document assembles an operation and its variables.
func (g *opGen) document(op string, decls []string, roots string, vars obj) (query, opName, variables string) {
	if g.usesB {
		decls = append(decls, "$b: Boolean!")
		if !g.wildly(5) {
			vars = append(vars, kv{"b", g.chance(2)})
		}
	}
	name := ""
	if g.chance(3) {
		name = g.pick("Q", "M", "S", "Op").(string)
		if g.chance(3) {
			opName = name
		} else if g.wildly(5) {
			opName = "Other"
		}
	}
	query = op
	if name != "" {
		query += " " + name
	}
	if len(decls) > 0 {
		query += "(" + strings.Join(decls, ", ") + ")"
	}
	query += " { " + roots + " }"
	for _, f := range g.frags {
		query += "\n" + f
	}
	if g.chance(20) {
		vars = append(vars, kv{"extra", 1})
	}
	switch {
	case len(vars) == 0 && g.chance(2):
		variables = g.pick("null", "", "{}").(string)
	case g.wildly(15):
		variables = g.pick(`["x"]`, `"x"`, `{"a":`).(string)
	default:
		variables = encodeJSON(vars)
	}
	return query, opName, variables
}

// selection returns a selection set's contents on typ.
func (g *opGen) selection(typ *ast.Definition, depth int) string {
	var parts []string
	for range 1 + g.r.IntN(5) {
		switch x := g.r.IntN(30); {
		case x == 0:
			parts = append(parts, "__typename")
		case x == 1 && depth < 8:
			cond := ""
			if g.chance(2) {
				cond = "on " + typ.Name + " "
			}
			parts = append(parts, "... "+cond+g.directive()+"{ "+g.selection(typ, depth)+" }")
		case x == 2 && depth < 8:
			name := fmt.Sprintf("F%d", len(g.frags))
			g.frags = append(g.frags, "")
			i := len(g.frags) - 1
			g.frags[i] = "fragment " + name + " on " + typ.Name + " { " + g.selection(typ, depth) + " }"
			parts = append(parts, "..."+name+g.directive())
		case x == 3 && g.wildly(2):
			parts = append(parts, g.pick("nope", "... on PageInfo { hasNextPage }", "id { x }", "a: id a: action").(string))
		default:
			var fields []*ast.FieldDefinition
			for _, f := range typ.Fields {
				ft := g.schema.Types[f.Type.Name()]
				if !strings.HasPrefix(f.Name, "__") && (depth < g.flatFrom || ft.Kind != ast.Object || g.chance(6)) {
					fields = append(fields, f)
				}
			}
			if len(fields) == 0 {
				fields = typ.Fields
			}
			f := fields[g.r.IntN(len(fields))]
			s := ""
			ft := g.schema.Types[f.Type.Name()]
			if g.chance(5) {
				if ft.Kind == ast.Object && !g.wild {
					s = f.Name + ": " // the same key twice merges
				} else {
					g.aliases++
					s = fmt.Sprintf("a%d: ", g.aliases)
					if g.wild {
						s = g.pick("a: ", "b: ", "id: ", "node: ", s).(string)
					}
				}
			}
			s += f.Name + g.directive()
			if ft.Kind == ast.Object && !g.wildly(30) {
				s += " { " + g.selection(ft, depth+1) + " }"
			}
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, " ")
}

func (g *opGen) directive() string {
	if !g.chance(12) {
		return ""
	}
	if g.chance(4) {
		g.usesB = true
		return g.pick(" @include(if: $b)", " @skip(if: $b)").(string) + " "
	}
	if g.wildly(4) {
		return " @deprecated "
	}
	return g.pick(" @skip(if: false)", " @skip(if: true)", " @include(if: true)", " @include(if: false)").(string) + " "
}

func (g *opGen) projectID() any {
	return g.v([]any{"p1", "p1", "p1", "p3"}, "p2", 5, "")
}

func (g *opGen) filter() any {
	if g.chance(20) {
		return nil
	}
	var f obj
	maybe := func(name string, valid []any, invalid ...any) {
		if g.chance(5) {
			f = append(f, kv{name, g.v(valid, invalid...)})
		}
	}
	maybe("action", []any{"device.*", "user.login", "alarm.raised", "device.firmware.updated", nil}, "Nope!", "", "device.", "*", 3)
	maybe("subjectId", []any{"u1", "u2", "zz", nil}, 5)
	maybe("resourceType", []any{"device", "user"})
	maybe("resourceId", []any{"d1", "d0"})
	maybe("outcome", []any{[]any{enumLit("SUCCESS")}, []any{enumLit("ERROR"), enumLit("DENIED")}, []any{}, nil, enumLit("FAILURE")},
		[]any{enumLit("success")}, []any{nil}, "SUCCESS", []any{"FAILURE"})
	times := []any{"2026-11-01T09:00:00Z", "2026-11-01T10:00:00+02:00", "2026-11-01T09:00:00.5Z", "2026-11-01T20:00:00.123456789Z", nil}
	maybe("occurredFrom", times, "yesterday", 5, "2026-11-01", "2026-11-01T09:00:00")
	maybe("occurredTo", times, "yesterday", 5, "2026-11-01")
	seqs := []any{"3", "0", "10", "25", "18446744073709551615", nil}
	maybe("sequenceFrom", seqs, "x", "-1", 3, "18446744073709551616", " 3", "+3", "03", numLit("2.0"))
	maybe("sequenceTo", seqs, "x", "-1", 3, "18446744073709551616", "03")
	if g.wildly(10) {
		f = append(f, kv{"bogus", 1})
	}
	if g.wildly(10) && len(f) > 0 {
		f = append(f, f[0])
	}
	return f
}

// auditEventsOperation generates a query of auditEvents.
func (g *opGen) auditEventsOperation() (query, opName, variables string) {
	g.start(100)
	field := g.schema.Query.Fields.ForName("auditEvents")
	order := domain.OldestFirst
	if g.chance(2) {
		order = domain.NewestFirst
	}
	cursor := app.EncodeCursor(order, uint64(g.r.IntN(45)))
	args := []arg{
		{"projectId", g.projectID(), !g.wildly(10)},
		{"first", g.v([]any{1, 2, 3, 7, 50, 100, 400, 500, nil}, 0, -1, 501, 2147483647, 2147483648, int64(1)<<40, "3", numLit("2.5"), numLit("3.0"), numLit("1e1")), g.chance(2)},
		{"after", g.v([]any{cursor, nil}, "nope", "", 5, app.EncodeCursor(domain.NewestFirst+domain.OldestFirst+7, 3)), g.chance(3)},
		{"order", g.v([]any{enumLit("OLDEST_FIRST"), enumLit("NEWEST_FIRST"), nil}, enumLit("SIDEWAYS"), "NEWEST_FIRST", enumLit("newest_first")), g.chance(2)},
		{"filter", g.filter(), g.chance(2)},
	}
	if g.wildly(10) {
		args = append(args, arg{"last", 3, true})
	}
	g.r.Shuffle(len(args), func(i, j int) { args[i], args[j] = args[j], args[i] })
	list, decls, vars := g.passArgs(field, args)
	alias := ""
	if g.chance(4) {
		alias = g.pick("a: ", "page: ", "auditEvents: ").(string)
	}
	roots := alias + "auditEvents" + list + g.directive() + " { " + g.selection(g.schema.Types["AuditEventConnection"], 2) + " }"
	switch {
	case g.chance(15):
		roots += ` v: verifyAuditChain(projectId: "p1") { valid checkedCount }`
	case g.chance(15):
		roots = "__typename " + roots
	case g.chance(30):
		roots += " b: auditEvents(projectId: " + literal(g.projectID()) + ", first: 2) { edges { cursor } }"
	}
	return g.document("query", decls, roots, vars)
}

// eventInput generates a RecordAuditEventInput.
func (g *opGen) eventInput() any {
	id := fmt.Sprintf("0193f3c4-0000-7000-8000-%012d", 2000+g.r.IntN(300))
	if g.chance(15) {
		id = fmt.Sprintf("0193f3c4-0000-7000-8000-%012d", 900+g.r.IntN(40)) // a seed event's
	}
	e := obj{
		{"projectId", g.v([]any{"p1", "p1", "p1", "p3"}, "p2", 7)},
		{"id", g.v([]any{id}, "nope", "00000000-0000-0000-0000-000000000000", 5, "0193F3C4-0000-7000-8000-000000002001", "{0193f3c4-0000-7000-8000-000000002002}")},
		{"action", g.v([]any{"device.firmware.updated", "user.login", "alarm.raised", "x.y"}, "Not Valid", "", strings.Repeat("a.", 70)+"z")},
		{"occurredAt", g.v([]any{"2026-11-01T08:00:00.5Z", "2026-11-01T08:00:00+02:00", "2026-11-01T08:00:00Z", "2026-11-01T08:00:00.123456789Z"}, "yesterday", "2026-11-01")},
		{"subject", obj{{"type", g.v([]any{enumLit("USER"), enumLit("SERVICE"), enumLit("SYSTEM")}, enumLit("robot"), enumLit("user"), "USER")}, {"id", g.v([]any{"u1", "u2"}, "")}}},
		{"resource", obj{{"type", g.pick("device", "user")}, {"id", g.pick("d1", "d2")}}},
		{"outcome", g.v([]any{enumLit("SUCCESS"), enumLit("DENIED"), enumLit("ERROR"), enumLit("FAILURE")}, enumLit("success"), enumLit("MAYBE"), "SUCCESS")},
	}
	if g.chance(3) {
		e[4].v = append(e[4].v.(obj), kv{"displayName", g.pick("Ada \"<&>\"", "", nil, "é\u2028")})
	}
	if g.chance(3) {
		var gov obj
		for _, name := range []string{"reason", "ticket", "confirmedBy"} {
			if g.chance(2) {
				gov = append(gov, kv{name, g.pick("why", "", nil, "OPS-1")})
			}
		}
		if g.chance(2) {
			gov = append(gov, kv{"risk", g.v([]any{enumLit("LOW"), enumLit("MEDIUM"), enumLit("HIGH"), nil}, enumLit("HIGHEST"), enumLit("high"), "HIGH")})
		}
		e = append(e, kv{"governance", g.pick(gov, gov, nil)})
	}
	if g.chance(3) {
		var c obj
		for _, name := range []string{"traceId", "requestId", "causationId"} {
			if g.chance(2) {
				c = append(c, kv{name, g.v([]any{"0af7651916cd43dd8448eb211c80319c", "r", nil}, "xyz", "00000000000000000000000000000000")})
			}
		}
		e = append(e, kv{"correlation", g.pick(c, c, nil)})
	}
	if g.chance(3) {
		var ds []any
		for range g.r.IntN(3) {
			d := obj{{"algorithm", g.v([]any{"sha256"}, "")}, {"value", g.pick("ab", "cd")}}
			if g.chance(2) {
				d = append(d, kv{"label", g.pick("l", nil)})
			}
			ds = append(ds, d)
		}
		if g.wildly(5) {
			ds = append(ds, nil)
		}
		e = append(e, kv{"evidenceDigests", g.pick(ds, ds, nil)})
	}
	if g.chance(2) {
		e = append(e, kv{"details", rawJSON(g.v([]any{`{"b":1.5,"a":[1,2]}`, `{ "a" : 1 }`, `{"a":1.0}`, `{"a":1e2}`, `{"x":"\u00e9\ud83d\ude00"}`,
			`{"a":{"b":{"c":[null,true,"x"]}}}`, `{}`, `null`, `{"big":12345678901234567890}`, `{"s":"<&>"}`, `{"k":"\u2028"}`, `{"n":-0}`,
			`{"z":1,"y":{"b":2,"a":1}}`, `{"a":1,"a":2}`}, `[1]`, `"x"`, `5`, `true`).(string))})
	}
	if g.wildly(2) {
		e = g.spoil(e)
	}
	g.r.Shuffle(len(e), func(i, j int) { e[i], e[j] = e[j], e[i] })
	return e
}

// spoil makes one mistake in an input object.
func (g *opGen) spoil(e obj) obj {
	e = append(obj(nil), e...)
	i := g.r.IntN(len(e))
	mistake := g.r.IntN(8)
	if e[i].k == "id" && (mistake == 0 || mistake == 1 || mistake == 5) {
		mistake = 2 // an event without an id gets a random one: the two databases would differ
	}
	switch mistake {
	case 0:
		return append(e[:i], e[i+1:]...) // a member missing
	case 1:
		e[i].v = nil
	case 2:
		e = append(e, kv{"bogus", 1})
	case 3:
		e[i].k = strings.ToUpper(e[i].k[:1]) + e[i].k[1:] // in the wrong case
	case 4:
		e[i].k = strings.ToLower(e[i].k)
	case 5:
		e = append(e, kv{e[i].k, g.pick("other", 7, nil)}) // twice
	case 6:
		e[i].v = g.pick(7, true, []any{"x"}, obj{}, "x", numLit("1.5"))
	case 7:
		if sub, ok := e[i].v.(obj); ok && len(sub) > 0 {
			e[i].v = g.spoil(sub)
		}
	}
	return e
}

// recordOperation generates an ingest mutation.
func (g *opGen) recordOperation() (query, opName, variables string) {
	g.start(3)
	batch := g.chance(2)
	field, inputType, payloadType := "recordAuditEvent", "RecordAuditEventInput", "RecordAuditEventPayload"
	var input any
	if batch {
		field, inputType, payloadType = "recordAuditEvents", "RecordAuditEventsInput", "RecordAuditEventsPayload"
		var events []any
		for range g.v([]any{1, 1, 1, 2, 2, 3, 4}, 0).(int) {
			events = append(events, g.eventInput())
		}
		in := obj{{"events", events}}
		if g.chance(3) {
			in = append(in, kv{"idempotencyKey", g.pick("k1", "k2", "k3", nil)})
		}
		if g.wildly(5) {
			in = g.spoil(in)
		}
		if g.wildly(10) && len(events) > 0 && len(in) > 0 {
			in[0].v = events[0] // an event where a list goes
		}
		input = in
	} else {
		input = g.eventInput()
	}
	sel := g.selection(g.schema.Types[payloadType], 2)
	alias := ""
	if g.chance(4) {
		alias = g.pick("r: ", "x: ", field+": ").(string)
	}
	var decls []string
	vars := obj{}
	var roots string
	switch {
	case g.chance(20):
		roots = alias + field + "(input: " + literal(input) + ") { " + sel + " }"
	default:
		typ := inputType + "!"
		if g.wildly(5) {
			typ = g.pick(inputType, "RecordAuditEventsInput!", "RecordAuditEventInput!", "String!").(string)
		}
		v := g.pick("in", "in", "e", "input").(string)
		decls = append(decls, "$"+v+": "+typ)
		roots = alias + field + "(input: $" + v + ")" + g.directive() + " { " + sel + " }"
		if !g.wildly(5) {
			vars = append(vars, kv{v, input})
		}
	}
	switch {
	case g.wildly(5):
		roots = "__typename " + roots
	case g.wildly(5):
		roots += " b: " + field + "(input: " + literal(input) + ") { __typename }"
	}
	return g.document("mutation", decls, roots, vars)
}

// subscriptionOperation generates a subscription of auditEventRecorded,
// its variables decoded as the WebSocket transport decodes them.
func (g *opGen) subscriptionOperation() (query, opName string, vars map[string]any) {
	g.start(100)
	field := g.schema.Subscription.Fields.ForName("auditEventRecorded")
	args := []arg{
		{"projectId", g.projectID(), !g.wildly(10)},
		{"afterSequence", g.v([]any{"0", "5", "30", "36"}, "x", 5, nil, "-1", "18446744073709551616"), !g.wildly(5)},
		{"filter", g.filter(), g.chance(2)},
	}
	list, decls, v := g.passArgs(field, args)
	alias := ""
	if g.chance(4) {
		alias = "e: "
	}
	roots := alias + "auditEventRecorded" + list + " { " + g.selection(g.schema.Types["AuditEvent"], 2) + " }"
	query, opName, variables := g.document("subscription", decls, roots, v)
	if variables != "" && variables != "null" {
		dec := gojson.NewDecoder(strings.NewReader(variables))
		dec.UseNumber()
		if dec.Decode(&vars) != nil {
			vars = nil
		}
	}
	return query, opName, vars
}
