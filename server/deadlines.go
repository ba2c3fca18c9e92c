package server

import (
	"net/http"
	"time"
)

// DefaultWriteTimeout bounds how long a response may take to write: the
// whole response of an ordinary route, and each write of a stream (live
// and snapshot SSE, graphql-sse, export downloads), whose lifetime is its
// own. A client that reads too slowly is disconnected.
const DefaultWriteTimeout = time.Minute

// withDeadlines gives every request the connection deadlines of its kind.
// The http.Server's ReadTimeout bounds reading the request, body included;
// once the body is read (or there is none) the read deadline is lifted, so
// that a handler that takes a while is not cancelled by it. The response
// must be written within WriteTimeout; streams replace that with a
// deadline per write (streamDeadlines).
func (s *Server) withDeadlines(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		_ = rc.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
		if r.ContentLength == 0 {
			_ = rc.SetReadDeadline(time.Time{})
		}
		next.ServeHTTP(w, r)
	})
}

// bodyRead lifts the read deadline of a request whose body has been read
// whole: the http.Server's ReadTimeout has done its job.
func bodyRead(w http.ResponseWriter) {
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
}

// streamDeadlines turns w into the writer of a long-lived response: no read
// deadline (the request was read), and instead of the whole response's
// deadline, each write and flush must complete within timeout, so that a
// stream lives as long as its client keeps reading.
func streamDeadlines(w http.ResponseWriter, timeout time.Duration) http.ResponseWriter {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Time{})
	return &deadlineWriter{ResponseWriter: w, rc: rc, timeout: timeout}
}

// deadlineWriter sets a write deadline before each write and flush of a
// stream.
type deadlineWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

// Write implements http.ResponseWriter.
func (w *deadlineWriter) Write(p []byte) (int, error) {
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.timeout))
	return w.ResponseWriter.Write(p)
}

// Flush implements http.Flusher.
func (w *deadlineWriter) Flush() {
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.timeout))
	_ = w.rc.Flush()
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
