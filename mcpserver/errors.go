package mcpserver

import (
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Error is a tool's refusal in the API's documented vocabulary: the code of
// GraphQL's extensions.code (NOT_FOUND, FORBIDDEN, BAD_USER_INPUT,
// CONFIRMATION_REQUIRED, INVALID_STATE, RATE_LIMITED, …), the message, the
// offending input field when known, and for RATE_LIMITED the whole seconds
// to wait.
type Error struct {
	Code              string `json:"code"`
	Message           string `json:"message"`
	Field             string `json:"field,omitempty"`
	RetryAfterSeconds int64  `json:"retryAfterSeconds,omitempty"`
}

// Error implements error as "CODE: message".
func (e *Error) Error() string { return e.Code + ": " + e.Message }

// The codes the package itself answers with (the backends pass theirs on).
const (
	codeBadUserInput = "BAD_USER_INPUT"
	codeNotFound     = "NOT_FOUND"
	codeInternal     = "INTERNAL"
)

// badInput is a BAD_USER_INPUT refusal of field.
func badInput(field, format string, args ...any) *Error {
	return &Error{Code: codeBadUserInput, Field: field, Message: field + ": " + fmt.Sprintf(format, args...)}
}

// errorOf turns any error of a backend into an *Error; one without a code
// is INTERNAL with a generic message.
func errorOf(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Code: codeInternal, Message: "internal error"}
}

// toolError is the result of a tool call that failed: isError, the error
// as "CODE: message" text for the model, and as structured content
// ({"error": {…}}) for programs.
func toolError(e *Error) *mcp.CallToolResult {
	return &mcp.CallToolResult{
		IsError:           true,
		Content:           []mcp.Content{&mcp.TextContent{Text: e.Error()}},
		StructuredContent: map[string]any{"error": e},
	}
}
