package mcpserver

import (
	"context"
	"log/slog"
	"net/http"
	"regexp"
	"time"

	mcpauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aetheriot/aether-audit/app"
)

// identityKey is the TokenInfo.Extra entry that carries a request's
// verified identity from the HTTP middleware to the request's handlers.
const identityKey = "aether.identity"

// HTTPOptions configure the Streamable HTTP handler.
type HTTPOptions struct {
	// MaxBodyBytes bounds a request body.
	MaxBodyBytes int64
	// SessionTimeout closes a session that sent no request for this long
	// (the server's keep-alive pings, which clients answer, keep a
	// listening session open).
	SessionTimeout time.Duration
	// Logger logs the transport's failures.
	Logger *slog.Logger
}

// HTTPHandler serves s over Streamable HTTP to requests whose context
// holds the identity the server's authentication middleware verified
// (app.ContextWithIdentity). Each request runs as that identity: it reaches
// the handlers through the SDK's TokenInfo of that request, never through
// the session, and a session answers only requests of the tenant and
// subject that opened it.
func HTTPHandler(s *Server, opts HTTPOptions) http.Handler {
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.mcp }, &mcp.StreamableHTTPOptions{
		SessionTimeout:      opts.SessionTimeout,
		MaxRequestBodyBytes: opts.MaxBodyBytes,
		Logger:              opts.Logger,
	})
	return mcpauth.RequireBearerToken(identityTokenInfo, &mcpauth.RequireBearerTokenOptions{AllowMissingExpiration: true})(h)
}

// identityTokenInfo hands the verified identity of the request to the SDK.
func identityTokenInfo(_ context.Context, _ string, r *http.Request) (*mcpauth.TokenInfo, error) {
	id := app.IdentityFromContext(r.Context())
	if id.TenantID == "" {
		return nil, mcpauth.ErrInvalidToken
	}
	return &mcpauth.TokenInfo{
		UserID:     id.TenantID + "\x00" + id.Subject,
		Expiration: id.ExpiresAt,
		Extra:      map[string]any{identityKey: id},
	}, nil
}

// AppBackends binds each request to AppBackend with its own verified
// identity (from extra.TokenInfo, set by HTTPHandler) and puts that
// identity and the request's trace id into its context, replacing those of
// the request that opened the session.
func AppBackends(a *app.App) BackendFunc {
	return func(ctx context.Context, extra *mcp.RequestExtra) (context.Context, Backend, error) {
		var id app.Identity
		if extra != nil && extra.TokenInfo != nil {
			id, _ = extra.TokenInfo.Extra[identityKey].(app.Identity)
		}
		if id.TenantID == "" {
			return ctx, nil, &Error{Code: string(app.CodeUnauthenticated), Message: "authentication required"}
		}
		traceID := ""
		if extra != nil {
			if m := traceparent.FindStringSubmatch(extra.Header.Get("Traceparent")); m != nil && m[1] != "00000000000000000000000000000000" {
				traceID = m[1]
			}
		}
		ctx = app.ContextWithTraceID(app.ContextWithIdentity(ctx, id), traceID)
		return ctx, AppBackend{App: a, Identity: id}, nil
	}
}

// traceparent is a W3C traceparent: version-traceid-parentid-flags.
var traceparent = regexp.MustCompile(`^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}$`)
