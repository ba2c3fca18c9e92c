// Package schemadoc renders the GraphQL API reference (docs/api-reference.md)
// from the schema files in schema/. The output depends on the schema alone:
// root operations are grouped by operation type and sorted by name, named
// types are grouped by kind and sorted by name, and fields, arguments and
// enum values keep their order in the schema. Permissions are taken from
// the descriptions, which state them as "Needs <permission>...".
package schemadoc

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"
)

// LoadDir parses every *.graphqls file of dir, in name order, into one
// schema.
func LoadDir(dir string) (*ast.Schema, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.graphqls"))
	if err != nil {
		return nil, fmt.Errorf("listing schema files: %w", err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no *.graphqls files in %s", dir)
	}
	slices.Sort(files)
	sources := make([]*ast.Source, 0, len(files))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("reading schema file: %w", err)
		}
		sources = append(sources, &ast.Source{Name: filepath.ToSlash(f), Input: string(b)})
	}
	schema, gqlErr := gqlparser.LoadSchema(sources...)
	if gqlErr != nil {
		return nil, fmt.Errorf("loading schema: %w", gqlErr)
	}
	return schema, nil
}

// needsRE finds the sentence of a description that states permissions.
var needsRE = regexp.MustCompile(`\bNeeds ([^.]*)`)

// permissionRE matches one permission name (resource:action, or admin).
var permissionRE = regexp.MustCompile(`\b(?:[a-z]+:[a-z]+|admin)\b`)

