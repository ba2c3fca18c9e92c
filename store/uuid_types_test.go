package store_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/store/storetest"
)

// TestPoolsEncodeUUIDsWithoutTheirStringForm: on a configured pool's
// connection, a uuid.UUID is written as binary uuid with no allocation
// beyond boxing (pgx's default goes through its driver.Valuer string), and ids still
// round-trip through the server, arrays and NULLs included.
func TestPoolsEncodeUUIDsWithoutTheirStringForm(t *testing.T) {
	ctx := context.Background()
	pool := storetest.NewPool(t)
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()

	id := uuid.New()
	tm := conn.Conn().TypeMap()
	buf := make([]byte, 0, 32)
	allocs := testing.AllocsPerRun(100, func() {
		buf, err = tm.Encode(pgtype.UUIDOID, pgtype.BinaryFormatCode, id, buf[:0])
	})
	require.NoError(t, err)
	require.Equal(t, id[:], buf)
	plain := pgtype.NewMap() // pgx's default: through the string
	defaults := testing.AllocsPerRun(100, func() {
		buf, err = plain.Encode(pgtype.UUIDOID, pgtype.BinaryFormatCode, id, buf[:0])
	})
	require.NoError(t, err)
	require.Equal(t, id[:], buf)
	require.LessOrEqual(t, allocs, 2.0, "a uuid.UUID is encoded directly (boxed, at most)")
	require.Greater(t, defaults, 10.0, "pgx's default, which ConfigurePool replaces")

	var got uuid.UUID
	var ids []uuid.UUID
	var null *uuid.UUID
	require.NoError(t, conn.QueryRow(ctx, `SELECT $1::uuid, ARRAY[$1::uuid, $2::uuid], NULL::uuid`, id, uuid.Nil).Scan(&got, &ids, &null))
	require.Equal(t, id, got)
	require.Equal(t, []uuid.UUID{id, uuid.Nil}, ids)
	require.Nil(t, null)
}

// TestPoolsScanBinaryUUIDsByCopy: on a configured pool's connection, a
// binary uuid scanned into a uuid.UUID is copied, without allocating (the
// uuid package's sql.Scanner took its string form, parsed), in prepared
// statements and the text protocol alike; a NULL leaves the target as it
// is, as before, and a *uuid.UUID target gets nil.
func TestPoolsScanBinaryUUIDsByCopy(t *testing.T) {
	ctx := context.Background()
	pool := storetest.NewPool(t)
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()

	ids := make([]uuid.UUID, 101)
	for i := range ids {
		ids[i] = uuid.New()
	}
	read := func(mode pgx.QueryExecMode, ids []uuid.UUID) []uuid.UUID {
		text := make([]string, len(ids))
		for i, id := range ids {
			text[i] = id.String()
		}
		rows, _ := conn.Query(ctx, `SELECT u::uuid FROM unnest(string_to_array($1::text, ',')) WITH ORDINALITY AS x(u, n) ORDER BY n`,
			mode, strings.Join(text, ","))
		out := make([]uuid.UUID, 0, len(ids))
		var id uuid.UUID
		_, err := pgx.ForEachRow(rows, []any{&id}, func() error {
			out = append(out, id)
			return nil
		})
		require.NoError(t, err)
		return out
	}
	require.Equal(t, ids, read(pgx.QueryExecModeCacheStatement, ids))
	require.Equal(t, ids, read(pgx.QueryExecModeSimpleProtocol, ids))
	one := testing.AllocsPerRun(20, func() { read(pgx.QueryExecModeCacheStatement, ids[:1]) })
	all := testing.AllocsPerRun(20, func() { read(pgx.QueryExecModeCacheStatement, ids) })
	require.Less(t, (all-one)/100, 1.5, "allocations per row (pgx's one per row included): %v for 1 row, %v for 101", one, all)

	kept := uuid.New()
	got, ptr := kept, &kept
	require.NoError(t, conn.QueryRow(ctx, `SELECT NULL::uuid, NULL::uuid`).Scan(&got, &ptr))
	require.Equal(t, kept, got, "a NULL leaves a uuid.UUID as it is")
	require.Nil(t, ptr)
}
