package server

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	gojson "github.com/goccy/go-json"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/parser"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/auth"
	"github.com/aetheriot/aether-audit/graph"
	"github.com/aetheriot/aether-audit/graph/fastpath"
	"github.com/aetheriot/aether-audit/graph/generated"
	"github.com/aetheriot/aether-audit/internal/doccache"
	"github.com/aetheriot/aether-audit/server/wsgraphql"
)

// graphQLHandler builds the GraphQL server with explicitly chosen transports
// and extensions: a query cache, automatic persisted queries, a complexity
// and a depth limit, and introspection unless disabled.
func (s *Server) graphQLHandler() *handler.Server {
	resolver := &graph.Resolver{App: s.cfg.App, Logger: s.cfg.Logger}
	es := generated.NewExecutableSchema(generated.Config{
		Resolvers:  resolver,
		Complexity: graph.Complexity(),
	})
	srv := handler.New(es)
	fastCfg := fastpath.Config{App: s.cfg.App, Schema: es, MaxDepth: s.cfg.MaxDepth, MaxComplexity: s.cfg.ComplexityLimit,
		MaxCachedDocumentBytes: s.cfg.MaxCachedDocumentBytes, Logger: s.cfg.Logger}
	if s.cfg.Metrics != nil {
		srv.Use(graphQLMetrics{s.cfg.Metrics})
		instrumentFastPaths(s.cfg.Metrics, &fastCfg)
	}
	fast := fastpath.New(fastCfg)
	srv.AroundRootFields(fast.AroundRootFields)
	wsCfg := s.webSocketConfig()
	wsCfg.FastPath = func(ctx context.Context, params *graphql.RawParams, wake func()) (wsgraphql.Source, bool) {
		if checkShape(params.Query, s.cfg.MaxRootFields) != "" {
			return nil, false // the executor refuses it (operationShape)
		}
		sub, ok := fast.Open(ctx, params, wake)
		if !ok {
			return nil, false
		}
		return sub, true
	}
	s.ws = wsgraphql.New(wsCfg)
	srv.AddTransport(s.ws)
	srv.AddTransport(transport.Options{})
	srv.AddTransport(jsonGET{})
	// graphql-sse (distinct connections mode): a POST the request gate
	// chose to stream (eventStreamWanted); it must come before the plain
	// POST transport.
	srv.AddTransport(graphQLSSE{sse: transport.SSE{KeepAlivePingInterval: s.cfg.HeartbeatInterval}, shutdown: s.shutdown, admit: s.countStream, writeTimeout: s.cfg.WriteTimeout})
	srv.AddTransport(jsonPOST{fast: fast, maxSelections: s.cfg.MaxRootFields})

	srv.SetQueryCache(queryCache{doccache.New[*ast.QueryDocument](parsedDocumentCacheBytes, s.cfg.MaxCachedDocumentBytes)})
	srv.Use(extension.AutomaticPersistedQuery{Cache: persistedQueries{doccache.New[string](persistedQueriesCacheBytes, s.cfg.MaxCachedDocumentBytes)}})
	srv.Use(operationShape{max: s.cfg.MaxRootFields})
	srv.Use(extension.FixedComplexityLimit(s.cfg.ComplexityLimit))
	srv.Use(depthLimit{max: s.cfg.MaxDepth})
	if !s.cfg.DisableIntrospection {
		srv.Use(extension.Introspection{})
	}

	logger := s.cfg.Logger
	srv.SetRecoverFunc(func(ctx context.Context, v any) error {
		logger.ErrorContext(ctx, "graphql panic", "panic", v)
		return &app.Error{Code: app.CodeInternal, Message: "internal error"}
	})
	srv.SetErrorPresenter(graph.PresentError)
	return srv
}

