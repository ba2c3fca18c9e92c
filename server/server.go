// Package server composes Aether Audit's HTTP surface: identity middleware,
// the GraphQL endpoint, the REST and SSE audit endpoints, health checks, and
// the operator surfaces (Prometheus metrics, River UI, request tracing).
// Handlers only translate between HTTP and the use cases of package app.
package server

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"go.opentelemetry.io/otel/trace"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/mcpserver"
	"github.com/aetheriot/aether-audit/metrics"
	"github.com/aetheriot/aether-audit/server/wsgraphql"
)

// TokenVerifier turns a bearer token into a verified identity; *auth.Verifier
// implements it.
type TokenVerifier interface {
	Verify(token string) (app.Identity, error)
}

// Config configures the HTTP surface. Zero limits take the defaults below.
type Config struct {
	App      *app.App
	Verifier TokenVerifier
	Logger   *slog.Logger
	// PublicURL is the base URL clients reach the service at (behind a
	// proxy that terminates TLS, e.g. https://audit.example.com), for links
	// the service hands out; unset, links are relative to the service
	// (never built from the request's Host header).
	PublicURL string
	// Ready reports whether the service can serve (database reachable,
	// migrations current); /readyz answers 503 while it returns an error.
	Ready func(ctx context.Context) error
	// MaxBodyBytes bounds request bodies; default DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// ComplexityLimit bounds a GraphQL operation's complexity; default
	// DefaultComplexityLimit.
	ComplexityLimit int
	// MaxDepth bounds a GraphQL operation's selection depth; default
	// DefaultMaxDepth.
	MaxDepth int
	// MaxRootFields bounds the selections of each selection set of a
	// GraphQL document, the root's included; default DefaultMaxRootFields.
	MaxRootFields int
	// MaxCachedDocumentBytes is the largest GraphQL document cached in any
	// form (parsed, persisted, fast-path plans); default
	// DefaultMaxCachedDocumentBytes.
	MaxCachedDocumentBytes int
	// DisableIntrospection turns GraphQL introspection off.
	DisableIntrospection bool
	// HeartbeatInterval is how often a live SSE stream sends a heartbeat
	// comment; default DefaultHeartbeatInterval.
	HeartbeatInterval time.Duration
	// AllowedOrigins lists the browser origins (scheme://host[:port]) that
	// may open GraphQL WebSockets besides the server's own; "*" allows any.
	// Requests without an Origin header (non-browser clients) are allowed.
	AllowedOrigins []string
	// WebSocket tunes the GraphQL WebSocket transport (init timeout, limits,
	// keep-alive); its CheckOrigin, Authenticate and OnConnect are set by
	// the server.
	WebSocket wsgraphql.Config
	// OperatorTenants are the tenants whose admins may use the operator
	// surfaces (/metrics and River UI, which show and act on every tenant's
	// figures and jobs); "*" lets any tenant's admin in. Empty: nobody.
	OperatorTenants []string
	// WriteTimeout bounds writing a response: the whole response of an
	// ordinary route, each write of a stream; default DefaultWriteTimeout.
	// (Reading requests is bounded by the http.Server's ReadHeaderTimeout
	// and ReadTimeout.)
	WriteTimeout time.Duration
	// MaxWebSocketsPerIdentity bounds the open GraphQL WebSockets of one
	// identity (tenant and subject); default DefaultMaxWebSocketsPerIdentity.
	// One more closes with 4429 "too many connections".
	MaxWebSocketsPerIdentity int
	// Metrics, when set, records HTTP and GraphQL request metrics and
	// serves them at /metrics to admin identities.
	Metrics *metrics.Metrics
	// TracerProvider, when set, gives every request a span (continuing an
	// incoming W3C traceparent); nil turns request tracing off.
	TracerProvider trace.TracerProvider
	// River, when set, mounts River UI at /riverui/ for admin identities.
	River *river.Client[pgx.Tx]
}

// Defaults of Config's limits.
const (
	DefaultMaxBodyBytes    = 8 << 20
	DefaultComplexityLimit = 25000
	DefaultMaxDepth        = 12
	// DefaultHeartbeatInterval keeps proxies from closing idle live streams.
	DefaultHeartbeatInterval = 15 * time.Second
	// DefaultMaxWebSocketsPerIdentity allows a few dashboards per user.
	DefaultMaxWebSocketsPerIdentity = 32
)

