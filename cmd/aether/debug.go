package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// debugServer serves the Go runtime's profiles (net/http/pprof) on a
// private listener of its own, apart from the service's handler, for
// profiling and for the soak test's reading of the server's goroutines and
// heap (/debug/pprof/goroutine?debug=1, /debug/pprof/heap?gc=1&debug=1).
// It has no authentication: bind it to a loopback or otherwise private
// address only. It does not serve the command line (pprof's cmdline), which
// holds any secret passed as a flag.
type debugServer struct {
	http *http.Server
	done chan error
}

// startDebugServer listens on addr and serves the profiles until stop.
func startDebugServer(addr string, logger *slog.Logger) (*debugServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening on --debug-addr %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	d := &debugServer{
		http: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second},
		done: make(chan error, 1),
	}
	go func() { d.done <- d.http.Serve(ln) }()
	logger.Warn("serving Go runtime profiles WITHOUT authentication: keep this address private",
		"debug", "http://"+ln.Addr().String()+"/debug/pprof/")
	return d, nil
}

// stop closes the listener and waits for requests in flight (a CPU profile
// may take its full duration) until ctx ends.
func (d *debugServer) stop(ctx context.Context) error {
	err := d.http.Shutdown(ctx)
	if serveErr := <-d.done; !errors.Is(serveErr, http.ErrServerClosed) {
		err = errors.Join(err, serveErr)
	}
	return err
}
