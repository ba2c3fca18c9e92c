package app

import (
	"errors"
	"net/http"
	"time"

	"github.com/aetheriot/aether-audit/domain"
)

// Code is the documented, stable error code clients branch on. GraphQL puts
// it in extensions.code; REST maps it to an HTTP status and a problem+json
// type.
type Code string

// The error codes. The set is part of the public API.
const (
	CodeUnauthenticated      Code = "UNAUTHENTICATED"
	CodeForbidden            Code = "FORBIDDEN"
	CodeNotFound             Code = "NOT_FOUND"
	CodeBadUserInput         Code = "BAD_USER_INPUT"
	CodeIdempotencyConflict  Code = "IDEMPOTENCY_CONFLICT"
	CodeConfirmationRequired Code = "CONFIRMATION_REQUIRED"
	CodeInvalidState         Code = "INVALID_STATE"
	CodeQuotaExceeded        Code = "QUOTA_EXCEEDED"
	CodeRateLimited          Code = "RATE_LIMITED"
	CodeUnavailable          Code = "UNAVAILABLE"
	CodeInternal             Code = "INTERNAL"
)

// HTTPStatus is the HTTP status REST answers with for the code.
func (c Code) HTTPStatus() int {
	switch c {
	case CodeUnauthenticated:
		return http.StatusUnauthorized
	case CodeForbidden:
		return http.StatusForbidden
	case CodeNotFound:
		return http.StatusNotFound
	case CodeBadUserInput:
		return http.StatusBadRequest
	case CodeIdempotencyConflict, CodeInvalidState:
		return http.StatusConflict
	case CodeConfirmationRequired:
		return http.StatusPreconditionRequired
	case CodeQuotaExceeded, CodeRateLimited:
		return http.StatusTooManyRequests
	case CodeUnavailable:
		return http.StatusServiceUnavailable
	default:
		return http.StatusInternalServerError
	}
}

// Error is a use case's answer to a request it refuses. Its Message is safe
// to show the client; Err (never shown) keeps the cause for logs.
type Error struct {
	Code    Code
	Message string
	// Field is the input path of the offending field, for BAD_USER_INPUT.
	Field string
	// RetryAfter, for RATE_LIMITED and UNAVAILABLE, is how long to wait
	// before retrying.
	RetryAfter time.Duration
	Err        error
}

// Error implements error.
func (e *Error) Error() string {
	if e.Field != "" {
		return e.Field + ": " + e.Message
	}
	return e.Message
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Errorf-style constructors for the codes use cases answer with.
func newError(code Code, msg string) *Error { return &Error{Code: code, Message: msg} }

// ErrProjectNotFound answers a request for a project outside the identity's
// projects. Projects are not registered: a project of the token that was
// never used simply has no events, and another tenant's project of the same
// name is another project, so nothing about other tenants can be learnt.
var ErrProjectNotFound = newError(CodeNotFound, "project not found")

// ErrEventNotFound answers a lookup of an event that is missing or not
// visible to the caller.
var ErrEventNotFound = newError(CodeNotFound, "audit event not found")

// ErrorOf turns any error of a use case into an *Error: an *Error as is,
// a *domain.ValidationError as BAD_USER_INPUT, anything else as INTERNAL
// with a generic message (the cause stays in Err for the log).
func ErrorOf(err error) *Error {
	var appErr *Error
	if errors.As(err, &appErr) {
		return appErr
	}
	var verr *domain.ValidationError
	if errors.As(err, &verr) {
		return &Error{Code: CodeBadUserInput, Message: verr.Message, Field: verr.Field, Err: err}
	}
	return &Error{Code: CodeInternal, Message: "internal error", Err: err}
}

func badInput(field, msg string) *Error {
	return &Error{Code: CodeBadUserInput, Field: field, Message: msg}
}
