package server

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"regexp"
	"strings"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/auth"
)

// unauthenticatedWriter answers a request without a valid token in the
// dialect of its endpoint.
type unauthenticatedWriter func(w http.ResponseWriter, r *http.Request, msg string)

// authenticated verifies the request's bearer token and puts the identity
// in the request context. Without a valid token the request never reaches
// next.
func (s *Server) authenticated(next http.Handler, deny unauthenticatedWriter) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Preflights carry no credentials; WebSocket upgrades authenticate in
		// the protocol (connection_init), since browsers cannot set headers
		// on them.
		if r.Method == http.MethodOptions || isWebSocketUpgrade(r) {
			next.ServeHTTP(w, r)
			return
		}
		token, ok := auth.BearerToken(r.Header.Get("Authorization"))
		if !ok {
			refuseUnread(w, r)
			deny(w, r, "a bearer token is required")
			return
		}
		id, err := s.cfg.Verifier.Verify(token)
		if err != nil {
			msg := "invalid token"
			if errors.Is(err, auth.ErrTokenExpired) {
				msg = "token expired"
			}
			refuseUnread(w, r)
			deny(w, r, msg)
			return
		}
		// The identity lives in the request passed on; the request's span,
		// started outside, is told here.
		if span := trace.SpanFromContext(r.Context()); span.IsRecording() {
			span.SetAttributes(attribute.String("aether.tenant_id", id.TenantID))
		}
		next.ServeHTTP(w, r.WithContext(app.ContextWithIdentity(r.Context(), id)))
	})
}

// refuseUnread closes the connection after the answer to a request whose
// body is left unread (a request refused before its body is read, such as
// one without a valid token), so that net/http does not read the body to
// keep the connection: an unauthenticated client costs a few KiB of
// headers, not its body.
func refuseUnread(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody {
		w.Header().Set("Connection", "close")
	}
}

// traceparentPattern is a W3C traceparent: version-traceid-parentid-flags.
var traceparentPattern = regexp.MustCompile(`^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}$`)

// traced puts the request's W3C trace id into the request context; audit
// events the request records carry it. With tracing on it is the trace id
// of the request's span (which continues an incoming traceparent); with
// tracing off it is taken from the traceparent header, when valid.
func (s *Server) traced(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if sc := trace.SpanContextFromContext(r.Context()); sc.HasTraceID() {
			r = r.WithContext(app.ContextWithTraceID(r.Context(), sc.TraceID().String()))
		} else if m := traceparentPattern.FindStringSubmatch(r.Header.Get("Traceparent")); m != nil && m[1] != "00000000000000000000000000000000" {
			r = r.WithContext(app.ContextWithTraceID(r.Context(), m[1]))
		}
		next.ServeHTTP(w, r)
	})
}

// limitBody reads the whole body up front, refusing one over the limit with
// 413, so that no handler ever sees a truncated request. It runs after
// authentication: a request without a valid token is refused before its
// body is read. Reading the body is bounded by the http.Server's
// ReadTimeout, lifted once it is read.
func (s *Server) limitBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Method == http.MethodGet || r.Method == http.MethodOptions {
			next.ServeHTTP(w, r)
			return
		}
		limit := s.cfg.MaxBodyBytes
		if r.ContentLength > limit {
			graphQLError(w, http.StatusRequestEntityTooLarge, app.CodeBadUserInput, "request body exceeds the limit of "+formatBytes(limit))
			return
		}
		if msg := s.refuseEarly(w, r); msg != "" {
			return
		}
		body, err := readBody(r, limit)
		if err != nil {
			graphQLError(w, http.StatusBadRequest, app.CodeBadUserInput, "could not read request body")
			return
		}
		if int64(len(body)) > limit {
			graphQLError(w, http.StatusRequestEntityTooLarge, app.CodeBadUserInput, "request body exceeds the limit of "+formatBytes(limit))
			return
		}
		r.Body = &readBodyBytes{Reader: bytes.NewReader(body), b: body}
		bodyRead(w)
		next.ServeHTTP(w, r)
	})
}

