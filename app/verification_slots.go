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

// clientConnection counts the verification streams running on one client
// connection (ContextWithConnection).
type clientConnection struct {
	mu            sync.Mutex
	verifications int
}

type connectionKey struct{}

// ContextWithConnection returns ctx marked as one client connection's (a
// GraphQL WebSocket): what runs under it shares the connection's limits,
// such as VerifyLimits.StreamsPerConnection. Without the mark each request
// counts as its own connection.
func ContextWithConnection(ctx context.Context) context.Context {
	return context.WithValue(ctx, connectionKey{}, &clientConnection{})
}

// acquireVerificationSlot takes a slot of the tenant's and of ctx's
// connection's verification streams, or neither (QUOTA_EXCEEDED when
// either is full); release gives them back, once.
func (a *App) acquireVerificationSlot(ctx context.Context, tenantID string) (release func(), err error) {
	limits := a.verifyLimits
	conn, _ := ctx.Value(connectionKey{}).(*clientConnection)
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
