package server

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/mcpserver"
)

// MCPSessionTimeout closes an MCP session that sent no request for this
// long; its subscriptions end with it.
const MCPSessionTimeout = 30 * time.Minute

// mountMCP serves the MCP interface (package mcpserver) over Streamable
// HTTP at /mcp: the Origin check the MCP specification requires (the rule
// of GraphQL WebSockets: no Origin, the server's own, or AllowedOrigins),
// then the bearer token as for GraphQL, then the SDK's transport, whose
// every request runs as its own verified identity.
func (s *Server) mountMCP() {
	s.mcp = mcpserver.New(mcpserver.Config{Backend: mcpserver.AppBackends(s.cfg.App), Logger: s.cfg.Logger})
	h := mcpserver.HTTPHandler(s.mcp, mcpserver.HTTPOptions{
		MaxBodyBytes:   s.cfg.MaxBodyBytes,
		SessionTimeout: MCPSessionTimeout,
		Logger:         s.cfg.Logger,
	})
	s.mux.Handle("/mcp", s.traced(s.mcpOrigin(s.authenticated(s.mcpStreams(h), mcpUnauthenticated))))
}

// mcpOrigin refuses, with 403, a request whose Origin is present and not
// allowed: a web page must not reach the MCP endpoint through the user's
// browser (DNS rebinding).
func (s *Server) mcpOrigin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.checkOrigin(r) {
			refuseUnread(w, r)
			writeMCPError(w, http.StatusForbidden, app.CodeForbidden, "origin not allowed")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// mcpStreams makes a GET (the session's stream of server messages) a
// long-lived response: a deadline per write instead of one for the whole
// response, and an end at Shutdown.
func (s *Server) mcpStreams(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			next.ServeHTTP(w, r)
			return
		}
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		go func() {
			select {
			case <-s.shutdown:
				cancel()
			case <-ctx.Done():
			}
		}()
		next.ServeHTTP(streamDeadlines(w, s.cfg.WriteTimeout), r.WithContext(ctx))
	})
}

// mcpUnauthenticated answers a request without a valid token with 401 and
// a JSON-RPC error.
func mcpUnauthenticated(w http.ResponseWriter, _ *http.Request, msg string) {
	writeMCPError(w, http.StatusUnauthorized, app.CodeUnauthenticated, msg)
}

// writeMCPError answers a request refused before the MCP transport: a
// JSON-RPC error (id null) whose data holds the API's code.
func writeMCPError(w http.ResponseWriter, status int, code app.Code, msg string) {
	if code == app.CodeUnauthenticated {
		w.Header().Set("WWW-Authenticate", `Bearer realm="aether"`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"jsonrpc": "2.0",
		"id":      nil,
		"error":   map[string]any{"code": -32001, "message": msg, "data": map[string]any{"code": code, "message": msg}},
	})
}
