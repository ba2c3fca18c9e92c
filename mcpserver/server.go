package mcpserver

import (
	"context"
	"errors"
	"log/slog"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ProtocolVersions are the MCP revisions the server negotiates: those of
// the initialize handshake, whose sessions carry resource subscriptions
// (resources/subscribe) and their notifications.
var ProtocolVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26"}

// BackendFunc binds one request to its verified caller: it returns the
// Backend the request runs against and the context to run it in. extra
// holds what the transport knows of the request (the HTTP headers and the
// verified token, over Streamable HTTP); it is nil over stdio.
type BackendFunc func(ctx context.Context, extra *mcp.RequestExtra) (context.Context, Backend, error)

// Config configures a Server.
type Config struct {
	// Backend binds each request to its caller. Required.
	Backend BackendFunc
	// Version is the implementation version the server announces.
	Version string
	// Logger logs failures the caller cannot act on; default slog.Default.
	Logger *slog.Logger
	// MaxSubscriptionsPerSession bounds a session's resource subscriptions;
	// default DefaultMaxSubscriptionsPerSession.
	MaxSubscriptionsPerSession int
}

// DefaultMaxSubscriptionsPerSession is the default of
// Config.MaxSubscriptionsPerSession.
const DefaultMaxSubscriptionsPerSession = 16

// Server is the MCP server of Aether Audit: its tools, resources and
// prompts, and the subscriptions of its sessions. One Server serves any
// number of sessions, over any transport.
type Server struct {
	cfg Config
	mcp *mcp.Server
	// send is the SDK's sending method handler, which notifications of one
	// session go through (Server.ResourceUpdated would tell every session
	// subscribed to a URI).
	send mcp.MethodHandler
	subs subscriptions
	// connections are the app connections of the sessions' running tool
	// calls.
	connections sessionConnections
}

// New returns a Server with every tool, resource and prompt.
func New(cfg Config) *Server {
	if cfg.Backend == nil {
		panic("mcpserver: Config.Backend is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	if cfg.MaxSubscriptionsPerSession <= 0 {
		cfg.MaxSubscriptionsPerSession = DefaultMaxSubscriptionsPerSession
	}
	s := &Server{cfg: cfg, subs: subscriptions{bySession: map[*mcp.ServerSession]map[string]context.CancelFunc{}}}
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: "aether-audit", Title: "Aether Audit", Version: cfg.Version}, &mcp.ServerOptions{
		Instructions:              instructions,
		SubscribeHandler:          s.subscribe,
		UnsubscribeHandler:        s.unsubscribe,
		SupportedProtocolVersions: ProtocolVersions,
		Capabilities: &mcp.ServerCapabilities{
			Tools:     &mcp.ToolCapabilities{},
			Resources: &mcp.ResourceCapabilities{Subscribe: true},
			Prompts:   &mcp.PromptCapabilities{},
		},
	})
	s.mcp.AddSendingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		s.send = next
		return next
	})
	s.addTools()
	s.addResources()
	s.addPrompts()
	return s
}

// MCP returns the SDK server, to connect transports to.
func (s *Server) MCP() *mcp.Server { return s.mcp }

// Close ends every subscription of every session.
func (s *Server) Close() { s.subs.closeAll() }

// instructions tell a client what the server is for.
const instructions = `Aether Audit holds tamper-evident audit evidence: who did what to which resource, when, with what outcome, and who recorded it. ` +
	`Search it with search_audit_events (filters by action, subject, resource, outcome, time, sequence, recorder, correlation), ` +
	`read one event with get_audit_event, and check that history was not altered with verify_audit_chain. ` +
	`Webhook deliveries and data exports can be listed and inspected; redrive_webhook_delivery and request_data_export change something and need confirm: true. ` +
	`Every call runs with your own permissions, tenant and projects. Sequences are decimal strings.`

// bind runs cfg.Backend for a request, as an *Error when it refuses.
func (s *Server) bind(ctx context.Context, extra *mcp.RequestExtra) (context.Context, Backend, error) {
	return s.cfg.Backend(ctx, extra)
}

// logInternal logs the cause of an error reported as INTERNAL.
func (s *Server) logInternal(ctx context.Context, what string, err error) {
	var e *Error
	if !errors.As(err, &e) && ctx.Err() == nil {
		s.cfg.Logger.Error("mcp: "+what, "err", err)
	}
}