// Permissions returns the permissions a description states ("Needs
// audit:read and the project." gives [audit:read]), in order of mention.
func Permissions(description string) []string {
	var out []string
	for _, m := range needsRE.FindAllStringSubmatch(strings.Join(strings.Fields(description), " "), -1) {
		for _, p := range permissionRE.FindAllString(m[1], -1) {
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	return out
}

// Render returns the Markdown API reference of schema.
func Render(schema *ast.Schema) []byte {
	r := &renderer{schema: schema}
	r.document()
	return []byte(r.b.String())
}

type renderer struct {
	schema *ast.Schema
	b      strings.Builder
}

func (r *renderer) printf(format string, args ...any) { fmt.Fprintf(&r.b, format, args...) }

// kinds lists the sections of named types, in order.
var kinds = []struct {
	kind  ast.DefinitionKind
	title string
}{
	{ast.Object, "Objects"},
	{ast.Interface, "Interfaces"},
	{ast.Union, "Unions"},
	{ast.InputObject, "Input objects"},
	{ast.Enum, "Enums"},
	{ast.Scalar, "Scalars"},
}

func (r *renderer) document() {
	r.printf("# API reference\n\n")
	r.printf("<!-- Generated from schema/*.graphqls by `make docs` (cmd/schemadoc). Do not edit: `make test` fails when this file is stale. -->\n\n")
	r.printf("The GraphQL API at `/graphql` (POST, GET for queries, WebSocket and Server-Sent Events for subscriptions; see [api.md](api.md) and the [integrator guide](integrators.md)). ")
	r.printf("Every operation needs a bearer token; **Needs** lists the permissions an operation requires, as its description states them. ")
	r.printf("`Uint64` values are decimal strings. Errors carry `extensions.code` (see [api.md](api.md#errors)).\n\n")

	roots := r.rootOperations()
	types := r.namedTypes()
	r.printf("## Contents\n\n")
	for _, root := range roots {
		r.printf("- [%s](#%s)\n", root.title, anchor(root.title))
		for _, f := range root.fields {
			r.printf("  - [%s](#%s)\n", f.Name, anchor(root.def.Name+"."+f.Name))
		}
	}
	for _, k := range kinds {
		if len(types[k.kind]) == 0 {
			continue
		}
		r.printf("- [%s](#%s): ", k.title, anchor(k.title))
		for i, d := range types[k.kind] {
			if i > 0 {
				r.printf(", ")
			}
			r.printf("[%s](#%s)", d.Name, anchor(d.Name))
		}
		r.printf("\n")
	}
	r.printf("- [Directives](#directives)\n\n")

	for _, root := range roots {
		r.printf("## %s\n\n", root.title)
		for _, f := range root.fields {
			r.rootField(root.def, f)
		}
	}
	for _, k := range kinds {
		if len(types[k.kind]) == 0 {
			continue
		}
		r.printf("## %s\n\n", k.title)
		for _, d := range types[k.kind] {
			r.namedType(d)
		}
	}
	r.directives()
}

type rootOperation struct {
	title  string
	def    *ast.Definition
	fields []*ast.FieldDefinition
}

// rootOperations returns the query, mutation and subscription fields,
// sorted by name, without introspection fields.
func (r *renderer) rootOperations() []rootOperation {
	var out []rootOperation
	for _, root := range []struct {
		title string
		def   *ast.Definition
	}{{"Queries", r.schema.Query}, {"Mutations", r.schema.Mutation}, {"Subscriptions", r.schema.Subscription}} {
		if root.def == nil {
			continue
		}
		var fields []*ast.FieldDefinition
		for _, f := range root.def.Fields {
			if !strings.HasPrefix(f.Name, "__") {
				fields = append(fields, f)
			}
		}
		slices.SortFunc(fields, func(a, b *ast.FieldDefinition) int { return strings.Compare(a.Name, b.Name) })
		out = append(out, rootOperation{root.title, root.def, fields})
	}
	return out
}

// namedTypes returns the schema's own types (not built-in, not roots) by
// kind, sorted by name.
func (r *renderer) namedTypes() map[ast.DefinitionKind][]*ast.Definition {
	out := map[ast.DefinitionKind][]*ast.Definition{}
	for _, d := range r.schema.Types {
		if d.BuiltIn || d == r.schema.Query || d == r.schema.Mutation || d == r.schema.Subscription {
			continue
		}
		out[d.Kind] = append(out[d.Kind], d)
	}
	for _, defs := range out {
		slices.SortFunc(defs, func(a, b *ast.Definition) int { return strings.Compare(a.Name, b.Name) })
	}
	return out
}

func (r *renderer) rootField(root *ast.Definition, f *ast.FieldDefinition) {
	r.printf("### %s.%s\n\n", root.Name, f.Name)
	r.printf("```graphql\n%s\n```\n\n", signature(f))
	r.description(f.Description)
	if perms := Permissions(f.Description); len(perms) > 0 {
		r.printf("**Needs:** %s\n\n", codeList(perms))
	}
	if len(f.Arguments) > 0 {
		r.printf("| Argument | Type | Default | Description |\n| --- | --- | --- | --- |\n")
		for _, a := range f.Arguments {
			r.printf("| `%s` | %s | %s | %s |\n", a.Name, r.typeRef(a.Type), defaultValue(a.DefaultValue), cell(a.Description))
		}
		r.printf("\n")
	}
	r.printf("**Returns** %s\n\n", r.typeRef(f.Type))
	r.deprecation(f.Directives)
}

func (r *renderer) namedType(d *ast.Definition) {
	r.printf("### %s\n\n", d.Name)
	r.description(d.Description)
	if len(d.Interfaces) > 0 {
		refs := make([]string, len(d.Interfaces))
		for i, name := range d.Interfaces {
			refs[i] = r.nameRef(name)
		}
		r.printf("Implements %s.\n\n", strings.Join(refs, ", "))
	}
	switch d.Kind {
	case ast.Object, ast.Interface:
		r.printf("| Field | Type | Description |\n| --- | --- | --- |\n")
		for _, f := range d.Fields {
			if strings.HasPrefix(f.Name, "__") {
				continue
			}
			name := "`" + f.Name + "`"
			if len(f.Arguments) > 0 {
				args := make([]string, len(f.Arguments))
				for i, a := range f.Arguments {
					args[i] = a.Name + ": " + a.Type.String()
				}
				name = "`" + f.Name + "(" + strings.Join(args, ", ") + ")`"
			}
			r.printf("| %s | %s | %s |\n", name, r.typeRef(f.Type), cell(f.Description+deprecatedNote(f.Directives)))
		}
		r.printf("\n")
	case ast.InputObject:
		r.printf("| Field | Type | Default | Description |\n| --- | --- | --- | --- |\n")
		for _, f := range d.Fields {
			r.printf("| `%s` | %s | %s | %s |\n", f.Name, r.typeRef(f.Type), defaultValue(f.DefaultValue), cell(f.Description+deprecatedNote(f.Directives)))
		}
		r.printf("\n")
	case ast.Enum:
		r.printf("| Value | Description |\n| --- | --- |\n")
		for _, v := range d.EnumValues {
			r.printf("| `%s` | %s |\n", v.Name, cell(v.Description+deprecatedNote(v.Directives)))
		}
		r.printf("\n")
	case ast.Union:
		refs := make([]string, len(d.Types))
		for i, name := range d.Types {
			refs[i] = r.nameRef(name)
		}
		r.printf("One of %s.\n\n", strings.Join(refs, ", "))
	case ast.Scalar:
		r.printf("Scalar.\n\n")
	}
}

// directives lists the schema's own directives, then the built-in ones
// every GraphQL server has.
func (r *renderer) directives() {
	r.printf("## Directives\n\n")
	var own, builtIn []*ast.DirectiveDefinition
	for _, d := range r.schema.Directives {
		if d.Position != nil && d.Position.Src != nil && d.Position.Src.BuiltIn {
			builtIn = append(builtIn, d)
		} else {
			own = append(own, d)
		}
	}
	byName := func(a, b *ast.DirectiveDefinition) int { return strings.Compare(a.Name, b.Name) }
	slices.SortFunc(own, byName)
	slices.SortFunc(builtIn, byName)
	if len(own) == 0 {
		r.printf("The schema defines no directives of its own.\n\n")
	}
	for _, d := range own {
		r.directive(d)
	}
	r.printf("Built in:\n\n")
	for _, d := range builtIn {
		r.printf("- `@%s` (%s): %s\n", d.Name, locations(d), oneLine(d.Description))
	}
	r.printf("\n")
}

func (r *renderer) directive(d *ast.DirectiveDefinition) {
	r.printf("### @%s\n\n", d.Name)
	r.description(d.Description)
	r.printf("On %s.\n\n", locations(d))
	if len(d.Arguments) > 0 {
		r.printf("| Argument | Type | Default | Description |\n| --- | --- | --- | --- |\n")
		for _, a := range d.Arguments {
			r.printf("| `%s` | %s | %s | %s |\n", a.Name, r.typeRef(a.Type), defaultValue(a.DefaultValue), cell(a.Description))
		}
		r.printf("\n")
	}
}

func (r *renderer) description(s string) {
	if s = strings.TrimSpace(s); s != "" {
		r.printf("%s\n\n", s)
	}
}

func (r *renderer) deprecation(dirs ast.DirectiveList) {
	if note := deprecatedNote(dirs); note != "" {
		r.printf("%s\n\n", strings.TrimSpace(note))
	}
}

// typeRef writes a type as code, linking its named type when the schema
// defines it (not for built-in scalars).
func (r *renderer) typeRef(t *ast.Type) string {
	name := t.Name()
	d := r.schema.Types[name]
	if d == nil || d.BuiltIn {
		return "`" + t.String() + "`"
	}
	return "[`" + t.String() + "`](#" + anchor(name) + ")"
}

func (r *renderer) nameRef(name string) string {
	return r.typeRef(ast.NamedType(name, nil))
}

// signature is a root field as GraphQL SDL, one argument per line when it
// has several.
func signature(f *ast.FieldDefinition) string {
	if len(f.Arguments) == 0 {
		return f.Name + ": " + f.Type.String()
	}
	args := make([]string, len(f.Arguments))
	for i, a := range f.Arguments {
		args[i] = a.Name + ": " + a.Type.String()
		if a.DefaultValue != nil {
			args[i] += " = " + a.DefaultValue.String()
		}
	}
	if len(args) == 1 {
		return f.Name + "(" + args[0] + "): " + f.Type.String()
	}
	return f.Name + "(\n  " + strings.Join(args, "\n  ") + "\n): " + f.Type.String()
}

func defaultValue(v *ast.Value) string {
	if v == nil {
		return ""
	}
	return "`" + v.String() + "`"
}

func deprecatedNote(dirs ast.DirectiveList) string {
	d := dirs.ForName("deprecated")
	if d == nil {
		return ""
	}
	reason := "No longer supported"
	if a := d.Arguments.ForName("reason"); a != nil && a.Value != nil {
		reason = a.Value.Raw
	}
	return " **Deprecated:** " + reason
}

func locations(d *ast.DirectiveDefinition) string {
	locs := make([]string, len(d.Locations))
	for i, l := range d.Locations {
		locs[i] = string(l)
	}
	return strings.Join(locs, ", ")
}

func codeList(items []string) string {
	out := make([]string, len(items))
	for i, s := range items {
		out[i] = "`" + s + "`"
	}
	return strings.Join(out, ", ")
}

// oneLine joins a description's lines.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// cell makes a description fit one Markdown table cell.
func cell(s string) string { return strings.ReplaceAll(oneLine(s), "|", `\|`) }

// anchor is the fragment GitHub-flavoured Markdown gives a heading: lower
// case, punctuation other than - and _ dropped, spaces as -.
func anchor(heading string) string {
	var b strings.Builder
	for _, c := range strings.ToLower(heading) {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_':
			b.WriteRune(c)
		case c == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}
