package client

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// The error codes of docs/api.md ("Errors"), found in [Error.Code].
const (
	CodeUnauthenticated      = "UNAUTHENTICATED"
	CodeForbidden            = "FORBIDDEN"
	CodeNotFound             = "NOT_FOUND"
	CodeBadUserInput         = "BAD_USER_INPUT"
	CodeIdempotencyConflict  = "IDEMPOTENCY_CONFLICT"
	CodeInternal             = "INTERNAL"
	CodeConfirmationRequired = "CONFIRMATION_REQUIRED"
	CodeInvalidState         = "INVALID_STATE"
	CodeQuotaExceeded        = "QUOTA_EXCEEDED"
	CodeRateLimited          = "RATE_LIMITED"
	// CodeUnavailable: an append waited past the server's bound for its
	// project's head (held by another transaction); see RetryAfter.
	CodeUnavailable = "UNAVAILABLE"
	// CodeGraphQLValidationFailed is gqlgen's code for a document that does
	// not validate against the schema (a client of another schema version).
	CodeGraphQLValidationFailed = "GRAPHQL_VALIDATION_FAILED"
)

// Error is an error the server answered: a GraphQL error with its
// extensions, or a WebSocket close. Use errors.As to read it, or
// [ErrorCode].
type Error struct {
	// Code is extensions.code (see the Code constants), or, for a
	// WebSocket close without one, "" (CloseCode says why).
	Code string
	// Message is the server's message.
	Message string
	// Field names the input field at fault (extensions.field), if any,
	// e.g. "events[3].action".
	Field string
	// RetryAfter is extensions.retryAfterSeconds of RATE_LIMITED and
	// UNAVAILABLE.
	RetryAfter time.Duration
	// Path is the GraphQL path of the error, if any.
	Path []any
	// HTTPStatus is the HTTP status of the response (0 over WebSocket).
	HTTPStatus int
	// CloseCode is the WebSocket close code that ended a subscription
	// (0 for other errors).
	CloseCode int
	// More are the response's further errors, if it had several.
	More []*Error
}

// Error shows the code, the field and the message.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("aether: ")
	if e.Code != "" {
		b.WriteString(e.Code)
		b.WriteString(": ")
	}
	if e.CloseCode != 0 {
		fmt.Fprintf(&b, "websocket closed with %d: ", e.CloseCode)
	}
	if e.Field != "" && !strings.HasPrefix(e.Message, e.Field) {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Message)
	if len(e.More) > 0 {
		fmt.Fprintf(&b, " (and %d more)", len(e.More))
	}
	return b.String()
}

// ErrorCode is the code of err's [*Error], or "" when err is not one.
func ErrorCode(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// wireError is one entry of a GraphQL response's errors.
type wireError struct {
	Message    string         `json:"message"`
	Path       []any          `json:"path"`
	Extensions map[string]any `json:"extensions"`
}

// toError turns a response's errors into one *Error.
func toError(errs []wireError, status int) *Error {
	out := make([]*Error, len(errs))
	for i, w := range errs {
		e := &Error{Message: w.Message, Path: w.Path, HTTPStatus: status}
		e.Code, _ = w.Extensions["code"].(string)
		e.Field, _ = w.Extensions["field"].(string)
		if s, ok := w.Extensions["retryAfterSeconds"].(float64); ok && s > 0 {
			e.RetryAfter = time.Duration(s * float64(time.Second))
		}
		out[i] = e
	}
	first := out[0]
	first.More = out[1:]
	if len(first.More) == 0 {
		first.More = nil
	}
	return first
}
