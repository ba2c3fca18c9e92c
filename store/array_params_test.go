package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/store"
	"github.com/aetheriot/aether-audit/store/storetest"
)

// TestArrayParamsEncodeWithoutBoxingElements: the delivery statements'
// array parameters (uuid[], text[], timestamptz[], int[] with NULLs) reach
// PostgreSQL as the same values as pgx's own slices (prepared statements,
// as the store runs them), NULL and empty arrays included, and encode with a few
// allocations per array instead of one or two per element.
func TestArrayParamsEncodeWithoutBoxingElements(t *testing.T) {
	ctx := context.Background()
	pool := storetest.NewPool(t)
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()

	const n = 100
	ids, texts, times, ints := make([]uuid.UUID, n), make([]string, n), make([]time.Time, n), make([]pgtype.Int8, n)
	base := time.Date(2026, 12, 3, 8, 0, 0, 123456000, time.UTC)
	for i := range n {
		ids[i], texts[i], times[i] = uuid.New(), string(rune('a'+i%26))+"é,\"{x}\"", base.Add(time.Duration(i)*time.Minute)
		if i%3 != 0 {
			ints[i] = pgtype.Int8{Int64: int64(i) * 1000, Valid: true}
		}
	}
	const query = `SELECT $1::uuid[]::text, $2::text[]::text, $3::timestamptz[]::text, $4::bigint[]::text, $4::int[]::text`
	read := func(args []any, mode pgx.QueryExecMode) []string {
		out := make([]string, 5)
		var nulls [5]*string
		require.NoError(t, conn.QueryRow(ctx, query, append([]any{mode}, args...)...).Scan(&nulls[0], &nulls[1], &nulls[2], &nulls[3], &nulls[4]))
		for i, s := range nulls {
			if s != nil {
				out[i] = *s
			} else {
				out[i] = "NULL"
			}
		}
		return out
	}
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeDescribeExec} {
		want := read(store.ArrayParams(ids, texts, times, ints, false), mode)
		require.Equal(t, want, read(store.ArrayParams(ids, texts, times, ints, true), mode), "mode %v", mode)
		require.Equal(t, read(store.ArrayParams(nil, nil, nil, nil, false), mode),
			read(store.ArrayParams(nil, nil, nil, nil, true), mode), "NULL arrays, mode %v", mode)
		require.Equal(t, read(store.ArrayParams([]uuid.UUID{}, []string{}, []time.Time{}, []pgtype.Int8{}, false), mode),
			read(store.ArrayParams([]uuid.UUID{}, []string{}, []time.Time{}, []pgtype.Int8{}, true), mode), "empty arrays, mode %v", mode)
	}

	m := conn.Conn().TypeMap()
	oids := []uint32{pgtype.UUIDArrayOID, pgtype.TextArrayOID, pgtype.TimestamptzArrayOID, pgtype.Int8ArrayOID}
	buf := make([]byte, 0, 64<<10)
	encode := func(args []any) float64 {
		return testing.AllocsPerRun(20, func() {
			for i, a := range args {
				_, err := m.Encode(oids[i], pgtype.BinaryFormatCode, a, buf[:0])
				require.NoError(t, err)
			}
		})
	}
	plain, params := encode(store.ArrayParams(ids, texts, times, ints, false)), encode(store.ArrayParams(ids, texts, times, ints, true))
	t.Logf("allocations to encode four arrays of %d: pgx's slices %v, array params %v", n, plain, params)
	require.Less(t, params, 20.0, "array params box their elements (pgx's slices: %v)", plain)
}
