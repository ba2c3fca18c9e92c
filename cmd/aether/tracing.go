package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
)

// tracingConfigured reports whether the standard OpenTelemetry variables
// ask for traces: an OTLP endpoint, or an explicit OTEL_TRACES_EXPORTER
// other than "none", and the SDK not disabled by OTEL_SDK_DISABLED.
func tracingConfigured(getenv func(string) string) bool {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	if exp := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); exp != "" {
		return !strings.EqualFold(exp, "none")
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// startTracing builds the tracer provider when tracingConfigured, with the
// exporter the OTEL_* variables choose (OTLP over HTTP by default, or
// OTEL_EXPORTER_OTLP_PROTOCOL=grpc, OTEL_TRACES_EXPORTER=console, ...), the
// sampler of OTEL_TRACES_SAMPLER, the service name of OTEL_SERVICE_NAME
// (default aether-audit) and OTEL_RESOURCE_ATTRIBUTES. It also installs it,
// with the W3C trace-context and baggage propagators, as the global
// provider. It returns nil when tracing is off; shut it down to flush.
func startTracing(ctx context.Context) (*sdktrace.TracerProvider, error) {
	if !tracingConfigured(os.Getenv) {
		return nil, nil
	}
	exporter, err := autoexport.NewSpanExporter(ctx)
	if err != nil {
		return nil, fmt.Errorf("configuring the trace exporter: %w", err)
	}
	if autoexport.IsNoneSpanExporter(exporter) {
		return nil, nil
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName("aether-audit")),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win
	)
	if err != nil {
		return nil, fmt.Errorf("tracing resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return tp, nil
}
