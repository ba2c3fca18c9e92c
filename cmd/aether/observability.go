package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/aetheriot/aether-audit/metrics"
	"github.com/aetheriot/aether-audit/store"
)

// jobCountTimeout bounds the River job count of one scrape.
const jobCountTimeout = 2 * time.Second

// observability is the process's metrics and, when configured, tracing.
type observability struct {
	metrics *metrics.Metrics
	tracing *sdktrace.TracerProvider // nil when tracing is off
}

// startObservability creates the metric set (with the River queue depth
// read from st at scrape time) and starts tracing if the OTEL_* variables
// ask for it.
func startObservability(ctx context.Context, logger *slog.Logger, st *store.Store) (*observability, error) {
	o := &observability{metrics: metrics.New(logger)}
	o.metrics.ObserveJobs(func(ctx context.Context) ([]metrics.JobCount, error) {
		counts, err := st.CountUnfinishedRiverJobs(ctx)
		out := make([]metrics.JobCount, len(counts))
		for i, c := range counts {
			out[i] = metrics.JobCount{Queue: c.Queue, State: c.State, Kind: c.Kind, Count: c.Count, OldestScheduledAt: c.OldestScheduledAt}
		}
		return out, err
	}, jobCountTimeout)
	tp, err := startTracing(ctx)
	if err != nil {
		return nil, err
	}
	o.tracing = tp
	if tp != nil {
		logger.Info("tracing on: exporting spans as the OTEL_* variables configure")
	}
	return o, nil
}

// tracerProvider returns the tracer provider, or nil (no interface holding
// a nil pointer) when tracing is off.
func (o *observability) tracerProvider() trace.TracerProvider {
	if o.tracing == nil {
		return nil
	}
	return o.tracing
}

// appTracer returns the tracer of the use cases' command spans, or nil.
func (o *observability) appTracer() trace.Tracer {
	if o.tracing == nil {
		return nil
	}
	return o.tracing.Tracer("github.com/aetheriot/aether-audit/app")
}

// shutdown flushes the spans not yet exported.
func (o *observability) shutdown(logger *slog.Logger) {
	if o.tracing == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := o.tracing.Shutdown(ctx); err != nil {
		logger.Warn("flushing traces", "err", err)
	}
}

// serveMetrics starts the separate metrics listener at addr, serving only
// /metrics without authentication; nil when addr is empty.
func serveMetrics(ctx context.Context, addr string, h http.Handler, logger *slog.Logger) (*http.Server, error) {
	if addr == "" || h == nil {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s (metrics): %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", h)
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("metrics listener failed", "err", err)
		}
	}()
	logger.Info("metrics listener", "url", "http://"+ln.Addr().String()+"/metrics")
	return srv, nil
}
