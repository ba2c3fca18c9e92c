package app

import (
	"context"
	"fmt"
	"sync"
)

// verificationSlots counts the verification streams running per tenant, so
// that no tenant holds more than its share of the database's reads.
type verificationSlots struct {
	mu       sync.Mutex
	byTenant map[string]int
}

// Connection is one client connection (a GraphQL WebSocket, an MCP
// session): what runs under a context marked with it
// (ContextWithClientConnection) shares the connection's limits, such as
// VerifyLimits.StreamsPerConnection. It counts the verification streams
// running on the connection; the zero value is ready to use.
type Connection struct {
	mu            sync.Mutex
	verifications int
}

type connectionKey struct{}

// ContextWithConnection returns ctx marked as a new client connection's
// (ContextWithClientConnection of a new Connection): for a connection
// whose every operation runs under one context. Without a mark each
// request counts as its own connection.
func ContextWithConnection(ctx context.Context) context.Context {
	return ContextWithClientConnection(ctx, &Connection{})
}

// ContextWithClientConnection returns ctx marked as conn's: for a
// connection whose requests each have their own context (an MCP session).
func ContextWithClientConnection(ctx context.Context, conn *Connection) context.Context {
	return context.WithValue(ctx, connectionKey{}, conn)
}

// acquireVerificationSlot takes a slot of the tenant's and of ctx's
// connection's verification streams, or neither (QUOTA_EXCEEDED when
// either is full); release gives them back, once.
func (a *App) acquireVerificationSlot(ctx context.Context, tenantID string) (release func(), err error) {
	limits := a.verifyLimits
	conn, _ := ctx.Value(connectionKey{}).(*Connection)
	if conn != nil {
		conn.mu.Lock()
		defer conn.mu.Unlock()
		if conn.verifications >= limits.StreamsPerConnection {
			return nil, &Error{Code: CodeQuotaExceeded, Message: fmt.Sprintf(
				"this connection already runs %d chain verifications: wait for one to end", limits.StreamsPerConnection)}
		}
	}
	s := &a.verifications
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byTenant[tenantID] >= limits.StreamsPerTenant {
		return nil, &Error{Code: CodeQuotaExceeded, Message: fmt.Sprintf(
			"this tenant already runs %d chain verifications: wait for one to end", limits.StreamsPerTenant)}
	}
	if s.byTenant == nil {
		s.byTenant = map[string]int{}
	}
	s.byTenant[tenantID]++
	if conn != nil {
		conn.verifications++
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			if conn != nil {
				conn.mu.Lock()
				conn.verifications--
				conn.mu.Unlock()
			}
			s.mu.Lock()
			if s.byTenant[tenantID]--; s.byTenant[tenantID] <= 0 {
				delete(s.byTenant, tenantID)
			}
			s.mu.Unlock()
		})
	}, nil
}
