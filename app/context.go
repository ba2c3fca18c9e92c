package app

import "context"

type identityKey struct{}
type traceIDKey struct{}

// ContextWithIdentity returns ctx carrying the verified identity. The
// server's authentication middleware calls it; resolvers and handlers read
// it back with IdentityFromContext and hand it to the use cases.
func ContextWithIdentity(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// IdentityFromContext returns the identity ContextWithIdentity stored; the
// zero Identity (which every use case refuses) when there is none.
func IdentityFromContext(ctx context.Context) Identity {
	id, _ := ctx.Value(identityKey{}).(Identity)
	return id
}

// ContextWithTraceID returns ctx carrying the request's W3C trace id.
func ContextWithTraceID(ctx context.Context, traceID string) context.Context {
	return context.WithValue(ctx, traceIDKey{}, traceID)
}

// TraceIDFromContext returns the request's W3C trace id, or "".
func TraceIDFromContext(ctx context.Context) string {
	s, _ := ctx.Value(traceIDKey{}).(string)
	return s
}

type baseURLKey struct{}

// ContextWithBaseURL returns ctx carrying the base URL (scheme://host) the
// client reached the service at, for links the service hands out.
func ContextWithBaseURL(ctx context.Context, base string) context.Context {
	return context.WithValue(ctx, baseURLKey{}, base)
}

// BaseURLFromContext returns the base URL ContextWithBaseURL stored, or "".
func BaseURLFromContext(ctx context.Context) string {
	s, _ := ctx.Value(baseURLKey{}).(string)
	return s
}