// Server is the HTTP handler of the service.
type Server struct {
	cfg     Config
	mux     *http.ServeMux
	handler http.Handler // mux, instrumented
	ws      *wsgraphql.Transport
	tracer  trace.Tracer // nil when tracing is off
	// stopRiverUI stops River UI's background services.
	stopRiverUI func()
	// sockets counts open WebSockets per identity (tenant, subject).
	socketsMu sync.Mutex
	sockets   map[[2]string]int
	// riverUISessions are the River UI browser sessions of this process.
	riverUISessions riverUISessions
	// mcp is the MCP interface served at /mcp.
	mcp *mcpserver.Server
	// shutdown is closed by Shutdown: long-lived streams end on it.
	shutdown     chan struct{}
	shutdownOnce sync.Once
}

// Shutdown ends every long-lived stream (live SSE) and closes every GraphQL
// WebSocket with 1001 Going Away, so that an http.Server.Shutdown that
// follows does not wait for them (net/http does not track hijacked
// connections). Their clients reconnect, to this or another process, and
// resume by sequence.
func (s *Server) Shutdown(ctx context.Context) {
	s.shutdownOnce.Do(func() {
		close(s.shutdown)
		s.mcp.Close()
		if s.stopRiverUI != nil {
			s.stopRiverUI()
		}
	})
	if err := s.ws.Shutdown(ctx); err != nil {
		s.cfg.Logger.Warn("closing websockets", "err", err)
	}
}

// New returns the service's HTTP handler.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.ComplexityLimit <= 0 {
		cfg.ComplexityLimit = DefaultComplexityLimit
	}
	if cfg.MaxDepth <= 0 {
		cfg.MaxDepth = DefaultMaxDepth
	}
	if cfg.MaxRootFields <= 0 {
		cfg.MaxRootFields = DefaultMaxRootFields
	}
	if cfg.MaxCachedDocumentBytes <= 0 {
		cfg.MaxCachedDocumentBytes = DefaultMaxCachedDocumentBytes
	}
	if cfg.MaxWebSocketsPerIdentity <= 0 {
		cfg.MaxWebSocketsPerIdentity = DefaultMaxWebSocketsPerIdentity
	}
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = DefaultWriteTimeout
	}
	s := &Server{cfg: cfg, mux: http.NewServeMux(), shutdown: make(chan struct{}), sockets: map[[2]string]int{}}
	if cfg.TracerProvider != nil {
		s.tracer = cfg.TracerProvider.Tracer(tracerName)
	}
	s.handler = s.instrument(s.withDeadlines(s.mux))
	s.mux.HandleFunc("GET /healthz", s.healthz)
	s.mux.HandleFunc("GET /readyz", s.readyz)

	gql := s.graphQLHandler()
	s.mux.Handle("/graphql", s.traced(s.withBaseURL(s.authenticated(s.limitBody(graphQLRequestGate(gql)), graphQLUnauthenticated))))
	s.mux.Handle("GET /api/v1/audit/events", s.traced(s.authenticated(http.HandlerFunc(s.listAuditEvents), problemUnauthenticated)))
	s.mux.Handle("GET /api/v1/audit/events/stream", s.traced(s.authenticated(http.HandlerFunc(s.streamAuditEvents), problemUnauthenticated)))
	// The capability in the path is the download's only credential.
	s.mux.Handle("GET /api/v1/exports/download/{token}", s.traced(http.HandlerFunc(s.downloadExport)))
	s.mux.HandleFunc("GET /api/v1/openapi.json", serveOpenAPI) // public: the REST and SSE contract
	// Public: the keys that verify checkpoints, for any JOSE library.
	s.mux.HandleFunc("GET /.well-known/aether/checkpoint-keys", s.serveCheckpointKeys)
	if err := s.mountOperatorSurfaces(); err != nil {
		panic("server: mounting River UI: " + err.Error()) // its embedded assets are broken
	}
	s.mountMCP()
	s.mountDashboard()
	s.mountGraphiQL()
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, r, &app.Error{Code: app.CodeNotFound, Message: "no such endpoint"})
	})
	return s
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.handler.ServeHTTP(w, r)
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"status":"ok"}`))
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if s.cfg.Ready != nil {
		if err := s.cfg.Ready(r.Context()); err != nil {
			s.cfg.Logger.Warn("not ready", "err", err)
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"status":"unavailable"}`))
			return
		}
	}
	_, _ = w.Write([]byte(`{"status":"ready"}`))
}
