package store

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/aetheriot/aether-audit/migrations"
)

// migrationLockKey is the advisory lock that serialises migrations across
// processes starting at once ("aether-migrate" hashed to a constant).
const migrationLockKey int64 = 0x61657468_65726d67

// Migrate brings the database to the current schema: our own tables (goose,
// embedded migrations) and River's (rivermigrate). It holds a session
// advisory lock throughout, so two processes migrating at once apply each
// migration exactly once; applying an up-to-date database is a no-op.
func Migrate(ctx context.Context, pool *pgxpool.Pool, logger *slog.Logger) error {
	return migrate(ctx, pool, logger, nil)
}

// MigrateWithAppRole migrates as Migrate does and then, under the same
// lock, creates or updates the runtime role and (re)applies its grants
// (GrantAppRole). pool must be connected as the owner of the tables.
func MigrateWithAppRole(ctx context.Context, pool *pgxpool.Pool, logger *slog.Logger, role AppRole) error {
	return migrate(ctx, pool, logger, &role)
}

func migrate(ctx context.Context, pool *pgxpool.Pool, logger *slog.Logger, role *AppRole) error {
	// The lock lives on a dedicated connection, outside the pool, so that
	// waiting migrators never starve the pool that goose and River use.
	conn, err := pgx.ConnectConfig(ctx, pool.Config().ConnConfig.Copy())
	if err != nil {
		return fmt.Errorf("connecting for migrations: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", migrationLockKey); err != nil {
		return fmt.Errorf("taking migration lock: %w", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", migrationLockKey) //nolint:errcheck // released with the session anyway

	provider, db, err := newGoose(pool)
	if err != nil {
		return err
	}
	defer db.Close()
	results, err := provider.Up(ctx)
	if err != nil {
		return fmt.Errorf("applying migrations: %w", err)
	}
	for _, r := range results {
		logger.Info("applied migration", "version", r.Source.Version, "duration", r.Duration)
	}

	migrator, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return fmt.Errorf("creating river migrator: %w", err)
	}
	res, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil)
	if err != nil {
		return fmt.Errorf("applying river migrations: %w", err)
	}
	for _, v := range res.Versions {
		logger.Info("applied river migration", "version", v.Version)
	}
	if role != nil {
		if err := GrantAppRole(ctx, conn, *role); err != nil {
			return err
		}
		logger.Info("granted the runtime role its privileges", "role", role.Name)
	}
	return nil
}

// MigrationsCurrent reports whether every embedded migration of ours has been
// applied. /readyz uses it.
func MigrationsCurrent(ctx context.Context, pool *pgxpool.Pool) (bool, error) {
	provider, db, err := newGoose(pool)
	if err != nil {
		return false, err
	}
	defer db.Close()
	pending, err := provider.HasPending(ctx)
	if err != nil {
		return false, fmt.Errorf("checking migrations: %w", err)
	}
	return !pending, nil
}

func newGoose(pool *pgxpool.Pool) (*goose.Provider, interface{ Close() error }, error) {
	db := stdlib.OpenDBFromPool(pool)
	provider, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS)
	if err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("loading migrations: %w", err)
	}
	return provider, db, nil
}
