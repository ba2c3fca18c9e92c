package store_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
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
