// Command schemadoc writes the GraphQL API reference (docs/api-reference.md)
// from schema/*.graphqls. With -check it writes nothing and fails when the
// file differs from what it would write. `make docs` and `make check-docs`
// run it from the repository root.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"

	"github.com/aetheriot/aether-audit/internal/schemadoc"
)

func main() {
	schemaDir := flag.String("schema", "schema", "directory of the *.graphqls files")
	out := flag.String("out", "docs/api-reference.md", "the Markdown file to write")
	check := flag.Bool("check", false, "fail when the file is stale instead of writing it")
	flag.Parse()
	if err := run(*schemaDir, *out, *check); err != nil {
		fmt.Fprintln(os.Stderr, "schemadoc:", err)
		os.Exit(1)
	}
}

func run(schemaDir, out string, check bool) error {
	schema, err := schemadoc.LoadDir(schemaDir)
	if err != nil {
		return err
	}
	doc := schemadoc.Render(schema)
	if check {
		have, err := os.ReadFile(out)
		if err != nil || !bytes.Equal(have, doc) {
			return fmt.Errorf("%s is stale (or missing): run make docs", out)
		}
		return nil
	}
	return os.WriteFile(out, doc, 0o644)
}
