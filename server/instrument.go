package server

import (
	"bufio"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/felixge/httpsnoop"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// tracerName names the server's tracer.
const tracerName = "github.com/aetheriot/aether-audit/server"

// instrument wraps the router with the request metrics and the request span,
// when configured; with neither it returns next itself. Both are labelled
// by the matched route pattern, never the raw path (a download path holds
// its capability).
//
// The span continues the trace of a valid W3C traceparent header, or starts
// a new one; its trace id becomes the correlation.traceId of the audit
// events the request records (see traced).
func (s *Server) instrument(next http.Handler) http.Handler {
	if s.cfg.Metrics == nil && s.tracer == nil {
		return next
	}
	propagator := propagation.TraceContext{}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		method := boundedMethod(r.Method)
		var span trace.Span
		if s.tracer != nil {
			ctx := propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
			ctx, span = s.tracer.Start(ctx, method, trace.WithSpanKind(trace.SpanKindServer),
				trace.WithAttributes(semconv.HTTPRequestMethodKey.String(method)))
			defer span.End()
			r = r.WithContext(ctx)
		}
		code := 0
		ww := httpsnoop.Wrap(w, httpsnoop.Hooks{
			WriteHeader: func(next httpsnoop.WriteHeaderFunc) httpsnoop.WriteHeaderFunc {
				return func(c int) {
					if code == 0 {
						code = c
					}
					next(c)
				}
			},
			Write: func(next httpsnoop.WriteFunc) httpsnoop.WriteFunc {
				return func(b []byte) (int, error) {
					if code == 0 {
						code = http.StatusOK
					}
					return next(b)
				}
			},
			Hijack: func(next httpsnoop.HijackFunc) httpsnoop.HijackFunc {
				return func() (net.Conn, *bufio.ReadWriter, error) {
					if code == 0 {
						code = http.StatusSwitchingProtocols
					}
					return next()
				}
			},
		})
		// The router records the matched pattern in r.Pattern.
		next.ServeHTTP(ww, r)
		if code == 0 {
			code = http.StatusOK
		}
		route := routeOf(r.Pattern)
		if span != nil {
			span.SetName(method + " " + route)
			span.SetAttributes(semconv.HTTPRoute(route), semconv.HTTPResponseStatusCode(code))
			if code >= 500 {
				span.SetStatus(codes.Error, http.StatusText(code))
			}
		}
		if s.cfg.Metrics != nil {
			s.cfg.Metrics.HTTPRequest(method, route, code, time.Since(start))
		}
	})
}

// routeOf turns a matched ServeMux pattern ("GET /api/v1/audit/events")
// into the route label ("/api/v1/audit/events").
func routeOf(pattern string) string {
	if pattern == "" {
		return "unmatched"
	}
	if i := strings.IndexByte(pattern, ' '); i >= 0 {
		pattern = pattern[i+1:]
	}
	return pattern
}

// boundedMethod keeps the label of a request method bounded: the standard
// methods as they are, anything else "_OTHER".
func boundedMethod(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return m
	}
	return "_OTHER"
}
