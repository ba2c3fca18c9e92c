package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/auth"
	"github.com/aetheriot/aether-audit/jobs"
	"github.com/aetheriot/aether-audit/live"
	"github.com/aetheriot/aether-audit/server"
	"github.com/aetheriot/aether-audit/server/wsgraphql"
	"github.com/aetheriot/aether-audit/store"
)

// serveCmd runs the service until SIGINT or SIGTERM.
type serveCmd struct {
	databaseFlags
	secretFlags
	Addr                   string        `name:"addr" env:"AETHER_ADDR" default:"127.0.0.1:8080" help:"Address to listen on."`
	PublicURL              string        `name:"public-url" env:"AETHER_PUBLIC_URL" help:"Base URL clients reach the service at (e.g. https://audit.example.com behind a TLS proxy), used in links it hands out such as export downloads. Default: the request's scheme and host."`
	JWKSURL                string        `name:"jwks-url" env:"AETHER_JWKS_URL" help:"Production token verification: JWKS URL of the identity provider (RS256/384/512, ES256/384). Replaces the HS256 secret; needs --jwt-issuer and --jwt-audience."`
	JWTIssuer              string        `name:"jwt-issuer" env:"AETHER_JWT_ISSUER" help:"Required iss claim (required with --jwks-url)."`
	JWTAudience            string        `name:"jwt-audience" env:"AETHER_JWT_AUDIENCE" help:"Required aud claim (required with --jwks-url)."`
	JWTMaxTTL              time.Duration `name:"jwt-max-ttl" env:"AETHER_JWT_MAX_TTL" default:"24h" help:"Longest accepted token lifetime (exp minus iat; tokens must carry iat). 0 turns the bound off."`
	Dev                    bool          `name:"dev" env:"AETHER_DEV" help:"Development mode: accept HS256 tokens signed with the secret generated into <data-dir>/jwt-secret (what aether token mints). Without it, serve needs --jwks-url (production) or an explicit --jwt-secret."`
	MaxBodyBytes           int64         `name:"max-body-bytes" env:"AETHER_MAX_BODY_BYTES" default:"8388608" help:"Largest accepted request body, in bytes."`
	GraphQLComplexityLimit int           `name:"graphql-complexity-limit" env:"AETHER_GRAPHQL_COMPLEXITY_LIMIT" default:"25000" help:"Largest accepted GraphQL operation complexity: each selected field counts 1, connections count their selection times the page size."`
	GraphQLMaxDepth        int           `name:"graphql-max-depth" env:"AETHER_GRAPHQL_MAX_DEPTH" default:"12" help:"Deepest accepted GraphQL selection nesting."`
	GraphQLCacheMaxDoc     int           `name:"graphql-cache-max-document-bytes" env:"AETHER_GRAPHQL_CACHE_MAX_DOCUMENT_BYTES" default:"16384" help:"Largest GraphQL document (bytes) cached in any form: parsed documents, persisted queries (per tenant) and fast-path plans; larger ones are parsed each time. Every cache is bounded in bytes."`
	GraphQLMaxAliases      int           `name:"graphql-max-aliases" env:"AETHER_GRAPHQL_MAX_ALIASES" default:"32" help:"Most root fields of one GraphQL operation, aliases included (a document repeats a field under aliases); refused with BAD_USER_INPUT before validation. verifyAuditChain may appear once per operation."`
	GraphQLIntrospection   bool          `name:"graphql-introspection" env:"AETHER_GRAPHQL_INTROSPECTION" default:"true" negatable:"" help:"Allow GraphQL introspection."`
	AllowedOrigins         []string      `name:"allowed-origins" env:"AETHER_ALLOWED_ORIGINS" help:"Browser origins (scheme://host[:port], comma-separated, or *) allowed to open GraphQL WebSockets besides the server's own."`
	WSInitTimeout          time.Duration `name:"ws-init-timeout" env:"AETHER_WS_INIT_TIMEOUT" default:"3s" help:"Time a GraphQL WebSocket client has to send connection_init (then closed with 4408)."`
	WSMaxOperations        int           `name:"ws-max-operations" env:"AETHER_WS_MAX_OPERATIONS" default:"100" help:"Most active operations per GraphQL WebSocket connection."`
	WSMaxPerIdentity       int           `name:"ws-max-connections-per-identity" env:"AETHER_WS_MAX_CONNECTIONS_PER_IDENTITY" default:"32" help:"Most live connections of one identity (tenant and subject): GraphQL WebSockets, graphql-sse and follow=true SSE streams together; one more WebSocket closes with 4429, one more stream gets 429 QUOTA_EXCEEDED."`
	WSReadLimit            int64         `name:"ws-read-limit" env:"AETHER_WS_READ_LIMIT" default:"65536" help:"Largest GraphQL WebSocket message accepted, in bytes (larger closes with 1009)."`
	SSEHeartbeat           time.Duration `name:"sse-heartbeat" env:"AETHER_SSE_HEARTBEAT" default:"15s" help:"Interval of heartbeat comments on live SSE streams."`
	ShutdownTimeout        time.Duration `name:"shutdown-timeout" env:"AETHER_SHUTDOWN_TIMEOUT" default:"20s" help:"How long in-flight requests may take to finish on shutdown."`
	OperatorTenants        []string      `name:"operator-tenants" env:"AETHER_OPERATOR_TENANTS" help:"Tenants whose admins may use the operator surfaces (/metrics, River UI), which show and act on every tenant's figures and jobs; comma-separated, or * for any tenant (a single-tenant deployment). Unset: nobody (the metrics listener of --metrics-addr is separate)."`
	MetricsAddr            string        `name:"metrics-addr" env:"AETHER_METRICS_ADDR" help:"If set, a second listener at this address serves only /metrics, without authentication, for a Prometheus scraper on a private network. /metrics on the main listener answers admin tokens only. Tracing is configured with the standard OTEL_* variables (off unless set)."`
	JobRescueAfter         time.Duration `name:"job-rescue-after" env:"AETHER_JOB_RESCUE_AFTER" default:"2m" help:"How long a background job may stay running before it is taken for one of a process that died (kill -9, crash) and run again; jobs with a longer timeout of their own wait for it too."`
	AppRole                string        `name:"app-role" env:"AETHER_APP_ROLE" help:"Serve as this runtime role: migrate with the DATABASE_URL login (the owner of the tables), create or update the role and apply its grants as aether migrate --app-role does, then serve over connections logged in as the role to the same server and database (password: the environment variable AETHER_APP_ROLE_PASSWORD). The role may append and read evidence but not change, delete or drop it. Unset: serve as the DATABASE_URL login (point it at the runtime role after aether migrate --app-role); the embedded database always serves as aether_app. A login that can change history gets a warning at start and aether_storage_privileged 1 in /metrics."`
	DebugAddr              string        `name:"debug-addr" env:"AETHER_DEBUG_ADDR" help:"PRIVATE address (e.g. 127.0.0.1:6060) serving Go runtime profiles (net/http/pprof: goroutines, heap, CPU) WITHOUT authentication, apart from the service. Off when unset; never expose it."`
	webhookFlags
	exportFlags
	streamFlags
	limitFlags
	verifyFlags
	retentionFlags
	checkpointFlags
	httpTimeoutFlags
}

