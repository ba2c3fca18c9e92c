package fastpath

import (
	"context"
	"sync"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/graph/scalar"
)

// invalidSubscribePlan is the plan of a document that does not parse or
// validate: not eligible, and not cached.
var invalidSubscribePlan = &subscribePlan{}

// subscribePlan is what one document means for the fast path.
type subscribePlan struct {
	eligible bool
	required []string // the variables of non-null types
	name     string   // the operation's name
	field    *ast.Field
	prefix   []byte // {"data":{"<alias>":
	event    pageWriter

	// encoded holds the payloads of recent shared events: written once per
	// event, read by every subscriber without locking. recent bounds it.
	encoded sync.Map // *domain.AuditEvent -> []byte
	mu      sync.Mutex
	recent  [encodedCacheSize]*domain.AuditEvent
	next    int
}

// encodedCacheSize is how many events' payloads a plan keeps.
const encodedCacheSize = 1024

// Open serves the auditEventRecorded subscription without gqlgen's
// per-field execution, which would otherwise run the selection set once per
// subscriber per event: thousands of dashboards watching a project would
// re-encode every event thousands of times. Here an event is encoded once
// per distinct selection and the bytes are shared by every subscriber with
// that selection.
//
// Open starts serving the operation if it is the fast path's to serve; ok
// reports whether it is: a valid document with exactly this one
// subscription field, variables it reads strictly, within the limits.
// Anything else, and any error opening the subscription (opening has no
// side effects), is left to the executor, which reports it. The results
// are pulled from the returned Subscription: with Next, which never waits
// for an event to be committed (wake, if not nil, is called whenever
// results may have become available: the subscription needs no goroutine
// waiting for them), or with Wait, which does. The subscription ends when
// ctx ends or it is closed. Operation middlewares of the generic server do
// not see the subscriptions it opens (see Config.OnOpened).
func (p *Paths) Open(ctx context.Context, params *graphql.RawParams, wake func()) (sub *Subscription, ok bool) {
	if !p.subscribeOn || len(params.Extensions) > 0 {
		return nil, false
	}
	plan := p.subscribes.get(params.Query, params.OperationName)
	if !plan.eligible {
		return nil, false
	}
	for _, name := range plan.required {
		if v, ok := params.Variables[name]; !ok || v == nil {
			return nil, false // the executor refuses it
		}
	}
	in, ok := subscribeArgs(plan.field, params.Variables)
	if !ok {
		return nil, false
	}
	stream, err := p.cfg.App.SubscribeAuditEvents(ctx, app.IdentityFromContext(ctx), in)
	if err != nil {
		return nil, false // the executor reports it
	}
	if p.cfg.OnOpened != nil {
		p.cfg.OnOpened(ctx, plan.name)
	}
	sub = &Subscription{plan: plan, stream: stream, wake: wake}
	sub.pull, _ = stream.(puller)
	if sub.pull != nil && wake != nil {
		sub.pull.OnReady(wake)
	}
	// The subscription ends with ctx, also when the caller stops pulling
	// (the connection closed while it waited to send, say).
	sub.stop = context.AfterFunc(ctx, stream.Close)
	return sub, true
}

// puller is a stream that can be pulled without waiting, calling back when
// events may be at hand; *live.Subscription is one.
type puller interface {
	OnReady(f func())
	Pull(ctx context.Context) (*domain.AuditEvent, bool, error)
}

// Subscription is an auditEventRecorded subscription served by the fast
// path (see [Paths.Open]). Next and Wait are called from one goroutine at a
// time; Close from any.
type Subscription struct {
	plan   *subscribePlan
	stream app.AuditEventStream
	pull   puller // the stream, if it can be pulled without waiting
	wake   func()
	stop   func() bool

	// bridge carries the events of a stream that can only be waited on
	// (not the live hub's) from a goroutine waiting on it, started by the
	// first Next; it is closed when the stream ends.
	bridge chan *domain.AuditEvent
	ended  bool
}

