package app

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Observer receives measurements of the use cases, for metrics; the
// metrics package implements it. Calls must be cheap and must not block.
type Observer interface {
	// WebhookAttempt is called once for each finished delivery attempt, with
	// its outcome (succeeded, failed or unknown) and, for a succeeded one,
	// the time from the event's recording to its delivery (else 0).
	WebhookAttempt(outcome string, deliveryLag time.Duration)
	// DataExportRun is called when a run of an export ends, with the
	// export's kind, the outcome (ready, failed, or error for a run River
	// tries again), the run's duration, and the object's size when ready.
	DataExportRun(kind, outcome string, took time.Duration, bytes uint64)
	// CheckpointSigned is called once for each checkpoint signing that
	// ended: outcome signed, or refused when the chain did not recompute
	// (the signer never signs a broken chain).
	CheckpointSigned(outcome string)
}

// Outcomes of CheckpointSigned.
const (
	CheckpointOutcomeSigned  = "signed"
	CheckpointOutcomeRefused = "refused"
)

// Outcomes of DataExportRun.
const (
	ExportRunReady  = "ready"
	ExportRunFailed = "failed"
	ExportRunError  = "error"
)

// noObserver is the Observer of an App configured without one.
type noObserver struct{}

func (noObserver) WebhookAttempt(string, time.Duration)                {}
func (noObserver) DataExportRun(string, string, time.Duration, uint64) {}
func (noObserver) CheckpointSigned(string)                             {}

// startCommand starts the span of a command (a use case that writes) when
// tracing is configured. Without a tracer it returns ctx unchanged and the
// no-op span of ctx, at no cost. End it with endCommand.
func (a *App) startCommand(ctx context.Context, name string) (context.Context, trace.Span) {
	if a.tracer == nil {
		return ctx, trace.SpanFromContext(ctx)
	}
	return a.tracer.Start(ctx, "app."+name, trace.WithSpanKind(trace.SpanKindInternal))
}

// endCommand ends a command's span, marking it failed with err. Without a
// tracer it does nothing (span is the caller's, or a no-op).
func (a *App) endCommand(span trace.Span, err error) {
	if a.tracer == nil {
		return
	}
	var appErr *Error
	switch {
	case err == nil:
	case errors.As(err, &appErr) && appErr.Code != CodeInternal:
		// A refusal (bad input, not found, ...) is the command's answer,
		// not its failure.
		span.SetAttributes(attribute.String("aether.error_code", string(appErr.Code)))
	default:
		span.RecordError(err)
		span.SetStatus(codes.Error, "internal error")
	}
	span.End()
}