// Run implements the serve command.
func (c *serveCmd) Run() error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	logger := c.logger()

	verifierCfg, err := c.verifierConfig(logger)
	if err != nil {
		return err
	}
	verifier, err := auth.NewVerifier(ctx, verifierCfg)
	if err != nil {
		return fmt.Errorf("configuring token verification: %w", err)
	}
	defer verifier.Close()
	checkpoints, err := c.checkpointFlags.keyRing(c.Dev, c.dataDirFlags, logger)
	if err != nil {
		return err
	}

	if c.DebugAddr != "" {
		debug, err := startDebugServer(c.DebugAddr, logger)
		if err != nil {
			return err
		}
		defer func() {
			stopCtx, cancel := context.WithTimeout(context.Background(), c.ShutdownTimeout)
			defer cancel()
			if err := debug.stop(stopCtx); err != nil {
				logger.Warn("debug server shutdown incomplete", "err", err)
			}
		}()
	}

	db, err := c.openServing(ctx, logger, c.AppRole)
	if err != nil {
		return err
	}
	defer db.close(ctx)
	privilege, err := store.CheckStoragePrivilege(ctx, db.Pool)
	if err != nil {
		return err
	}
	warnPrivileged(logger, privilege)

	masterKey, err := c.masterKey(c.dataDirFlags)
	if err != nil {
		return err
	}
	webhooks, sender, err := c.webhookFlags.config(masterKey, logger)
	if err != nil {
		return err
	}
	exports, err := c.exportFlags.config(ctx, c.dataDirFlags, masterKey)
	if err != nil {
		return err
	}
	defer exports.Bucket.Close()
	st := store.New(db.Pool)
	obs, err := startObservability(ctx, logger, st)
	if err != nil {
		return err
	}
	defer obs.shutdown(logger)
	obs.metrics.SetStoragePrivileged(privilege.Privileged())
	hub := live.New(db.Pool, st, live.Config{Logger: logger, Observer: obs.metrics})
	obs.metrics.ObserveLiveSubscribers(hub.Subscribers)
	application := app.New(st, app.Config{Logger: logger, Live: hub, Webhooks: webhooks, Exports: exports, ExportWatch: hub,
		Observer: obs.metrics, Tracer: obs.appTracer(),
		RateLimits: c.limitFlags.config(), AppendTimeout: c.AppendTimeout, AuditRetention: c.retention(), MinAuditRetention: c.minRetention(),
		Checkpoints: checkpoints, Streams: c.streamFlags.config(sender), Partitions: c.partitions(), Verify: c.verifyLimits()})
	obs.metrics.ObserveStreams(st.AllAuditStreamLag, 5*time.Second)
	river, err := jobs.NewClient(db.Pool, st, jobs.ClientConfig{
		Logger:               logger,
		App:                  application,
		WebhookWorkers:       c.WebhookWorkers,
		WebhookSendTimeout:   c.WebhookTimeout,
		ExportJobTimeout:     c.ExportJobTimeout,
		RescueStuckJobsAfter: c.JobRescueAfter,
		RetentionInterval:    c.RetentionInterval,
		CheckpointInterval:   c.CheckpointInterval,
		TracerProvider:       obs.tracerProvider(),
		SkipReindex:          !privilege.OwnsEvidence && !privilege.Superuser,
	})
	if err != nil {
		return err
	}
	if err := river.Start(ctx); err != nil {
		return fmt.Errorf("starting river: %w", err)
	}
	// The webhook dispatcher sends the first attempts of the events this
	// process records, with River as the rescue; it stops after the HTTP
	// server (no more recordings) and before River.
	dispatchCtx, stopDispatch := context.WithCancel(context.WithoutCancel(ctx))
	dispatchDone := make(chan struct{})
	go func() {
		defer close(dispatchDone)
		_ = application.RunWebhookDispatch(dispatchCtx, app.WebhookDispatchConfig{SendTimeout: c.WebhookTimeout, RescueAfter: c.JobRescueAfter})
	}()
	defer stopDispatch()

	hubCtx, stopHub := context.WithCancel(context.WithoutCancel(ctx))
	hubDone := make(chan struct{})
	go func() { defer close(hubDone); hub.Run(hubCtx) }()
	defer func() { stopHub(); <-hubDone }()

	// The stream worker follows the live head through the hub's append
	// signals; it stops before the hub (deferred after it).
	appends, stopWatch := hub.WatchAppends()
	defer stopWatch()
	streamsCtx, stopStreams := context.WithCancel(context.WithoutCancel(ctx))
	streamsDone := make(chan struct{})
	go func() { defer close(streamsDone); _ = application.RunAuditStreams(streamsCtx, appends) }()
	defer func() { stopStreams(); <-streamsDone }()

	handler := server.New(server.Config{
		App:                      application,
		Verifier:                 verifier,
		PublicURL:                c.PublicURL,
		Logger:                   logger,
		Ready:                    readiness(db),
		MaxBodyBytes:             c.MaxBodyBytes,
		ComplexityLimit:          c.GraphQLComplexityLimit,
		MaxDepth:                 c.GraphQLMaxDepth,
		MaxRootFields:            c.GraphQLMaxAliases,
		MaxCachedDocumentBytes:   c.GraphQLCacheMaxDoc,
		DisableIntrospection:     !c.GraphQLIntrospection,
		HeartbeatInterval:        c.SSEHeartbeat,
		AllowedOrigins:           c.AllowedOrigins,
		MaxWebSocketsPerIdentity: c.WSMaxPerIdentity,
		WriteTimeout:             c.HTTPWriteTimeout,
		OperatorTenants:          c.OperatorTenants,
		Metrics:                  obs.metrics,
		TracerProvider:           obs.tracerProvider(),
		River:                    river,
		WebSocket: wsgraphql.Config{
			InitTimeout:   c.WSInitTimeout,
			MaxOperations: c.WSMaxOperations,
			ReadLimit:     c.WSReadLimit,
		},
	})
	ln, err := net.Listen("tcp", c.Addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", c.Addr, err)
	}
	metricsServer, err := serveMetrics(ctx, c.MetricsAddr, handler.MetricsHandler(), logger)
	if err != nil {
		_ = ln.Close()
		return err
	}
	httpServer := c.httpTimeoutFlags.server(ctx, handler)
	serveErr := make(chan error, 1)
	go func() { serveErr <- httpServer.Serve(ln) }()
	logger.Info("aether serving", "url", "http://"+ln.Addr().String(), "graphql", "http://"+ln.Addr().String()+"/graphql")

	select {
	case err := <-serveErr:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	logger.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), c.ShutdownTimeout)
	defer cancel()
	handler.Shutdown(shutdownCtx)
	if err := httpServer.Shutdown(shutdownCtx); err != nil {
		logger.Warn("http shutdown incomplete", "err", err)
	}
	if metricsServer != nil {
		_ = metricsServer.Shutdown(shutdownCtx)
	}
	stopDispatch()
	select {
	case <-dispatchDone:
	case <-shutdownCtx.Done():
		logger.Warn("webhook dispatch shutdown incomplete: its rescue jobs will finish the deliveries under way")
	}
	if err := river.Stop(shutdownCtx); err != nil {
		logger.Warn("river shutdown incomplete", "err", err)
	}
	if err := <-serveErr; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	logger.Info("stopped")
	return nil
}