// Next returns the next result payload if one is at hand, without waiting
// for an event to be committed (it may read committed ones from the store):
// a nil payload when none is, after which wake is called once one may be;
// more is false when the subscription has ended.
func (s *Subscription) Next(ctx context.Context) (payload []byte, more bool) {
	if s.ended {
		return nil, false
	}
	if s.pull != nil {
		e, ok, err := s.pull.Pull(ctx)
		switch {
		case err != nil:
			s.end()
			return nil, false
		case !ok:
			return nil, true
		}
		return s.plan.payload(e), true
	}
	if s.bridge == nil {
		s.startBridge(ctx)
	}
	select {
	case e, ok := <-s.bridge:
		if !ok {
			s.end()
			return nil, false
		}
		return s.plan.payload(e), true
	default:
		return nil, true
	}
}

// Wait returns the next result payload, waiting until an event is
// committed; more is false when the subscription has ended (ctx ended, the
// subscription was closed, or its stream failed).
func (s *Subscription) Wait(ctx context.Context) (payload []byte, more bool) {
	if s.ended {
		return nil, false
	}
	if s.bridge != nil {
		select {
		case e, ok := <-s.bridge:
			if !ok {
				s.end()
				return nil, false
			}
			return s.plan.payload(e), true
		case <-ctx.Done():
			s.end()
			return nil, false
		}
	}
	e, err := s.stream.Next(ctx)
	if err != nil {
		s.end()
		return nil, false
	}
	return s.plan.payload(e), true
}

// startBridge starts the goroutine moving a waiting-only stream's events
// into bridge, calling wake after each.
func (s *Subscription) startBridge(ctx context.Context) {
	ch := make(chan *domain.AuditEvent, 1)
	s.bridge = ch
	go func() {
		defer func() {
			close(ch)
			if s.wake != nil {
				s.wake() // Next sees the end
			}
		}()
		for {
			e, err := s.stream.Next(ctx)
			if err != nil {
				return
			}
			select {
			case ch <- e:
			case <-ctx.Done():
				return
			}
			if s.wake != nil {
				s.wake()
			}
		}
	}()
}

// end marks the subscription ended and closes its stream.
func (s *Subscription) end() {
	s.ended = true
	s.Close()
}

// Close ends the subscription and releases its stream. It may be called
// more than once, from any goroutine.
func (s *Subscription) Close() {
	s.stream.Close()
	if s.stop != nil {
		s.stop()
	}
}

// payload returns the result message payload of e, encoding each shared
// event once.
func (plan *subscribePlan) payload(e *domain.AuditEvent) []byte {
	if b, ok := plan.encoded.Load(e); ok {
		return b.([]byte)
	}
	b := plan.event.appendEvent(append(make([]byte, 0, 768), plan.prefix...), e)
	b = append(b, "}}"...)
	if prev, loaded := plan.encoded.LoadOrStore(e, b); loaded {
		return prev.([]byte)
	}
	plan.mu.Lock()
	if old := plan.recent[plan.next]; old != nil {
		plan.encoded.Delete(old)
	}
	plan.recent[plan.next] = e
	plan.next = (plan.next + 1) % encodedCacheSize
	plan.mu.Unlock()
	return b
}

func (p *Paths) makeSubscribePlan(query, operationName string) *subscribePlan {
	no := &subscribePlan{}
	doc, op, field, ok, valid := p.documents.singleRootField(query, operationName, ast.Subscription)
	if !valid {
		return invalidSubscribePlan
	}
	if !ok || field.Name != "auditEventRecorded" {
		return no
	}
	plan := &subscribePlan{field: field, name: op.Name}
	plan.event.oc = &graphql.OperationContext{RawQuery: query, Doc: doc, Operation: op, Variables: map[string]any{}}
	if !plan.event.planEvent(field.SelectionSet) {
		return no
	}
	plan.prefix = append(appendString([]byte(`{"data":{`), field.Alias), ':')
	for _, v := range op.VariableDefinitions {
		if v.Type.NonNull {
			plan.required = append(plan.required, v.Variable)
		}
	}
	plan.eligible = true
	return plan
}

// subscribeArgs reads the subscription's arguments as the generated code
// would; ok is false for anything unexpected.
func subscribeArgs(field *ast.Field, vars map[string]any) (in app.SubscribeAuditEventsInput, ok bool) {
	ok = readArgs(field, vars, func(args map[string]any) bool {
		if !projectAndFilter(args, &in.ProjectID, &in.Filter) {
			return false
		}
		if v, present := args["afterSequence"]; present && v != nil {
			n, err := scalar.UnmarshalUint64(v)
			if err != nil {
				return false
			}
			in.AfterSequence = &n
		}
		return true
	})
	return in, ok
}