// readBody reads r's body, at most limit+1 bytes. A body of a declared
// length is read into one buffer of that size (growing a buffer for a large
// body costs more than the rest of refusing it); one of unknown length
// grows as it comes.
func readBody(r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength <= 0 {
		return io.ReadAll(io.LimitReader(r.Body, limit+1))
	}
	body := make([]byte, r.ContentLength)
	n := 0
	if rb, ok := r.Body.(*headRead); ok {
		n = copy(body, rb.head)
		r.Body = rb.rest
	}
	if _, err := io.ReadFull(r.Body, body[n:]); err != nil {
		return nil, err
	}
	return body, nil
}

// headRead is a request body whose first bytes refuseEarly has read.
type headRead struct {
	head []byte
	rest io.ReadCloser
}

// Read implements io.Reader.
func (h *headRead) Read(p []byte) (int, error) {
	if len(h.head) > 0 {
		n := copy(p, h.head)
		h.head = h.head[n:]
		return n, nil
	}
	return h.rest.Read(p)
}

// Close implements io.Closer.
func (h *headRead) Close() error { return h.rest.Close() }

// refuseEarly reads the first rawShapeMinBody bytes of a large GraphQL
// POST and refuses it, as operationShape would, when the start of its
// document already breaks the shape limits (rawShapeRefusal): the rest of
// the body is never read, and the connection closes. Otherwise the head
// read is kept for the whole body, and it returns "".
func (s *Server) refuseEarly(w http.ResponseWriter, r *http.Request) string {
	if r.Method != http.MethodPost || r.ContentLength <= rawShapeMinBody {
		return ""
	}
	head := make([]byte, rawShapeMinBody)
	n, err := io.ReadFull(r.Body, head)
	r.Body = &headRead{head: head[:n], rest: r.Body}
	if err != nil {
		return ""
	}
	msg := rawShapeRefusal(head, s.cfg.MaxRootFields)
	if msg == "" {
		return ""
	}
	refuseUnread(w, r)
	// A request error, as executeGraphQL answers it: 400 in
	// application/graphql-response+json, 200 in application/json.
	media := responseMedia(w, r)
	if media == mediaGraphQLResponse {
		w.WriteHeader(http.StatusBadRequest)
	}
	writeRequestError(w, &graphql.Response{Errors: gqlerror.List{shapeError(msg)}})
	return msg
}

// readBodyBytes is a request body read whole by limitBody: handlers that
// want its bytes take them (bodyBytes) instead of copying them again.
type readBodyBytes struct {
	*bytes.Reader
	b []byte
}

// Close implements io.Closer.
func (*readBodyBytes) Close() error { return nil }

// bodyBytes returns the whole body of r: the bytes limitBody read, else
// what is left to read.
func bodyBytes(r *http.Request) ([]byte, error) {
	if rb, ok := r.Body.(*readBodyBytes); ok {
		return rb.b, nil
	}
	return io.ReadAll(r.Body)
}

// isWebSocketUpgrade reports whether r asks to upgrade to a WebSocket.
func isWebSocketUpgrade(r *http.Request) bool {
	for _, v := range strings.Split(r.Header.Get("Upgrade"), ",") {
		if strings.EqualFold(strings.TrimSpace(v), "websocket") {
			return true
		}
	}
	return false
}

// withBaseURL puts the service's base URL into the context, for links the
// use cases hand out: the configured public URL, else none, and the links
// are relative to the service ("/api/v1/exports/download/…"). A link is
// never built from the request's Host header, which the client chooses.
func (s *Server) withBaseURL(next http.Handler) http.Handler {
	base := strings.TrimSuffix(s.cfg.PublicURL, "/")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(app.ContextWithBaseURL(r.Context(), base)))
	})
}
