package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/aetheriot/aether-audit/client"
	"github.com/aetheriot/aether-audit/outbox"
)

// relayCmd is `aether relay`: the outbox relay as a sidecar, for producers
// in any language that write the aether_outbox table with plain SQL
// (docs/producers.md). It runs outbox.Relay against the producer's
// database and a running Aether.
type relayCmd struct {
	SourceDatabaseURL string        `name:"source-database-url" env:"AETHER_RELAY_SOURCE_DATABASE_URL" required:"" help:"The producer's PostgreSQL, which holds the aether_outbox table (not Aether's own database)."`
	TargetURL         string        `name:"target-url" env:"AETHER_RELAY_TARGET_URL" required:"" help:"Base URL of Aether Audit, e.g. https://audit.example.com."`
	TokenFile         string        `name:"token-file" env:"AETHER_RELAY_TOKEN_FILE" required:"" help:"File holding the bearer token (audit:write and the outbox's projects); read again whenever it changes, so a rotated token is used from its next request."`
	BatchSize         int           `name:"batch-size" env:"AETHER_RELAY_BATCH_SIZE" default:"500" help:"Most events per recordAuditEvents call (1-1000)."`
	PollInterval      time.Duration `name:"poll-interval" env:"AETHER_RELAY_POLL_INTERVAL" default:"250ms" help:"How often an idle relay looks for rows (NOTIFY aether_outbox wakes it sooner), and a standby for the leader's lock."`
	Migrate           bool          `name:"migrate" env:"AETHER_RELAY_MIGRATE" default:"true" negatable:"" help:"Create the aether_outbox table in the source database if it is missing."`
	MetricsAddr       string        `name:"metrics-addr" env:"AETHER_RELAY_METRICS_ADDR" help:"If set, serve the relay's Prometheus metrics (backlog, lag, parked rows) at /metrics on this address, without authentication."`
	LogLevel          string        `name:"log-level" env:"AETHER_LOG_LEVEL" default:"info" enum:"debug,info,warn,error" help:"Log level: debug, info, warn or error."`
	LogFormat         string        `name:"log-format" env:"AETHER_LOG_FORMAT" default:"text" enum:"text,json" help:"Log format: text or json."`
}

// Run ships the outbox until SIGINT or SIGTERM.
func (c *relayCmd) Run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := (&databaseFlags{LogLevel: c.LogLevel, LogFormat: c.LogFormat}).logger()
	if c.BatchSize < 1 || c.BatchSize > client.MaxBatch {
		return fmt.Errorf("--batch-size must be between 1 and %d", client.MaxBatch)
	}
	tokens := &fileTokenSource{path: c.TokenFile}
	if _, err := tokens.Token(ctx); err != nil {
		return err
	}
	cl, err := client.New(c.TargetURL, client.Options{TokenSource: tokens})
	if err != nil {
		return err
	}
	pool, err := pgxpool.New(ctx, c.SourceDatabaseURL)
	if err != nil {
		return errors.New("--source-database-url: not a PostgreSQL connection URL")
	}
	defer pool.Close()
	if c.Migrate {
		if err := outbox.Migrate(ctx, pool); err != nil {
			return err
		}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if c.MetricsAddr != "" {
		ln, err := net.Listen("tcp", c.MetricsAddr)
		if err != nil {
			return fmt.Errorf("--metrics-addr: %w", err)
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		defer srv.Close()
		log.Info("relay metrics", "addr", ln.Addr().String())
	}
	relay, err := outbox.NewRelay(outbox.RelayConfig{Pool: pool, Client: cl, BatchSize: c.BatchSize,
		PollInterval: c.PollInterval, Logger: log, Registerer: reg})
	if err != nil {
		return err
	}
	log.Info("relay started", "target", c.TargetURL)
	err = relay.Run(ctx)
	log.Info("relay stopped")
	return err
}

// fileTokenSource reads the token from a file, again whenever the file's
// modification time or size changed.
type fileTokenSource struct {
	path string

	mu    sync.Mutex
	token string
	mod   time.Time
	size  int64
}

// Token returns the file's token.
func (s *fileTokenSource) Token(context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fi, err := os.Stat(s.path)
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	if s.token != "" && fi.ModTime().Equal(s.mod) && fi.Size() == s.size {
		return s.token, nil
	}
	b, err := os.ReadFile(s.path)
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", errors.New("--token-file: the file is empty")
	}
	s.token, s.mod, s.size = tok, fi.ModTime(), fi.Size()
	return tok, nil
}

var _ client.TokenSource = (*fileTokenSource)(nil)
