package store

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/store/dbsqlc"
)

// TestSortRefRowsOrdersBySequence: AuditEventRefs has no ORDER BY (its
// generic plan would sort), so the store puts its rows in sequence order,
// whatever order they come in.
func TestSortRefRowsOrdersBySequence(t *testing.T) {
	rows := []dbsqlc.AuditEventRefsRow{{Sequence: 7}, {Sequence: 3}, {Sequence: 5}, {Sequence: 4}}
	sortRefRows(rows)
	got := make([]int64, len(rows))
	for i, r := range rows {
		got[i] = r.Sequence
	}
	require.Equal(t, []int64{3, 4, 5, 7}, got)

	sorted := []dbsqlc.AuditEventRefsRow{{Sequence: 1}, {Sequence: 2}}
	sortRefRows(sorted)
	require.Equal(t, int64(1), sorted[0].Sequence)
	sortRefRows(nil)
}