// graphQLRequestGate answers requests the GraphQL transports would refuse
// without an error code: methods other than GET, POST and OPTIONS (405), a
// POST body that is not application/json (415), an Accept header that
// allows neither application/graphql-response+json nor application/json
// (406; WebSocket upgrades and POSTs answered as graphql-sse streams are not
// negotiated here), and a GET whose operation is not a query (405: GET must
// be safe, so mutations need POST). It also decides, by eventStreamWanted,
// which POSTs are answered as streams (the graphQLSSE transport serves
// those, and only those count as live connections).
func graphQLRequestGate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		streaming := isWebSocketUpgrade(r)
		switch r.Method {
		case http.MethodGet, http.MethodOptions:
		case http.MethodPost:
			if !(jsonPOST{}).Supports(r) {
				graphQLError(w, http.StatusUnsupportedMediaType, app.CodeBadUserInput, "GraphQL requests must be sent as Content-Type: application/json")
				return
			}
			if eventStreamWanted(r, func() bool { return postedSubscription(r) }) {
				streaming = true
				r = r.WithContext(context.WithValue(r.Context(), eventStreamKey{}, true))
			}
		default:
			w.Header().Set("Allow", "GET, POST, OPTIONS")
			graphQLError(w, http.StatusMethodNotAllowed, app.CodeBadUserInput, "GraphQL requests use GET (queries) or POST")
			return
		}
		if r.Method != http.MethodOptions && !streaming {
			if _, ok := graphQLResponseMedia(r); !ok {
				graphQLError(w, http.StatusNotAcceptable, app.CodeBadUserInput, "GraphQL responses are application/graphql-response+json or application/json; the Accept header allows neither")
				return
			}
		}
		if r.Method == http.MethodGet {
			q := r.URL.Query()
			if op, ok := operationType(q.Get("query"), q.Get("operationName")); ok && op != ast.Query {
				w.Header().Set("Allow", "POST")
				graphQLError(w, http.StatusMethodNotAllowed, app.CodeBadUserInput, "GET requests only allow query operations; use POST")
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// eventStreamKey marks, in a request's context, a POST that the request
// gate chose to answer as a graphql-sse stream.
type eventStreamKey struct{}

// eventStreamChosen reports whether the request gate chose to answer r as
// a graphql-sse stream.
func eventStreamChosen(r *http.Request) bool {
	chosen, _ := r.Context().Value(eventStreamKey{}).(bool)
	return chosen
}

// postedSubscription reports whether the operation a GraphQL POST names is
// a subscription. The body was read whole by the body limit; it is left
// for the transport to read again. A body that does not decode, or a
// document that does not parse, is not a subscription: it gets its error
// as a plain response.
func postedSubscription(r *http.Request) bool {
	body, err := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return false
	}
	var req struct {
		Query         string `json:"query"`
		OperationName string `json:"operationName"`
	}
	if gojson.Unmarshal(body, &req) != nil || !strings.Contains(req.Query, "subscription") {
		return false // a document without the keyword has no subscription
	}
	op, ok := operationType(req.Query, req.OperationName)
	return ok && op == ast.Subscription
}

// operationType is the type of the operation a GraphQL document selects by
// operationName (or its only operation when the name is empty); false when
// the document does not parse or selects none.
func operationType(query, operationName string) (ast.Operation, bool) {
	doc, err := parser.ParseQuery(&ast.Source{Input: query})
	if err != nil {
		return "", false
	}
	op := doc.Operations.ForName(operationName)
	if op == nil && operationName == "" && len(doc.Operations) == 1 {
		op = doc.Operations[0]
	}
	if op == nil {
		return "", false
	}
	return op.Operation, true
}

// depthLimit refuses operations nested deeper than max selection levels.
// Introspection fields are not counted: the complexity limit bounds them.
type depthLimit struct{ max int }

var _ interface {
	graphql.HandlerExtension
	graphql.OperationContextMutator
} = depthLimit{}

// ExtensionName implements graphql.HandlerExtension.
func (depthLimit) ExtensionName() string { return "DepthLimit" }

// Validate implements graphql.HandlerExtension.
func (depthLimit) Validate(graphql.ExecutableSchema) error { return nil }

// MutateOperationContext implements graphql.OperationContextMutator.
func (d depthLimit) MutateOperationContext(_ context.Context, oc *graphql.OperationContext) *gqlerror.Error {
	if oc.Operation == nil {
		return nil
	}
	if graph.SelectionDepth(oc.Operation.SelectionSet) > d.max {
		err := gqlerror.Errorf("operation is nested deeper than %d levels", d.max)
		err.Extensions = map[string]any{"code": app.CodeBadUserInput}
		return err
	}
	return nil
}

// webSocketConfig completes the WebSocket transport's configuration: the
// origin check from AllowedOrigins and authentication from the
// connection_init payload's Authorization (or the upgrade request's header),
// closing with 4403 when the token is missing, invalid or expires. The
// operations of a connection run under one app.ContextWithConnection.
func (s *Server) webSocketConfig() wsgraphql.Config {
	cfg := s.cfg.WebSocket
	if cfg.Logger == nil {
		cfg.Logger = s.cfg.Logger
	}
	cfg.CheckOrigin = s.checkOrigin
	cfg.Authenticate = func(ctx context.Context, r *http.Request, payload map[string]any) (context.Context, time.Time, error) {
		token, ok := auth.BearerToken(wsgraphql.Authorization(r, payload))
		if !ok {
			return ctx, time.Time{}, errors.New("a bearer token is required")
		}
		id, err := s.cfg.Verifier.Verify(token)
		if err != nil {
			return ctx, time.Time{}, err
		}
		// The connection's operations share its limits (chain
		// verifications per connection).
		return app.ContextWithConnection(app.ContextWithIdentity(ctx, id)), id.ExpiresAt, nil
	}
	cfg.OnConnect = s.countWebSocket
	return cfg
}

// errTooManySockets refuses one WebSocket too many of an identity.
var errTooManySockets = errors.New("too many connections")

// errTooManyStreams answers an HTTP stream (graphql-sse, live SSE) one too
// many for its identity.
var errTooManyStreams = &app.Error{Code: app.CodeQuotaExceeded,
	Message: "too many open live connections (WebSockets and event streams) for this identity"}

// countStream admits a live HTTP stream (graphql-sse or follow=true SSE)
// unless the identity already holds MaxWebSocketsPerIdentity live
// connections; the same count covers its WebSockets.
func (s *Server) countStream(ctx context.Context) (func(), error) {
	release, err := s.countWebSocket(ctx)
	if err != nil {
		return nil, errTooManyStreams
	}
	return release, nil
}

// countWebSocket admits an authenticated WebSocket unless its identity
// already holds MaxWebSocketsPerIdentity live connections (WebSockets and
// event streams).
func (s *Server) countWebSocket(ctx context.Context) (func(), error) {
	id := app.IdentityFromContext(ctx)
	key := [2]string{id.TenantID, id.Subject}
	s.socketsMu.Lock()
	defer s.socketsMu.Unlock()
	if s.sockets[key] >= s.cfg.MaxWebSocketsPerIdentity {
		return nil, errTooManySockets
	}
	s.sockets[key]++
	return func() {
		s.socketsMu.Lock()
		defer s.socketsMu.Unlock()
		if s.sockets[key]--; s.sockets[key] <= 0 {
			delete(s.sockets, key)
		}
	}, nil
}

// checkOrigin allows a WebSocket from no Origin (non-browser clients), the
// server's own origin, and AllowedOrigins.
func (s *Server) checkOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil {
		return false
	}
	if strings.EqualFold(u.Host, r.Host) {
		return true
	}
	for _, allowed := range s.cfg.AllowedOrigins {
		if allowed == "*" || strings.EqualFold(strings.TrimSuffix(allowed, "/"), origin) {
			return true
		}
	}
	return false
}
