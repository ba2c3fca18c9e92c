package mcpserver

import (
	"context"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aetheriot/aether-audit/app"
)

// sessionConnections makes each MCP session one client connection of the
// app (app.Connection): the tool calls of a session share its limits, such
// as app.VerifyLimits.StreamsPerConnection (verify_audit_chain calls
// running at once), as the operations of one GraphQL WebSocket do. A
// session's entry lives while one of its calls runs: a connection only
// counts what runs, so a session with none needs no state.
type sessionConnections struct {
	mu        sync.Mutex
	bySession map[*mcp.ServerSession]*sessionConnection
}

// sessionConnection is a session's connection and its calls running.
type sessionConnection struct {
	conn  app.Connection
	calls int
}

// enter marks ctx with session's connection for one call; done ends the
// call. Without a session (none known) ctx is its own connection.
func (sc *sessionConnections) enter(ctx context.Context, session *mcp.ServerSession) (_ context.Context, done func()) {
	if session == nil {
		return app.ContextWithConnection(ctx), func() {}
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.bySession == nil {
		sc.bySession = map[*mcp.ServerSession]*sessionConnection{}
	}
	c := sc.bySession[session]
	if c == nil {
		c = &sessionConnection{}
		sc.bySession[session] = c
	}
	c.calls++
	return app.ContextWithClientConnection(ctx, &c.conn), func() {
		sc.mu.Lock()
		defer sc.mu.Unlock()
		if c.calls--; c.calls == 0 {
			delete(sc.bySession, session)
		}
	}
}
