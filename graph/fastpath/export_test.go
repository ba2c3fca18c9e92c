package fastpath

import (
	"slices"
	"sort"
	"strings"

	"github.com/vektah/gqlparser/v2/ast"
)

// PagesServed returns how many auditEvents pages AroundRootFields served
// (rather than the generic executor).
func (p *Paths) PagesServed() uint64 { return p.pages.Load() }

// UnreadInputs lists the arguments and input fields of the fast-pathed
// operations in schema that the fast paths do not read, and those they
// read that schema lacks, as "owner.name", and defaults they do not apply
// as "owner.name = value".
func UnreadInputs(schema *ast.Schema) []string {
	var out []string
	for owner, read := range inputsRead {
		var names []string
		var defaults []*ast.Value
		if typ, field, isField := strings.Cut(owner, "."); isField {
			if def := schema.Types[typ]; def != nil && def.Fields.ForName(field) != nil {
				for _, a := range def.Fields.ForName(field).Arguments {
					names, defaults = append(names, a.Name), append(defaults, a.DefaultValue)
				}
			}
		} else if def := schema.Types[owner]; def != nil {
			for _, f := range def.Fields {
				names, defaults = append(names, f.Name), append(defaults, f.DefaultValue)
			}
		}
		for i, name := range names {
			if !slices.Contains(read, name) {
				out = append(out, owner+"."+name+" is not read by the fast path")
			} else if want, applied := defaultsRead[owner+"."+name]; defaults[i] != nil && (!applied || defaults[i].String() != want) {
				out = append(out, owner+"."+name+" = "+defaults[i].String()+": the fast path does not apply this default")
			}
		}
		for _, name := range read {
			if !slices.Contains(names, name) {
				out = append(out, owner+"."+name+" is read by the fast path but not in the schema")
			}
		}
	}
	sort.Strings(out)
	return out
}

// PlansCached returns how many documents the record and subscribe plan
// caches hold, and the bytes of those documents.
func (p *Paths) PlansCached() (documents, bytes int) {
	return p.records.cache.Len() + p.subscribes.cache.Len(), p.records.cache.Bytes() + p.subscribes.cache.Bytes()
}
