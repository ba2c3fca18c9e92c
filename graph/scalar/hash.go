package scalar

import (
	"encoding/hex"
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
	var h domain.Hash
	s, _ := v.(string)
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(h) {
		return h, fmt.Errorf("a hash must be %d hex digits", 2*len(h))
	}
	copy(h[:], b)
	return h, nil
}
