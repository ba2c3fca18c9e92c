package server

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

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

// FuzzRawShapeRefusal: the early check of a large body refuses only what
// the full check of its decoded document refuses, whatever the JSON around
// it (members before "query", escapes).
func FuzzRawShapeRefusal(f *testing.F) {
	for _, seed := range []string{
		`{ __typename }`,
		"{" + strings.Repeat(" a: __typename", 40) + " }",
		"{" + strings.Repeat(` x: f(s: "\"}{\\\"")`, 40) + " }",
		`{ a: verifyAuditChain(projectId: "p") { valid } b: verifyAuditChain(projectId: "p") { valid } }`,
		"{ é" + strings.Repeat(" a", 40) + " }",
	} {
		f.Add(seed, true)
	}
	f.Fuzz(func(t *testing.T, doc string, variablesFirst bool) {
		padded := doc + "\n#" + strings.Repeat(" ", rawShapeMinBody)
		members := []string{`"query":` + jsonString(padded), `"variables":{"a":[1,"}",{"b":null}],"c":true}`}
		if variablesFirst {
			members[0], members[1] = members[1], members[0]
		}
		body := []byte("{" + strings.Join(members, ",") + "}")
		if early := rawShapeRefusal(body, 4); early != "" && checkShape(padded, 4) == "" {
			t.Fatalf("refused early (%s) but not in full: %q", early, doc)
		}
	})
}

// jsonString is s as a JSON string, every non-ASCII character escaped.
func jsonString(s string) string {
	var sb strings.Builder
	sb.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			sb.WriteByte('\\')
			sb.WriteRune(r)
		case r < 0x20 || r >= 0x7f:
			fmt.Fprintf(&sb, `\u%04x`, r)
		default:
			sb.WriteRune(r)
		}
	}
	sb.WriteByte('"')
	return sb.String()
}

// TestRawShapeRefusal: a large body whose document starts with too many
// selections is refused before it is decoded; a small one, one within the
// limits, and a repeated verifyAuditChain are left to the full check.
func TestRawShapeRefusal(t *testing.T) {
	t.Parallel()
	pad := "\n#" + strings.Repeat(" ", rawShapeMinBody)
	body := func(doc string) []byte {
		return []byte(`{"operationName":null,"variables":{"x":"}"},"query":` + jsonString(doc+pad) + `}`)
	}
	require.Contains(t, rawShapeRefusal(body("{"+strings.Repeat(" a: __typename", 33)+" }"), 32), "more than 32 selections")
	require.Contains(t, rawShapeRefusal(body(strings.Repeat("{ a ", 70)), 32), "nested deeper")
	require.Empty(t, rawShapeRefusal(body("{"+strings.Repeat(" a: __typename", 32)+" }"), 32))
	require.Empty(t, rawShapeRefusal(body(`{ a: verifyAuditChain(projectId: "p") { valid } b: verifyAuditChain(projectId: "p") { valid } }`), 32))
	require.Empty(t, rawShapeRefusal([]byte(`{"query":"{`+strings.Repeat(" a: __typename", 33)+` }"}`), 32), "small bodies are decoded")
	require.Empty(t, rawShapeRefusal([]byte(strings.Repeat("[", rawShapeMinBody)), 32), "not an object")
}
