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
// embedded cluster it merely joined.
func (f *databaseFlags) openMigrated(ctx context.Context, logger *slog.Logger, keepCluster bool) (*database, error) {
	db, err := f.openDatabase(ctx, logger)
	if err != nil {
		return nil, err
	}
	db.keepCluster = keepCluster
	if err := store.Migrate(ctx, db.Pool, logger); err != nil {
		db.close(ctx)
		return nil, err
	}
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
