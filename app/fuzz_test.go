package app_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
)

// FuzzDecodeCursor feeds arbitrary text to DecodeCursor, the parser of
// auditEvents' after cursors: it never panics, and what it accepts names
// an order and a sequence whose own cursor decodes to the same. (The HTTP
// answers to bad cursors are fuzzed in package server.) The seed corpus is
// in testdata/fuzz/FuzzDecodeCursor.
func FuzzDecodeCursor(f *testing.F) {
	f.Add(app.EncodeCursor(domain.OldestFirst, 1))
	f.Add(app.EncodeCursor(domain.NewestFirst, 1<<64-1))
	f.Fuzz(func(t *testing.T, cursor string) {
		order, seq, err := app.DecodeCursor(cursor)
		if err != nil {
			return
		}
		require.LessOrEqual(t, len(cursor), 64)
		require.Contains(t, []domain.SortOrder{domain.OldestFirst, domain.NewestFirst}, order)
		order2, seq2, err := app.DecodeCursor(app.EncodeCursor(order, seq))
		require.NoError(t, err)
		require.Equal(t, order, order2)
		require.Equal(t, seq, seq2)
	})
}
