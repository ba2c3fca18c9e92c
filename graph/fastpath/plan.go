package fastpath

import (
	"context"

	"github.com/99designs/gqlgen/complexity"
	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"
	"github.com/vektah/gqlparser/v2/validator"
	"github.com/vektah/gqlparser/v2/validator/rules"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/graph"
	"github.com/aetheriot/aether-audit/internal/doccache"
)

// planCache remembers what a fast path makes of each document (and
// operation name), so a document is parsed, validated and planned once.
// It holds documents of at most maxDocument bytes and planCacheBytes in
// all, keyed by hash; a larger document is left to the executor without
// being planned.
type planCache[P any] struct {
	cache *doccache.Cache[P]
	make  func(query, operationName string) P
	none  func() P // the plan of a document the fast path leaves alone
	// keep reports whether a plan may be cached: not the plan of a document
	// that did not parse or validate (the executor answers those, and the
	// cache holds only valid documents).
	keep func(P) bool
}

// planCacheBytes bounds the documents one plan cache holds.
const planCacheBytes = 1 << 20

// defaultMaxCachedDocumentBytes is the default of
// Config.MaxCachedDocumentBytes.
const defaultMaxCachedDocumentBytes = 16 << 10

func newPlanCache[P any](make func(query, operationName string) P, none func() P, keep func(P) bool, maxDocument int) *planCache[P] {
	return &planCache[P]{cache: doccache.New[P](planCacheBytes, maxDocument), make: make, none: none, keep: keep}
}

// get returns the plan of a document; a panic of the AST helpers on a
// document they do not expect makes it "not eligible".
func (c *planCache[P]) get(query, operationName string) (plan P) {
	size := len(query) + len(operationName)
	if !c.cache.Cacheable(size) {
		return c.none()
	}
	key := doccache.KeyOf(operationName, query)
	if plan, ok := c.cache.Get(key); ok {
		return plan
	}
	defer func() {
		if recover() != nil {
			plan = c.none()
		}
		if c.keep(plan) {
			c.cache.Add(key, plan, size)
		}
	}()
	return c.make(query, operationName)
}

// documents is what the record and subscribe fast paths share: the schema
// and the server's limits their documents must stay within.
type documents struct {
	es            graphql.ExecutableSchema
	maxDepth      int
	maxComplexity int
}

// singleRootField is the package function for d's schema and limits.
func (d documents) singleRootField(query, operationName string, kind ast.Operation) (*ast.QueryDocument, *ast.OperationDefinition, *ast.Field, bool, bool) {
	return singleRootField(d.es, query, operationName, kind, d.maxDepth, d.maxComplexity)
}

// readArgs resolves field's arguments against vars and hands them to read;
// ok is false when read refuses them or they cannot be resolved (ArgumentMap
// panics on values it does not expect).
func readArgs(field *ast.Field, vars map[string]any, read func(args map[string]any) bool) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	return read(field.ArgumentMap(vars))
}

// projectAndFilter reads the projectId and filter arguments shared by
// auditEvents and auditEventRecorded.
func projectAndFilter(args map[string]any, project *string, filter *app.AuditEventFilterInput) bool {
	var ok bool
	if *project, ok = args["projectId"].(string); !ok {
		return false
	}
	if v, present := args["filter"]; present && v != nil {
		f, isMap := v.(map[string]any)
		return isMap && filterArgs(f, filter)
	}
	return true
}

// singleRootField parses and validates query and returns its one operation,
// of kind, and that operation's one root field, when the document is of the
// shape the fast paths serve: a single operation without directives or
// variable defaults, one root field without directives, a selection whose
// shape does not depend on variables, within the depth and complexity
// limits. ok is false otherwise.
func singleRootField(es graphql.ExecutableSchema, query, operationName string, kind ast.Operation, maxDepth, maxComplexity int) (doc *ast.QueryDocument, op *ast.OperationDefinition, field *ast.Field, ok, valid bool) {
	doc, err := parser.ParseQuery(&ast.Source{Input: query})
	if err != nil || len(validator.ValidateWithRules(es.Schema(), doc, rules.NewDefaultRules())) > 0 {
		return nil, nil, nil, false, false
	}
	if len(doc.Operations) != 1 {
		return nil, nil, nil, false, true
	}
	op = doc.Operations[0]
	if operationName != "" && op.Name != operationName {
		return nil, nil, nil, false, true
	}
	if op.Operation != kind || len(op.Directives) > 0 || len(op.SelectionSet) != 1 || usesVariableDirectives(op.SelectionSet) {
		return nil, nil, nil, false, true
	}
	for _, v := range op.VariableDefinitions {
		if v.DefaultValue != nil || len(v.Directives) > 0 {
			return nil, nil, nil, false, true // the executor applies variable defaults
		}
	}
	field, isField := op.SelectionSet[0].(*ast.Field)
	if !isField || len(field.Directives) > 0 {
		return nil, nil, nil, false, true
	}
	if graph.SelectionDepth(op.SelectionSet) > maxDepth || complexity.Calculate(context.Background(), es, op, nil) > maxComplexity {
		return nil, nil, nil, false, true
	}
	return doc, op, field, true, true
}

// usesVariableDirectives reports whether any selection in set (fragments
// expanded) has a directive taking a variable, such as @include(if: $x):
// its shape then depends on the variables, so it cannot be planned once per
// document.
func usesVariableDirectives(set ast.SelectionSet) bool {
	return variableDirectives(set, 0)
}

func variableDirectives(set ast.SelectionSet, visited int) bool {
	if visited > 64 {
		return true
	}
	check := func(dirs ast.DirectiveList) bool {
		for _, d := range dirs {
			for _, a := range d.Arguments {
				if a.Value != nil && a.Value.Kind == ast.Variable {
					return true
				}
			}
		}
		return false
	}
	for _, sel := range set {
		switch s := sel.(type) {
		case *ast.Field:
			if check(s.Directives) || variableDirectives(s.SelectionSet, visited+1) {
				return true
			}
		case *ast.InlineFragment:
			if check(s.Directives) || variableDirectives(s.SelectionSet, visited+1) {
				return true
			}
		case *ast.FragmentSpread:
			if check(s.Directives) || (s.Definition != nil && variableDirectives(s.Definition.SelectionSet, visited+1)) {
				return true
			}
		}
	}
	return false
}
