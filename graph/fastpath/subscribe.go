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
// side effects), is left to the executor, which reports it. next returns
// each result payload, blocking until an event commits, and more=false when
// the subscription ends; with wait=false it returns at once, a nil payload
// when no result is at hand. The subscription ends when ctx ends.
// Operation middlewares of the generic server do not see the subscriptions
// it opens (see Config.OnOpened).
func (p *Paths) Open(ctx context.Context, params *graphql.RawParams) (next func(ctx context.Context, wait bool) (payload []byte, more bool), ok bool) {
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
	// The subscription ends with ctx, also when the caller stops calling
	// next (the connection closed while it waited to send, say).
	context.AfterFunc(ctx, stream.Close)
	try, _ := stream.(interface {
		TryNext() (*domain.AuditEvent, bool)
	})
	return func(ctx context.Context, wait bool) ([]byte, bool) {
		if !wait {
			if try == nil {
				return nil, true
			}
			e, ok := try.TryNext()
			if !ok {
				return nil, true
			}
			return plan.payload(e), true
		}
		e, err := stream.Next(ctx)
		if err != nil {
			stream.Close()
			return nil, false
		}
		return plan.payload(e), true
	}, true
}

// payload returns the result message payload of e, encoding each shared
// event once.
func (plan *subscribePlan) payload(e *domain.AuditEvent) []byte {
	if b, ok := plan.encoded.Load(e); ok {
		return b.([]byte)
	}
	buf := &bytesWriter{b: append(make([]byte, 0, 768), plan.prefix...)}
	plan.event.writeEvent(buf, e)
	buf.b = append(buf.b, "}}"...)
	if prev, loaded := plan.encoded.LoadOrStore(e, buf.b); loaded {
		return prev.([]byte)
	}
	plan.mu.Lock()
	if old := plan.recent[plan.next]; old != nil {
		plan.encoded.Delete(old)
	}
	plan.recent[plan.next] = e
	plan.next = (plan.next + 1) % encodedCacheSize
	plan.mu.Unlock()
	return buf.b
}

// bytesWriter is an io.Writer appending to a byte slice.
type bytesWriter struct{ b []byte }

func (w *bytesWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
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
	w := &bytesWriter{b: []byte(`{"data":{`)}
	graphql.MarshalString(field.Alias).MarshalGQL(w)
	plan.prefix = append(w.b, ':')
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
