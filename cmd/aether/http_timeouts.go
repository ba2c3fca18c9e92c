package main

import (
	"context"
	"net"
	"net/http"
	"time"
)

// httpTimeoutFlags bound how long a client may take to send a request and
// to read its response, so that slow or stalled clients cannot hold the
// server's connections and memory.
type httpTimeoutFlags struct {
	HTTPReadHeaderTimeout time.Duration `name:"http-read-header-timeout" env:"AETHER_HTTP_READ_HEADER_TIMEOUT" default:"10s" help:"Time a client has to send a request's headers."`
	HTTPReadTimeout       time.Duration `name:"http-read-timeout" env:"AETHER_HTTP_READ_TIMEOUT" default:"30s" help:"Time a client has to send a whole request, body included (a request without a valid token is refused before its body is read)."`
	HTTPWriteTimeout      time.Duration `name:"http-write-timeout" env:"AETHER_HTTP_WRITE_TIMEOUT" default:"1m" help:"Time a response may take to write: the whole response of an ordinary request, each write of a stream (live SSE, graphql-sse, export downloads), which otherwise lives as long as its client reads."`
	HTTPIdleTimeout       time.Duration `name:"http-idle-timeout" env:"AETHER_HTTP_IDLE_TIMEOUT" default:"2m" help:"How long an idle keep-alive connection stays open."`
}

// server returns the http.Server of handler with these timeouts; the write
// timeout is the handler's own (per route, see server.Config.WriteTimeout).
func (f httpTimeoutFlags) server(ctx context.Context, handler http.Handler) *http.Server {
	return &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: f.HTTPReadHeaderTimeout,
		ReadTimeout:       f.HTTPReadTimeout,
		IdleTimeout:       f.HTTPIdleTimeout,
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
}
