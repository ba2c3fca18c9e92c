package server

import (
	"context"
	"fmt"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/aetheriot/aether-audit/app"
)

// DefaultMaxRootFields bounds the selections of one selection set of a
// GraphQL operation, the root's included: fields (aliases are how a
// document repeats a field), fragment spreads and inline fragments.
const DefaultMaxRootFields = 32

// selectionsPerSetLimit is how many times the per-set limit a whole
// document may hold in selections, counted as written (a fragment once,
// however often it is spread): 2,048 by default, far above any real
// query and far below what makes validation costly.
const selectionsPerSetLimit = 64

// maxSelectionNesting bounds how deeply selection sets may nest in a
// document (the depth limit, which counts fragments inlined, is far lower);
// deeper documents are refused before they are parsed.
const maxSelectionNesting = 64

// singleUseField may appear once per document: each verifyAuditChain
// re-reads and re-hashes a range of a project's history.
const singleUseField = "verifyAuditChain"

// operationShape refuses, before gqlgen parses, validates or plans it, a
// document with a selection set of more than max selections, more than
// max*selectionsPerSetLimit selections in all, selection sets nested
// deeper than maxSelectionNesting, or verifyAuditChain more than once. Validating thousands of selections of one set costs far more
// than running a few of them (fields of one response key are compared
// pairwise), so the check comes first and is cheap: one pass over the
// text, without allocation, that stops at the first refusal. It runs on
// the raw parameters of every transport, after automatic persisted
// queries have supplied the text.
type operationShape struct{ max int }

var _ interface {
	graphql.HandlerExtension
	graphql.OperationParameterMutator
} = operationShape{}

// ExtensionName implements graphql.HandlerExtension.
func (operationShape) ExtensionName() string { return "OperationShape" }

// Validate implements graphql.HandlerExtension.
func (operationShape) Validate(graphql.ExecutableSchema) error { return nil }

// MutateOperationParameters implements graphql.OperationParameterMutator.
func (o operationShape) MutateOperationParameters(ctx context.Context, p *graphql.RawParams) *gqlerror.Error {
	if checked, ok := ctx.Value(shapeCheckedKey{}).(string); ok && checked == p.Query {
		return nil // the POST transport checked this very document
	}
	if msg := checkShape(p.Query, o.max); msg != "" {
		return shapeError(msg)
	}
	return nil
}

// shapeCheckedKey marks, in a request's context, the document whose shape
// was already found acceptable.
type shapeCheckedKey struct{}

// shapeError is the request error of a document refused for its shape.
func shapeError(msg string) *gqlerror.Error {
	err := gqlerror.Errorf("%s", msg)
	err.Extensions = map[string]any{"code": app.CodeBadUserInput}
	return err
}

// checkShape scans a GraphQL document and returns why its shape is
// refused, or "". It reads just enough of the grammar: selection sets are
// the braces outside parentheses (braces inside are object values), a name
// in a selection set starts a selection unless it follows '@' (a
// directive), '...' or 'on' (a fragment name or type condition) or ':' (the
// field an alias names). A document it misreads is one gqlgen refuses.
func checkShape(q string, max int) string { return scanShape(q, max, true) }

// scanShape is checkShape; without singles, a repeated verifyAuditChain is
// not refused (the scan goes on counting selections).
func scanShape(q string, max int, singlesCount bool) string {
	var counts [maxSelectionNesting]int
	depth, parens, singles, total := 0, 0, 0, 0
	count := func() string {
		if counts[depth-1]++; counts[depth-1] > max {
			return tooManySelections(max)
		}
		if total++; total > max*selectionsPerSetLimit {
			return fmt.Sprintf("the document has more than %d selections", max*selectionsPerSetLimit)
		}
		return ""
	}
	afterColon, afterAt, afterSpread, afterOn := false, false, false, false
	for i := 0; i < len(q); {
		c := q[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ',':
			i++
			continue
		case c == '#':
			for i < len(q) && q[i] != '\n' && q[i] != '\r' {
				i++
			}
			continue
		case c == '"':
			i = skipString(q, i)
			afterColon, afterAt, afterSpread, afterOn = false, false, false, false
			continue
		case c == '(':
			parens++
		case c == ')':
			parens--
		case c == '{' && parens == 0:
			if depth == maxSelectionNesting {
				return fmt.Sprintf("selection sets are nested deeper than %d levels", maxSelectionNesting)
			}
			counts[depth] = 0
			depth++
		case c == '}' && parens == 0:
			if depth > 0 {
				depth--
			}
		case c == '.' && i+2 < len(q) && q[i+1] == '.' && q[i+2] == '.':
			i += 3
			afterColon, afterAt, afterOn = false, false, false
			if depth > 0 && parens == 0 {
				if msg := count(); msg != "" {
					return msg
				}
				afterSpread = true
			}
			continue
		case c == ':':
			afterColon = true
			i++
			continue
		case c == '@':
			afterAt = true
			i++
			continue
		case c == '$':
			i = skipName(q, i+1)
			afterColon, afterAt, afterSpread, afterOn = false, false, false, false
			continue
		case isNameStart(c):
			end := skipName(q, i)
			name := q[i:end]
			if depth > 0 && parens == 0 {
				switch {
				case afterAt:
					// a directive's name
				case afterSpread && name == "on":
					afterOn = true
					afterSpread = false
					i = end
					continue
				case afterSpread, afterOn:
					// a fragment's name or a type condition
				case afterColon:
					// the field an alias names
					if name == singleUseField {
						singles++
					}
				default:
					if msg := count(); msg != "" {
						return msg
					}
					if name == singleUseField && !aliasFollows(q, end) {
						singles++
					}
				}
				if singles > 1 && singlesCount {
					return singleUseField + " may appear once per operation"
				}
			}
			afterColon, afterAt, afterSpread, afterOn = false, false, false, false
			i = end
			continue
		}
		afterColon, afterAt, afterSpread, afterOn = false, false, false, false
		i++
	}
	return ""
}

// tooManySelections is the refusal of a selection set over the limit.
func tooManySelections(max int) string {
	return fmt.Sprintf("a selection set has more than %d selections (fields, aliases included, and fragments)", max)
}

// skipString returns the index after the string (or block string) that
// starts at q[i].
func skipString(q string, i int) int {
	if i+2 < len(q) && q[i+1] == '"' && q[i+2] == '"' {
		for j := i + 3; j+2 < len(q); j++ {
			switch {
			case q[j] == '\\' && j+3 < len(q) && q[j+1] == '"' && q[j+2] == '"' && q[j+3] == '"':
				j += 3
			case q[j] == '"' && q[j+1] == '"' && q[j+2] == '"':
				return j + 3
			}
		}
		return len(q)
	}
	for j := i + 1; j < len(q); j++ {
		switch q[j] {
		case '\\':
			j++
		case '"', '\n', '\r':
			return j + 1
		}
	}
	return len(q)
}

// skipName returns the index after the name that starts at q[i].
func skipName(q string, i int) int {
	for i < len(q) && (isNameStart(q[i]) || q[i] >= '0' && q[i] <= '9') {
		i++
	}
	return i
}

func isNameStart(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// aliasFollows reports whether the next token after q[i:] is ':', that is,
// whether the name before i is an alias.
func aliasFollows(q string, i int) bool {
	for i < len(q) {
		switch q[i] {
		case ' ', '\t', '\n', '\r', ',':
			i++
		case '#':
			for i < len(q) && q[i] != '\n' && q[i] != '\r' {
				i++
			}
		default:
			return q[i] == ':'
		}
	}
	return false
}
