package store_test

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/store"
	"github.com/aetheriot/aether-audit/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

// emptyDatabase returns a pool on a new, unmigrated database.
func emptyDatabase(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), storetest.NewEmptyDatabase(t))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// TestMigrateConcurrently runs migrations from several goroutines at once,
// as processes starting together would: each migration is applied once,
// and the database ends current.
func TestMigrateConcurrently(t *testing.T) {
	pool := emptyDatabase(t)
	ctx := context.Background()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))

	current, err := store.MigrationsCurrent(ctx, pool)
	require.NoError(t, err)
	require.False(t, current)

	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() { errs[i] = store.Migrate(ctx, pool, logger) })
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	current, err = store.MigrationsCurrent(ctx, pool)
	require.NoError(t, err)
	require.True(t, current)

	var dup int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM (SELECT version_id FROM goose_db_version
		WHERE version_id > 0 GROUP BY version_id HAVING count(*) > 1) d`).Scan(&dup))
	require.Zero(t, dup, "each migration applied once")
	var riverTables int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE tablename = 'river_job'`).Scan(&riverTables))
	require.Equal(t, 1, riverTables)

	// Migrating an up-to-date database is a no-op.
	require.NoError(t, store.Migrate(ctx, pool, logger))
}