// warnPrivileged logs, loudly, when the login serve runs as can change
// history rather than only append to it.
func warnPrivileged(logger *slog.Logger, p store.StoragePrivilege) {
	if !p.Privileged() {
		return
	}
	logger.Warn("STORAGE IS PRIVILEGED: the service's database login can change or delete audit evidence, "+
		"so the hash chain proves nothing against it or against whoever steals its credentials. "+
		"Run `aether migrate --app-role NAME` as the owner and serve as that role (--app-role / AETHER_APP_ROLE, "+
		"or a DATABASE_URL logged in as it). aether_storage_privileged is 1 until then.",
		"login", p.Login, "reasons", strings.Join(p.Reasons(), ", "))
}

// readiness reports ready when the database answers and every migration of
// ours is applied. Migrations never go back, so once current they are not
// checked again: a probe costs one ping.
func readiness(db *database) func(ctx context.Context) error {
	var migrated atomic.Bool
	return func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if err := db.Pool.Ping(ctx); err != nil {
			return fmt.Errorf("database unreachable: %w", err)
		}
		if migrated.Load() {
			return nil
		}
		current, err := store.MigrationsCurrent(ctx, db.Pool)
		if err != nil {
			return err
		}
		if !current {
			return errors.New("migrations pending")
		}
		migrated.Store(true)
		return nil
	}
}

