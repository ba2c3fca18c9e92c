// Package scalar implements the GraphQL custom scalars: Uint64 (a decimal
// string, lossless in JavaScript) and JSON (an object kept as raw JSON).
package scalar

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"github.com/99designs/gqlgen/graphql"
)

// MarshalUint64 writes v as a quoted decimal string.
func MarshalUint64(v uint64) graphql.Marshaler {
	return graphql.WriterFunc(func(w io.Writer) {
		_, _ = io.WriteString(w, `"`+strconv.FormatUint(v, 10)+`"`)
	})
}

// UnmarshalUint64 accepts a decimal string ("42"); a JSON number is accepted
// too when it is a non-negative integer that JavaScript represents exactly.
func UnmarshalUint64(v any) (uint64, error) {
	switch t := v.(type) {
	case string:
		n, err := strconv.ParseUint(t, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("Uint64 must be a decimal string of an unsigned 64-bit integer")
		}
		return n, nil
	case json.Number:
		n, err := strconv.ParseUint(string(t), 10, 64)
		if err != nil || n > 1<<53 {
			return 0, fmt.Errorf("Uint64 must be a decimal string of an unsigned 64-bit integer")
		}
		return n, nil
	case int64:
		if t < 0 || t > 1<<53 {
			return 0, fmt.Errorf("Uint64 must be a decimal string of an unsigned 64-bit integer")
		}
		return uint64(t), nil
	case int:
		if t < 0 || t > 1<<53 {
			return 0, fmt.Errorf("Uint64 must be a decimal string of an unsigned 64-bit integer")
		}
		return uint64(t), nil
	default:
		return 0, fmt.Errorf("Uint64 must be a decimal string of an unsigned 64-bit integer")
	}
}

// MarshalJSON writes raw JSON as is ({} when empty).
func MarshalJSON(v json.RawMessage) graphql.Marshaler {
	return graphql.WriterFunc(func(w io.Writer) {
		if len(v) == 0 {
			_, _ = io.WriteString(w, "{}")
			return
		}
		_, _ = w.Write(v)
	})
}

// UnmarshalJSON accepts a JSON object, given inline in the query or as a
// variable, and returns it encoded; domain.CanonicalJSON later validates and
// canonicalizes it.
func UnmarshalJSON(v any) (json.RawMessage, error) {
	if v == nil {
		return nil, nil
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, fmt.Errorf("JSON must be an object")
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("JSON must be an object")
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
