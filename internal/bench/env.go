package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/auth"
	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/internal/pgcluster"
	"github.com/aetheriot/aether-audit/seed"
	"github.com/aetheriot/aether-audit/server"
	"github.com/aetheriot/aether-audit/store"
)

// benchDatabase is the database the bench works in, AETHER_BENCH_DATABASE
// or aether_bench (so that benches of different branches on one server can
// keep apart). It is kept between runs so that the million-event project
// is seeded only once.
var benchDatabase = cmp.Or(os.Getenv("AETHER_BENCH_DATABASE"), "aether_bench")

const (
	// benchTenant is the tenant of every event the bench writes.
	benchTenant = "bench"
	// localURL is the server tried when neither -database-url nor
	// DATABASE_URL is set.
	localURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	// oursMaxConns is the pool size of our side, as `aether serve` sets it.
	oursMaxConns = 16
)

// env is what every scenario runs against: the bench database, our service
// served in process over a real loopback socket, and a client for it.
type env struct {
	// pool is our service's pool, sized as in production.
	pool *pgxpool.Pool
	// app is the use-case layer behind the server, for seeding.
	app *app.App
	// benchURL connects to the bench database; baselines open their own
	// pools on it. Never printed: it may hold a password.
	benchURL string
	// graphqlURL is the in-process server's GraphQL endpoint.
	graphqlURL string
	// authHeader is "Bearer <token>" for tenant bench, every project,
	// audit:read and audit:write. Never printed.
	authHeader string
	client     *http.Client
	// runID tells this run's projects from earlier runs'.
	runID string

	httpServer *http.Server
	verifier   *auth.Verifier
	cluster    *pgcluster.Cluster
	tempDir    string
}

// newEnv prepares the database (creating and migrating aether_bench) and
// starts our server on 127.0.0.1.
func newEnv(ctx context.Context, databaseURL string) (_ *env, err error) {
	e := &env{runID: randomHex(4)}
	defer func() {
		if err != nil {
			e.close()
		}
	}()
	adminURL, err := e.resolveServer(ctx, databaseURL)
	if err != nil {
		return nil, err
	}
	if err := createDatabaseIfMissing(ctx, adminURL, benchDatabase); err != nil {
		return nil, err
	}
	e.benchURL = withDatabase(adminURL, benchDatabase)

	cfg, err := pgxpool.ParseConfig(e.benchURL)
	if err != nil {
		return nil, errors.New("parsing the database URL failed")
	}
	cfg.MaxConns = max(cfg.MaxConns, oursMaxConns)
	cfg.ConnConfig.RuntimeParams["application_name"] = benchApplicationName(e.runID)
	store.ConfigurePool(cfg) // as the service's pools
	if e.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", benchDatabase, err)
	}
	ownBackends = backendsOf(e.pool, benchApplicationName(e.runID))
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if err := store.Migrate(ctx, e.pool, logger); err != nil {
		return nil, err
	}
	e.app = app.New(store.New(e.pool), app.Config{Logger: logger})
	if err := e.startServer(ctx, logger); err != nil {
		return nil, err
	}
	return e, nil
}

// resolveServer returns the URL of a database on the server to use, from
// which aether_bench can be created: databaseURL, else DATABASE_URL, else
// the local server when reachable, else a private cluster in a temporary
// folder.
func (e *env) resolveServer(ctx context.Context, databaseURL string) (string, error) {
	if databaseURL == "" {
		databaseURL = os.Getenv("DATABASE_URL")
	}
	if databaseURL != "" {
		fmt.Fprintf(os.Stderr, "bench: using database server %s\n", redact(databaseURL))
		return databaseURL, nil
	}
	if store.Reachable(ctx, localURL) {
		fmt.Fprintf(os.Stderr, "bench: using database server %s\n", redact(localURL))
		return localURL, nil
	}
	dir, err := os.MkdirTemp("", "aether-bench-pg-")
	if err != nil {
		return "", err
	}
	e.tempDir = dir
	// The server may run as another user (root runs it as postgres),
	// which must be able to reach the data dir inside.
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", err
	}
	fmt.Fprintf(os.Stderr, "bench: no database server reachable; starting a private cluster in %s\n", dir)
	c, err := pgcluster.Start(ctx, pgcluster.Options{DataDir: filepath.Join(dir, "pg"), Database: benchDatabase})
	if err != nil {
		return "", err
	}
	e.cluster = c
	return c.URLFor("postgres"), nil
}

