package schemadoc_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/aetheriot/aether-audit/internal/schemadoc"
)

// TestCheckedInReferenceIsCurrent: docs/api-reference.md is what the schema
// renders to.
func TestCheckedInReferenceIsCurrent(t *testing.T) {
	schema, err := schemadoc.LoadDir("../../schema")
	require.NoError(t, err)
	want := schemadoc.Render(schema)
	have, err := os.ReadFile("../../docs/api-reference.md")
	require.NoError(t, err)
	if string(have) != string(want) {
		t.Fatal("docs/api-reference.md is stale: run make docs")
	}
	// Rendering is deterministic.
	again, err := schemadoc.LoadDir("../../schema")
	require.NoError(t, err)
	require.Equal(t, string(want), string(schemadoc.Render(again)))
}

func TestPermissions(t *testing.T) {
	for desc, want := range map[string][]string{
		"One page. Needs audit:read\n  and the project. Pages hold 50.":                  {"audit:read"},
		"Redrives. Needs deliveries:redrive and confirm: true (else X). Audited as a:b.": {"deliveries:redrive"},
		"Needs exports:write. Later: Needs exports:read or admin.":                       {"exports:write", "exports:read", "admin"},
		"No permission stated; mentions audit:read elsewhere.":                           nil,
	} {
		require.Equal(t, want, schemadoc.Permissions(desc), desc)
	}
}

// TestRender covers every kind of definition on a small schema.
func TestRender(t *testing.T) {
	schema, gqlErr := gqlparser.LoadSchema(&ast.Source{Name: "t.graphqls", Input: `
"A thing to look at."
directive @sensitive(reason: String = "pii") on FIELD_DEFINITION
interface Node { id: ID! }
"A widget."
type Widget implements Node {
  id: ID!
  "Its size | in mm."
  size(unit: Unit = MM): Int @deprecated(reason: "use dimensions")
}
union Thing = Widget
enum Unit { MM "Inches." IN }
input WidgetFilter { size: Int = 3 }
scalar Big
type Query {
  "A widget. Needs widgets:read."
  widget(id: ID!): Widget
  things(filter: WidgetFilter, first: Int = 10): [Thing!]!
}
`})
	require.Nil(t, gqlErr)
	doc := string(schemadoc.Render(schema))
	for _, want := range []string{
		"- [Queries](#queries)\n  - [things](#querythings)\n  - [widget](#querywidget)\n",
		"### Query.widget\n\n```graphql\nwidget(id: ID!): Widget\n```\n\nA widget. Needs widgets:read.\n\n**Needs:** `widgets:read`\n\n",
		"things(\n  filter: WidgetFilter\n  first: Int = 10\n): [Thing!]!",
		"| `first` | `Int` | `10` |  |",
		"**Returns** [`[Thing!]!`](#thing)",
		"### Widget\n\nA widget.\n\nImplements [`Node`](#node).\n\n",
		"| `size(unit: Unit)` | `Int` | Its size \\| in mm. **Deprecated:** use dimensions |",
		"### Thing\n\nOne of [`Widget`](#widget).",
		"| `IN` | Inches. |",
		"| `size` | `Int` | `3` |  |",
		"### Big\n\nScalar.",
		"### @sensitive\n\nA thing to look at.\n\nOn FIELD_DEFINITION.\n\n",
		"| `reason` | `String` | `\"pii\"` |  |",
		"- `@skip` (FIELD, FRAGMENT_SPREAD, INLINE_FRAGMENT):",
	} {
		require.Contains(t, doc, want)
	}
	require.Less(t, strings.Index(doc, "## Objects"), strings.Index(doc, "## Interfaces"))
	require.NotContains(t, doc, "__schema")
}
