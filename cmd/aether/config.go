package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aetheriot/aether-audit/auth"
	"github.com/aetheriot/aether-audit/internal/pgcluster"
	"github.com/aetheriot/aether-audit/store"
)

// dataDirFlags locate local state: the embedded database and generated
// secrets.
type dataDirFlags struct {
	DataDir string `name:"data-dir" env:"AETHER_DATA_DIR" default:"./.aether" help:"Folder for local state: the embedded PostgreSQL cluster and generated secrets."`
}

// databaseFlags choose the database.
type databaseFlags struct {
	dataDirFlags
	DatabaseURL string `name:"database-url" env:"DATABASE_URL" help:"PostgreSQL connection URL. When unset, a private cluster is run under the data dir from the installed PostgreSQL binaries."`
	LogLevel    string `name:"log-level" env:"AETHER_LOG_LEVEL" default:"info" enum:"debug,info,warn,error" help:"Log level: debug, info, warn or error."`
	LogFormat   string `name:"log-format" env:"AETHER_LOG_FORMAT" default:"text" enum:"text,json" help:"Log format: text or json."`
}

// secretFlags choose the HS256 secret of local tokens.
type secretFlags struct {
	JWTSecret string `name:"jwt-secret" env:"AETHER_JWT_SECRET" help:"HS256 secret (at least 32 bytes) for local tokens. When unset, one is generated into <data-dir>/jwt-secret and reused."`
}

func (f *databaseFlags) logger() *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(f.LogLevel))
	opts := &slog.HandlerOptions{Level: level}
	if f.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
}

// database is an open pool, and the embedded cluster behind it if any.
type database struct {
	Pool    *pgxpool.Pool
	cluster *pgcluster.Cluster
	// keepCluster leaves a joined embedded cluster running on close: a
	// short command (migrate, seed) must not stop the server of a running
	// `aether serve`.
	keepCluster bool
}

// openDatabase connects to DATABASE_URL or, when unset, starts (or joins)
// the embedded cluster in the data dir.
func (f *databaseFlags) openDatabase(ctx context.Context, logger *slog.Logger) (*database, error) {
	db := &database{}
	url := f.DatabaseURL
	if url == "" {
		c, err := pgcluster.Start(ctx, pgcluster.Options{DataDir: filepath.Join(f.DataDir, "postgres"), Logger: logger})
		if errors.Is(err, pgcluster.ErrNoBinaries) {
			return nil, fmt.Errorf("%w\n\nSet DATABASE_URL to use an existing PostgreSQL server instead", pgcluster.ErrNoBinaries)
		}
		if err != nil {
			return nil, err
		}
		db.cluster = c
		url = c.URL()
		logger.Info("using embedded PostgreSQL", "cluster_dir", c.Dir())
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		db.close(ctx)
		return nil, fmt.Errorf("parsing DATABASE_URL: %s", redactURL(err.Error()))
	}
	if cfg.MaxConns < 16 {
		cfg.MaxConns = 16
	}
	store.ConfigurePool(cfg)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		db.close(ctx)
		return nil, fmt.Errorf("connecting to database: %w", err)
	}
	db.Pool = pool
	return db, nil
}

func (db *database) close(ctx context.Context) {
	if db.Pool != nil {
		db.Pool.Close()
	}
	if db.cluster != nil && !(db.keepCluster && db.cluster.Joined()) {
		_ = db.cluster.Stop(context.WithoutCancel(ctx))
	}
}

// openMigrated opens the database and applies our and River's migrations.
// A short-lived command passes keepCluster so that it leaves running an
// embedded cluster it merely joined. When appRole names a runtime role (or
// the database is the embedded one, whose runtime role is
// store.DefaultAppRole), it also creates or updates that role and applies
// its grants, under the migration lock; the login of the database is the
// owner.
func (f *databaseFlags) openMigrated(ctx context.Context, logger *slog.Logger, keepCluster bool, appRole string) (*database, error) {
	db, err := f.openDatabase(ctx, logger)
	if err != nil {
		return nil, err
	}
	db.keepCluster = keepCluster
	role := db.appRole(appRole)
	if role == nil {
		err = store.Migrate(ctx, db.Pool, logger)
	} else {
		err = store.MigrateWithAppRole(ctx, db.Pool, logger, *role)
	}
	if err != nil {
		db.close(ctx)
		return nil, err
	}
	return db, nil
}

// appRolePasswordEnv names the environment variable holding the runtime
// role's password: only the environment, never a flag, so that it shows in
// no process list. It is never logged.
const appRolePasswordEnv = "AETHER_APP_ROLE_PASSWORD"

// appRole is the runtime role to set up: the one named, else, for the
// embedded database, store.DefaultAppRole; nil for none.
func (db *database) appRole(name string) *store.AppRole {
	if name == "" && db.cluster != nil {
		name = store.DefaultAppRole
	}
	if name == "" {
		return nil
	}
	return &store.AppRole{Name: name, Password: os.Getenv(appRolePasswordEnv)}
}

// openServing opens the database serve runs on. It migrates with the
// login of DATABASE_URL (or the embedded cluster's superuser); with a
// runtime role (--app-role, or the embedded database's), it then grants
// that role and serves over a pool logged in as it, on the same server and
// database, closing the migrating login's pool. Without one it serves as
// the DATABASE_URL login itself.
func (f *databaseFlags) openServing(ctx context.Context, logger *slog.Logger, appRole string) (*database, error) {
	db, err := f.openMigrated(ctx, logger, false, appRole)
	if err != nil {
		return nil, err
	}
	role := db.appRole(appRole)
	if role == nil {
		return db, nil
	}
	cfg := db.Pool.Config().Copy()
	cfg.ConnConfig.User = role.Name
	cfg.ConnConfig.Password = role.Password
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err == nil {
		err = pool.Ping(ctx)
		if err != nil {
			pool.Close()
		}
	}
	if err != nil {
		db.close(ctx)
		return nil, fmt.Errorf("connecting as the runtime role %q: %w", role.Name, err)
	}
	db.Pool.Close()
	db.Pool = pool
	logger.Info("serving as the runtime role", "role", role.Name)
	return db, nil
}

// hmacSecret returns the HS256 secret: --jwt-secret, or the one generated
// into the data dir.
func hmacSecret(secret secretFlags, dir dataDirFlags) ([]byte, error) {
	if secret.JWTSecret != "" {
		return auth.ParseSecret(secret.JWTSecret)
	}
	// The data dir stays searchable, so that the embedded PostgreSQL, run
	// as an unprivileged user when aether runs as root, can live below it
	// where the parent folders allow. The secret file itself is 0600.
	if err := os.MkdirAll(dir.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating data dir: %w", err)
	}
	return auth.LoadOrCreateSecret(filepath.Join(dir.DataDir, "jwt-secret"))
}

// redactURL hides a password that a parse error might quote.
func redactURL(s string) string {
	if i := strings.Index(s, "://"); i >= 0 {
		if j := strings.Index(s[i:], "@"); j >= 0 {
			return s[:i+3] + "***" + s[i+j:]
		}
	}
	return s
}
