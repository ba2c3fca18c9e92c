package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// notifyTimeout bounds sending one notification to a session.
const notifyTimeout = 10 * time.Second

// subscriptions are the resource subscriptions of every session: each one
// a stream of the Backend the subscribe request was bound to, pumped into
// notifications of that session alone.
type subscriptions struct {
	mu        sync.Mutex
	bySession map[*mcp.ServerSession]map[string]context.CancelFunc
	closed    bool
}

// subscribe starts a subscription to an events URI: after ?after=S, every
// committed event after S and then each new one; without it, each event
// committed from now on. Each is notified, in sequence order, as
// notifications/resources/updated of the event's own URI (a sub-resource
// of the one subscribed to), which the client reads. A subscription ends
// on unsubscribe, when its session ends, or when the credentials of the
// subscribe request expire.
func (s *Server) subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	uri := req.Params.URI
	ctx, b, r, err := s.bindResource(ctx, req.Extra, uri)
	if err != nil {
		return err
	}
	if r.sequence != nil {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "an event never changes: subscribe to " + EventsURI(r.tenant, r.project, nil)}
	}
	ss := req.Session
	if s.subs.count(ss, uri) >= s.cfg.MaxSubscriptionsPerSession {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("at most %d subscriptions per session", s.cfg.MaxSubscriptionsPerSession)}
	}
	// The stream lives as long as the subscription, not the request: its
	// context is not the request's (notifications sent in the request's
	// context would go to its response, which ends now).
	pumpCtx, cancel := context.WithCancel(context.Background())
	if exp := b.Expires(); !exp.IsZero() {
		pumpCtx, cancel = context.WithDeadline(context.Background(), exp)
	}
	stream, err := b.SubscribeAuditEvents(pumpCtx, r.project, r.after)
	if err != nil {
		cancel()
		return s.resourceError(ctx, uri, err)
	}
	if first := s.subs.add(ss, uri, cancel); first {
		go func() {
			_ = ss.Wait()
			s.subs.closeSession(ss)
		}()
	}
	go s.pump(pumpCtx, ss, r, stream)
	return nil
}

// unsubscribe ends a subscription of the session.
func (s *Server) unsubscribe(_ context.Context, req *mcp.UnsubscribeRequest) error {
	s.subs.remove(req.Session, req.Params.URI)
	return nil
}

// pump notifies the session of each event of the stream until ctx ends or
// a notification cannot be sent.
func (s *Server) pump(ctx context.Context, ss *mcp.ServerSession, r resourceURI, stream EventStream) {
	defer stream.Close()
	for {
		e, err := stream.Next(ctx)
		if err != nil {
			if ctx.Err() == nil {
				s.cfg.Logger.Warn("mcp: subscription ended", "err", err)
			}
			return
		}
		params := &mcp.ResourceUpdatedNotificationParams{URI: EventURI(r.tenant, r.project, e.Sequence)}
		nctx, cancel := context.WithTimeout(ctx, notifyTimeout)
		_, err = s.send(nctx, "notifications/resources/updated", &mcp.ServerRequest[*mcp.ResourceUpdatedNotificationParams]{Session: ss, Params: params})
		cancel()
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, mcp.ErrConnectionClosed) {
				s.cfg.Logger.Warn("mcp: notifying a subscriber", "err", err)
			}
			return
		}
	}
}

// count is how many subscriptions the session has besides one to uri.
func (ss *subscriptions) count(session *mcp.ServerSession, uri string) int {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	n := len(ss.bySession[session])
	if _, ok := ss.bySession[session][uri]; ok {
		n--
	}
	return n
}

// add records a subscription, replacing (and ending) one to the same URI;
// first reports whether it is the session's first.
func (ss *subscriptions) add(session *mcp.ServerSession, uri string, cancel context.CancelFunc) (first bool) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.closed {
		cancel()
		return false
	}
	m, ok := ss.bySession[session]
	if !ok {
		m = map[string]context.CancelFunc{}
		ss.bySession[session] = m
	}
	if old, ok := m[uri]; ok {
		old()
	}
	m[uri] = cancel
	return !ok
}

// remove ends a subscription.
func (ss *subscriptions) remove(session *mcp.ServerSession, uri string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if cancel, ok := ss.bySession[session][uri]; ok {
		cancel()
		delete(ss.bySession[session], uri)
	}
}

// closeSession ends every subscription of a session.
func (ss *subscriptions) closeSession(session *mcp.ServerSession) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for _, cancel := range ss.bySession[session] {
		cancel()
	}
	delete(ss.bySession, session)
}

// closeAll ends every subscription and refuses new ones.
func (ss *subscriptions) closeAll() {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.closed = true
	for session, m := range ss.bySession {
		for _, cancel := range m {
			cancel()
		}
		delete(ss.bySession, session)
	}
}
