// Command device-service is a small producer of audit events: it keeps
// devices' firmware versions in its own PostgreSQL and records
// device.firmware.updated in Aether Audit through the transactional outbox,
// so that the change and its audit event commit together or not at all.
//
//	PUT /devices/{id}/firmware  {"version":"1.2.0","actor":"alice"}
//
// updates the device's row and writes the event into the outbox table in
// one transaction; an outbox relay running in this process ships the
// committed event to Aether afterwards, and keeps it while Aether is
// unreachable. GET /metrics shows the relay's backlog and lag.
//
// Configuration, from the environment:
//
//	DATABASE_URL   the service's own PostgreSQL (default postgres://postgres@127.0.0.1:5432/device_service)
//	AETHER_URL     Aether Audit's base URL (default http://127.0.0.1:8080)
//	TOKEN          a token with audit:write for PROJECT (required; make run prints one)
//	PROJECT        the Aether project of the events (default demo)
//	ADDR           listen address (default 127.0.0.1:8090)
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/aetheriot/aether-audit/client"
	"github.com/aetheriot/aether-audit/outbox"
)

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg := config{
		databaseURL: env("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/device_service"),
		aetherURL:   env("AETHER_URL", "http://127.0.0.1:8080"),
		token:       os.Getenv("TOKEN"),
		project:     env("PROJECT", "demo"),
		addr:        env("ADDR", "127.0.0.1:8090"),
	}
	if err := run(ctx, cfg, log); err != nil {
		log.Error("device-service", "error", err)
		os.Exit(1)
	}
}

// config is the service's settings.
type config struct {
	databaseURL, aetherURL, token, project, addr string
}

// env is the environment variable name, or def when unset.
func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// run serves until ctx ends.
func run(ctx context.Context, cfg config, log *slog.Logger) error {
	if cfg.token == "" {
		return errors.New("TOKEN is required (make run prints one)")
	}
	db, err := pgxpool.New(ctx, cfg.databaseURL)
	if err != nil {
		return err
	}
	defer db.Close()
	svc := &service{db: db, project: cfg.project}
	if err := svc.migrate(ctx); err != nil {
		return err
	}
	aether, err := client.New(cfg.aetherURL, client.Options{Token: cfg.token})
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	relay, err := outbox.NewRelay(outbox.RelayConfig{Pool: db, Client: aether, Logger: log, Registerer: reg})
	if err != nil {
		return err
	}
	relayDone := make(chan error, 1)
	go func() { relayDone <- relay.Run(ctx) }()

	mux := svc.routes()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Addr: cfg.addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	log.Info("device-service listening", "addr", cfg.addr, "aether", cfg.aetherURL, "project", cfg.project)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return <-relayDone
}

// service is the device service: its database and the Aether project of
// its events.
type service struct {
	db      *pgxpool.Pool
	project string
}

// migrate creates the service's table and the outbox.
func (s *service) migrate(ctx context.Context) error {
	if _, err := s.db.Exec(ctx, `CREATE TABLE IF NOT EXISTS devices (
		id text PRIMARY KEY, firmware text NOT NULL, updated_at timestamptz NOT NULL)`); err != nil {
		return fmt.Errorf("creating devices: %w", err)
	}
	return outbox.Migrate(ctx, s.db)
}

// updateFirmware sets a device's firmware and records the audit event in
// the same transaction, and returns the event's id.
func (s *service) updateFirmware(ctx context.Context, deviceID, version, actor string) (string, error) {
	var eventID string
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		var previous *string
		err := tx.QueryRow(ctx, `SELECT firmware FROM devices WHERE id = $1 FOR UPDATE`, deviceID).Scan(&previous)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO devices (id, firmware, updated_at) VALUES ($1, $2, now())
			ON CONFLICT (id) DO UPDATE SET firmware = excluded.firmware, updated_at = excluded.updated_at`, deviceID, version); err != nil {
			return err
		}
		details, err := json.Marshal(map[string]any{"from": previous, "to": version})
		if err != nil {
			return err
		}
		eventID, err = outbox.Record(ctx, tx, client.EventInput{
			ProjectID: s.project, Action: "device.firmware.updated", OccurredAt: time.Now(),
			Subject:  client.Subject{Type: client.SubjectUser, ID: actor},
			Resource: client.Resource{Type: "device", ID: deviceID}, Outcome: client.OutcomeSuccess,
			Details: details,
		})
		return err
	})
	return eventID, err
}

// routes are the service's HTTP API.
func (s *service) routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("PUT /devices/{id}/firmware", func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Version string `json:"version"`
			Actor   string `json:"actor"`
		}
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&in); err != nil || in.Version == "" || in.Actor == "" {
			http.Error(w, `want {"version":"...","actor":"..."}`, http.StatusBadRequest)
			return
		}
		id, err := s.updateFirmware(r.Context(), r.PathValue("id"), in.Version, in.Actor)
		if err != nil {
			http.Error(w, "internal error", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"device": r.PathValue("id"), "firmware": in.Version, "auditEventId": id})
	})
	return mux
}
