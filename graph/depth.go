package graph

import (
	"strings"

	"github.com/vektah/gqlparser/v2/ast"
)

// SelectionDepth returns how deeply set nests fields, fragments expanded.
// Introspection fields are not counted: the complexity limit bounds them.
func SelectionDepth(set ast.SelectionSet) int {
	return depth(set, 0)
}

func depth(set ast.SelectionSet, visited int) int {
	if visited > 64 { // fragment cycles are refused by validation; stay safe
		return visited
	}
	deepest := 0
	for _, sel := range set {
		var d int
		switch s := sel.(type) {
		case *ast.Field:
			if strings.HasPrefix(s.Name, "__") {
				continue
			}
			d = 1 + depth(s.SelectionSet, visited+1)
		case *ast.InlineFragment:
			d = depth(s.SelectionSet, visited+1)
		case *ast.FragmentSpread:
			if s.Definition != nil {
				d = depth(s.Definition.SelectionSet, visited+1)
			}
		}
		deepest = max(deepest, d)
	}
	return deepest
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
