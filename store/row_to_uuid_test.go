package store_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/store"
	"github.com/aetheriot/aether-audit/store/storetest"
)

// TestRowToUUIDCopiesBinaryIDs: the ids a statement returns (RETURNING id
// of the delivery statements) are read from the rows' binary values with
// no allocation per row, and text-format rows (the simple protocol) still
// scan.
func TestRowToUUIDCopiesBinaryIDs(t *testing.T) {
	ctx := context.Background()
	pool := storetest.NewPool(t)
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()

	ids := make([]uuid.UUID, 201)
	for i := range ids {
		ids[i] = uuid.New()
	}
	collect := func(ids []uuid.UUID, mode pgx.QueryExecMode) []uuid.UUID {
		text := make([]string, len(ids))
		for i, id := range ids {
			text[i] = id.String()
		}
		rows, _ := conn.Query(ctx, `SELECT id::uuid FROM unnest(string_to_array($1::text, ',')) WITH ORDINALITY AS u(id, n) ORDER BY n`,
			mode, strings.Join(text, ","))
		got, err := pgx.CollectRows(rows, store.RowToUUID)
		require.NoError(t, err)
		return got
	}
	require.Equal(t, ids, collect(ids, pgx.QueryExecModeCacheStatement))
	require.Equal(t, ids, collect(ids, pgx.QueryExecModeSimpleProtocol))

	one := testing.AllocsPerRun(20, func() { collect(ids[:1], pgx.QueryExecModeCacheStatement) })
	all := testing.AllocsPerRun(20, func() { collect(ids, pgx.QueryExecModeCacheStatement) })
	// pgx's rows take one allocation per row, the result slice's growth
	// about 10 over 200 rows; a Scan into the id took two more per row.
	require.Less(t, (all-one)/200, 1.5, "allocations per row: %v rows of one id, %v rows of 201", one, all)
}