// errNoTokenVerification refuses to serve without a way to verify tokens
// that an operator chose.
var errNoTokenVerification = errors.New("no token verification is configured: set --jwks-url with --jwt-issuer and " +
	"--jwt-audience (AETHER_JWKS_URL, AETHER_JWT_ISSUER, AETHER_JWT_AUDIENCE) for production, or --dev (AETHER_DEV=true) " +
	"to accept development tokens signed with the secret in the data dir (aether token)")

// verifierConfig is how serve verifies tokens: with the identity
// provider's key set (which needs an issuer and an audience), with an
// explicitly configured HS256 secret, or, only in development mode, with
// the secret generated into the data dir.
func (c *serveCmd) verifierConfig(logger *slog.Logger) (auth.VerifierConfig, error) {
	cfg := auth.VerifierConfig{JWKSURL: c.JWKSURL, Issuer: c.JWTIssuer, Audience: c.JWTAudience, MaxTTL: c.JWTMaxTTL}
	switch {
	case c.JWKSURL != "":
		if c.JWTIssuer == "" || c.JWTAudience == "" {
			return cfg, errors.New("--jwks-url needs --jwt-issuer and --jwt-audience (AETHER_JWT_ISSUER, AETHER_JWT_AUDIENCE): " +
				"without them, tokens the identity provider issued for other services would be accepted")
		}
		return cfg, nil
	case c.JWTSecret == "" && !c.Dev:
		return cfg, errNoTokenVerification
	}
	secret, err := hmacSecret(c.secretFlags, c.dataDirFlags)
	if err != nil {
		return cfg, err
	}
	if c.JWTSecret == "" {
		logger.Warn("development mode: accepting tokens signed with the generated secret in the data dir; never use --dev in production")
	}
	cfg.HMACSecret = secret
	return cfg, nil
}
