package web

import (
	"encoding/json"
	"io/fs"
	"os"
	"strings"
	"testing"
)

// TestGraphiQLBundleIsCurrent is a cheap check that web/graphiql/ was
// generated from web/graphiql-src/ as it is now: the page is the source's
// copy, and the bundle's licence list names the version of each package
// pinned in package.json. The full check rebuilds it (make check-graphiql).
func TestGraphiQLBundleIsCurrent(t *testing.T) {
	src, err := os.ReadFile("graphiql-src/src/index.html")
	if err != nil {
		t.Fatal(err)
	}
	page, err := fs.ReadFile(GraphiQL, "index.html")
	if err != nil {
		t.Fatal(err)
	}
	if string(page) != string(src) {
		t.Error("web/graphiql/index.html differs from web/graphiql-src/src/index.html: run make graphiql")
	}

	raw, err := os.ReadFile("graphiql-src/package.json")
	if err != nil {
		t.Fatal(err)
	}
	var pkg struct {
		DevDependencies map[string]string `json:"devDependencies"`
	}
	if err := json.Unmarshal(raw, &pkg); err != nil {
		t.Fatal(err)
	}
	licences, err := fs.ReadFile(GraphiQL, "LICENSES.txt")
	if err != nil {
		t.Fatal(err)
	}
	list, _, _ := strings.Cut(string(licences), "\n\n=")
	for name, version := range pkg.DevDependencies {
		if name == "esbuild" { // the bundler, not bundled
			continue
		}
		if !strings.Contains(list, "\n"+name+"@"+version+" (") {
			t.Errorf("the bundle does not hold %s@%s, pinned in web/graphiql-src/package.json: run make graphiql", name, version)
		}
	}
	for _, name := range []string{"graphiql.js", "graphiql.css"} {
		if info, err := fs.Stat(GraphiQL, name); err != nil || info.Size() == 0 {
			t.Errorf("web/graphiql/%s is missing or empty: run make graphiql", name)
		}
	}
}
