package scalar

import (
	"fmt"
	"io"

	"github.com/99designs/gqlgen/graphql"

	"github.com/aetheriot/aether-audit/domain"
)

// MarshalHash writes a hash (chainHash, headHash) as a String of lower-case
// hex digits.
func MarshalHash(h domain.Hash) graphql.Marshaler {
	return graphql.WriterFunc(func(w io.Writer) { _, _ = io.WriteString(w, `"`+h.String()+`"`) })
}

// UnmarshalHash reads a hash from its String of hex digits.
func UnmarshalHash(v any) (domain.Hash, error) {
	s, _ := v.(string)
	h, err := domain.ParseHash(s)
	if err != nil {
		return h, fmt.Errorf("a hash must be %d hex digits", 2*len(h))
	}
	return h, nil
}
