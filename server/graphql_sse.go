package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler/transport"

	"github.com/aetheriot/aether-audit/app"
)

// graphQLSSE is gqlgen's GraphQL over Server-Sent Events transport (the
// graphql-sse protocol's "distinct connections" mode: one POST accepting
// text/event-stream per operation) bound to the server's lifetime. On
// Shutdown its streams end without the protocol's "complete" event, as a
// dropped connection does, so that clients reconnect (to this or another
// process) and resume with afterSequence; net/http's own Shutdown would
// otherwise wait for them until its deadline.
type graphQLSSE struct {
	sse      transport.SSE
	shutdown <-chan struct{}
	// admit counts the stream against its identity's live connections.
	admit func(ctx context.Context) (release func(), err error)
	// writeTimeout bounds each write of the stream.
	writeTimeout time.Duration
}

var _ graphql.Transport = graphQLSSE{}

// Supports implements graphql.Transport: a POST the request gate chose to
// answer as a stream (eventStreamWanted).
func (t graphQLSSE) Supports(r *http.Request) bool { return eventStreamChosen(r) && t.sse.Supports(r) }

// Do implements graphql.Transport.
func (t graphQLSSE) Do(w http.ResponseWriter, r *http.Request, exec graphql.GraphExecutor) {
	// gqlgen's transport logs (and echoes) a body that is not JSON: answer
	// it here. The body was read whole by the body limit.
	body, err := io.ReadAll(r.Body)
	if err != nil || !json.Valid(body) {
		graphQLError(w, http.StatusBadRequest, app.CodeBadUserInput, "request body is not valid GraphQL-over-HTTP JSON")
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	release, err := t.admit(r.Context())
	if err != nil {
		graphQLError(w, http.StatusTooManyRequests, app.CodeQuotaExceeded, err.Error())
		return
	}
	defer release()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	cw := &cutOffWriter{ResponseWriter: streamDeadlines(w, t.writeTimeout)}
	go func() {
		select {
		case <-t.shutdown:
			cw.cut.Store(true)
			cancel()
		case <-ctx.Done():
		}
	}()
	t.sse.Do(cw, r.WithContext(ctx), exec)
}

// errStreamCut is what writes to a stream cut by shutdown return.
var errStreamCut = errors.New("stream ended by shutdown")

// cutOffWriter drops every write once cut, so that a stream ended by
// shutdown gets no closing event.
type cutOffWriter struct {
	http.ResponseWriter
	cut atomic.Bool
}

// Write implements http.ResponseWriter.
func (w *cutOffWriter) Write(p []byte) (int, error) {
	if w.cut.Load() {
		return 0, errStreamCut
	}
	return w.ResponseWriter.Write(p)
}

// Flush implements http.Flusher.
func (w *cutOffWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok && !w.cut.Load() {
		f.Flush()
	}
}
