package domain

import (
	"errors"
	"fmt"
)

// ValidationError says that one field of an input breaks a documented rule.
// Interfaces present it as a client mistake (GraphQL BAD_USER_INPUT, HTTP 400).
type ValidationError struct {
	// Field is the input path of the offending field, e.g. "subject.id".
	Field string
	// Message says what rule the value breaks; it never echoes large or
	// secret values.
	Message string
}

// Error implements error.
func (e *ValidationError) Error() string {
	if e.Field == "" {
		return e.Message
	}
	return e.Field + ": " + e.Message
}

func invalid(field, format string, args ...any) *ValidationError {
	return &ValidationError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// ErrNotFound is returned by stores when a looked-up record does not exist
// within the caller's tenant and project.
var ErrNotFound = errors.New("not found")

// ErrWebhookDeliveryExists is returned by a store's plain insert of
// deliveries when one of them is stored already (a rerun of a fan-out): the
// caller runs its transaction again with the insert that skips those.
var ErrWebhookDeliveryExists = errors.New("webhook delivery exists already")