// startServer serves our handler on a loopback socket, as `aether serve`
// does, with an HS256 verifier over a random secret.
func (e *env) startServer(ctx context.Context, logger *slog.Logger) error {
	secret := make([]byte, auth.MinSecretLen)
	if _, err := rand.Read(secret); err != nil {
		return err
	}
	var err error
	if e.verifier, err = auth.NewVerifier(ctx, auth.VerifierConfig{HMACSecret: secret}); err != nil {
		return err
	}
	token, err := auth.MintHS256(secret, auth.TokenRequest{
		Subject:     "bench",
		TenantID:    benchTenant,
		ProjectIDs:  []string{app.AllProjects},
		Permissions: []app.Permission{app.PermissionAuditRead, app.PermissionAuditWrite},
		TTL:         24 * time.Hour,
	}, time.Now())
	if err != nil {
		return err
	}
	e.authHeader = "Bearer " + token

	handler := server.New(server.Config{App: e.app, Verifier: e.verifier, Logger: logger})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	e.httpServer = &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	// Connection goroutines inherit the label, so a CPU profile tells the
	// server's work from the clients' and the baselines'.
	go pprof.Do(context.Background(), pprof.Labels("side", "server"), func(context.Context) {
		_ = e.httpServer.Serve(ln)
	})
	e.graphqlURL = "http://" + ln.Addr().String() + "/graphql"
	e.client = &http.Client{Transport: &http.Transport{
		MaxIdleConns:        64,
		MaxIdleConnsPerHost: 64,
		DisableCompression:  true,
	}}
	return nil
}

// close stops the server and the private cluster, if any.
func (e *env) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if e.httpServer != nil {
		_ = e.httpServer.Shutdown(ctx)
	}
	if e.client != nil {
		e.client.CloseIdleConnections()
	}
	if e.verifier != nil {
		e.verifier.Close()
	}
	if e.pool != nil {
		e.pool.Close()
	}
	if e.cluster != nil {
		_ = e.cluster.Stop(ctx)
	}
	if e.tempDir != "" {
		_ = os.RemoveAll(e.tempDir)
	}
}

// baselinePool opens a pool of exactly conns connections on the bench
// database for a baseline, all connected up front.
func (e *env) baselinePool(ctx context.Context, conns int) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(e.benchURL)
	if err != nil {
		return nil, errors.New("parsing the database URL failed")
	}
	cfg.MaxConns, cfg.MinConns = int32(conns), int32(conns)
	cfg.ConnConfig.RuntimeParams["application_name"] = benchApplicationName(e.runID)
	// The baselines get the same uuid codec: what a competent pgx user
	// registers, so that it is not ours alone that skips the string form.
	store.ConfigurePool(cfg)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
}

// graphQL posts a pre-encoded GraphQL request body to our server and
// returns the response body, read into buf. It fails unless the answer is
// HTTP 200 with data and no errors.
func (e *env) graphQL(ctx context.Context, body []byte, buf *bytes.Buffer) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.graphqlURL, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", e.authHeader)
	resp, err := e.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	buf.Reset()
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return nil, err
	}
	out := buf.Bytes()
	// gqlgen writes "errors" before "data": a clean answer starts with data.
	if resp.StatusCode != http.StatusOK || !bytes.HasPrefix(out, []byte(`{"data":`)) {
		return nil, fmt.Errorf("graphql: HTTP %d: %s", resp.StatusCode, truncate(out, 300))
	}
	return out, nil
}

// graphQLBody encodes a GraphQL-over-HTTP request body.
func graphQLBody(query string, variables map[string]any) ([]byte, error) {
	return json.Marshal(map[string]any{"query": query, "variables": variables})
}

