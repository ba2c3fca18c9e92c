package server

import (
	"strconv"
	"strings"
	"testing"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"
)

// FuzzCheckShape: the shape check of GraphQL documents never panics, and
// never refuses a document whose selection sets all fit the limit (counted
// on the parsed document) and that names verifyAuditChain at most once.
func FuzzCheckShape(f *testing.F) {
	for _, seed := range []string{
		`{ __typename }`,
		`query Q($p: ID!) { auditEvents(projectId: $p, filter: {subjectId: "{ a b }"}) { edges { cursor } } }`,
		`{ a: verifyAuditChain(projectId: "p") { valid } }`,
		`fragment F on Query { __typename } { ...F ... on Query { __typename } }`,
		`{ x """block { } "" string""" }`,
		`# comment { { {
{ __typename }`,
		`{ a: __typename b: __typename @include(if: true) }`,
		"{ \"unterminated",
		`}}}{{{`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		msg := checkShape(doc, 4)
		if msg == "" {
			return
		}
		parsed, err := parser.ParseQuery(&ast.Source{Input: doc})
		if err != nil {
			return // refusing a document that does not parse is fine
		}
		most, singles := 0, 0
		var walk func(ast.SelectionSet, int)
		walk = func(set ast.SelectionSet, depth int) {
			if depth > 200 {
				return
			}
			most = max(most, len(set))
			for _, sel := range set {
				switch s := sel.(type) {
				case *ast.Field:
					if s.Name == singleUseField {
						singles++
					}
					walk(s.SelectionSet, depth+1)
				case *ast.InlineFragment:
					walk(s.SelectionSet, depth+1)
				}
			}
		}
		total := 0
		for _, op := range parsed.Operations {
			walk(op.SelectionSet, 0)
			total += countAll(op.SelectionSet)
		}
		for _, fr := range parsed.Fragments {
			walk(fr.SelectionSet, 0)
			total += countAll(fr.SelectionSet)
		}
		if most <= 4 && singles <= 1 && total <= 4*selectionsPerSetLimit && !strings.Contains(msg, "nested") {
			t.Fatalf("refused %q (%s), but its sets hold at most %d selections, %d in all, verifyAuditChain %d times", doc, msg, most, total, singles)
		}
	})
}

// countAll counts the selections of set and of the sets inside it.
func countAll(set ast.SelectionSet) int {
	n := len(set)
	for _, sel := range set {
		switch s := sel.(type) {
		case *ast.Field:
			n += countAll(s.SelectionSet)
		case *ast.InlineFragment:
			n += countAll(s.SelectionSet)
		}
	}
	return n
}

// FuzzCoalesceRanges: a Range header is either refused (more than
// maxDownloadRanges ranges once merged), left as it is, or rewritten into
// at most maxDownloadRanges ordered, disjoint ranges inside the object.
func FuzzCoalesceRanges(f *testing.F) {
	for _, seed := range []string{"bytes=0-9", "bytes=0-9,5-20,-3", "bytes=" + ranges(12, 3), "bytes=-0", "bytes=5-", "bytes=,,", "bytes=1-2-3"} {
		f.Add(seed, int64(100))
	}
	f.Fuzz(func(t *testing.T, header string, size int64) {
		got, ok := coalesceRanges(header, size)
		if !ok || got == header {
			return
		}
		spec, found := strings.CutPrefix(got, "bytes=")
		if !found {
			t.Fatalf("%q became %q", header, got)
		}
		parts := strings.Split(spec, ",")
		if len(parts) > maxDownloadRanges {
			t.Fatalf("%q became %d ranges", header, len(parts))
		}
		prev := int64(-2)
		for _, p := range parts {
			a, b, _ := strings.Cut(p, "-")
			first, err1 := strconv.ParseInt(a, 10, 64)
			last, err2 := strconv.ParseInt(b, 10, 64)
			if err1 != nil || err2 != nil || first > last || first <= prev+1 || last >= size || first < 0 {
				t.Fatalf("%q (size %d) became %q", header, size, got)
			}
			prev = last
		}
	})
}
