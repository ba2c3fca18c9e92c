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