// eventInput returns draft as the JSON value of a RecordAuditEventInput,
// without an id (the server assigns one), so that a body can be sent again
// and again and record new events each time.
func eventInput(d *domain.AuditEventDraft) map[string]any {
	in := map[string]any{
		"projectId":  d.ProjectID,
		"action":     d.Action,
		"occurredAt": d.OccurredAt.Format(time.RFC3339Nano),
		"subject":    map[string]any{"type": d.Subject.Type, "id": d.Subject.ID, "displayName": d.Subject.DisplayName},
		"resource":   map[string]any{"type": d.Resource.Type, "id": d.Resource.ID},
		"outcome":    d.Outcome,
		"details":    d.Details,
	}
	if g := d.Governance; g != nil {
		in["governance"] = map[string]any{"reason": g.Reason, "ticket": g.Ticket, "risk": g.Risk}
	}
	if c := d.Correlation; c != nil {
		in["correlation"] = map[string]any{"requestId": c.RequestID}
	}
	if len(d.EvidenceDigests) > 0 {
		digests := make([]map[string]any, len(d.EvidenceDigests))
		for i, g := range d.EvidenceDigests {
			digests[i] = map[string]any{"algorithm": g.Algorithm, "value": g.Value, "label": g.Label}
		}
		in["evidenceDigests"] = digests
	}
	return in
}

// demoDrafts returns n seed drafts of project, occurring in the past.
func demoDrafts(seedValue uint64, project string, n int) []domain.AuditEventDraft {
	return seed.NewGenerator(seedValue, time.Now().Add(-time.Duration(n)*5*time.Second)).Events(project, n)
}

// sealedEvents returns n demo events of tenant/project, normalized and
// sealed as the service would store them: sequences 1..n, recordedAt now,
// chain hashes and input fingerprints.
func sealedEvents(seedValue uint64, project string, n int) ([]domain.AuditEvent, error) {
	drafts := demoDrafts(seedValue, project, n)
	now := time.Now()
	for i := range drafts {
		if err := drafts[i].Normalize("", now); err != nil {
			return nil, err
		}
	}
	events, _ := domain.ChainHead{}.Append(benchTenant, drafts, now)
	for i := range events {
		events[i].InputFingerprint = drafts[i].Fingerprint()
	}
	return events, nil
}

// eventColumns are the audit_events columns in the order of
// store.AuditEventRow.
var eventColumns = store.AuditEventColumns()

// eventColumnList is eventColumns as an SQL list.
var eventColumnList = strings.Join(eventColumns, ", ")

// rowValues returns e's column values as the store writes them.
func rowValues(e *domain.AuditEvent) []any { return store.AuditEventRow(e) }

// restamp returns a copy of template as a new event of project at seq with
// a fresh id, so that a baseline writes unique rows shaped like ours.
func restamp(template *domain.AuditEvent, project string, seq uint64) domain.AuditEvent {
	ev := *template
	ev.ID = uuid.Must(uuid.NewV7())
	ev.ProjectID = project
	ev.Sequence = seq
	return ev
}

// createDatabaseIfMissing creates database name on the server of adminURL
// unless it exists.
func createDatabaseIfMissing(ctx context.Context, adminURL, name string) error {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("connecting to the database server: %w", err)
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return fmt.Errorf("looking for database %s: %w", name, err)
	}
	if exists {
		return nil
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P04" { // created concurrently
		return nil
	}
	if err != nil {
		return fmt.Errorf("creating database %s: %w", name, err)
	}
	fmt.Fprintf(os.Stderr, "bench: created database %s\n", name)
	return nil
}

// withDatabase returns the connection string u pointing at database name
// instead.
func withDatabase(u, name string) string {
	if strings.Contains(u, "://") {
		if p, err := url.Parse(u); err == nil {
			p.Path = "/" + name
			return p.String()
		}
	}
	return u + " dbname=" + name // key=value DSN: the last dbname wins
}

// redact returns u with any password masked, for logging.
func redact(u string) string {
	if p, err := url.Parse(u); err == nil && strings.Contains(u, "://") {
		return p.Redacted()
	}
	return "(key=value connection string)"
}

// randomHex returns 2n random hex digits.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// truncate returns b as a string of at most n bytes, for error messages.
func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}
