package graph

import (
	"context"
	"errors"
	"strings"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/aetheriot/aether-audit/app"
)

// PresentError gives every GraphQL error one code of the documented set in
// extensions.code: use-case errors (resolvers return them as *app.Error)
// keep theirs; parse, validation and input coercion errors are
// BAD_USER_INPUT.
func PresentError(ctx context.Context, err error) *gqlerror.Error {
	var gqlErr *gqlerror.Error
	if !errors.As(err, &gqlErr) {
		gqlErr = gqlerror.WrapPath(graphql.GetPath(ctx), err)
	}
	out := *gqlErr
	var appErr *app.Error
	switch {
	case errors.As(err, &appErr):
		out.Message = appErr.Error()
		out.Extensions = AppErrorExtensions(appErr)
	default:
		msg := out.Message
		if strings.HasPrefix(msg, "json request body could not be decoded") {
			msg = "request body is not valid GraphQL-over-HTTP JSON"
		}
		out.Message = msg
		out.Extensions = map[string]any{"code": app.CodeBadUserInput}
	}
	out.Err = nil
	return &out
}

// AppErrorExtensions returns the extensions of a GraphQL error for a use
// case's error: its code, the offending input field when known, and for
// RATE_LIMITED the whole seconds to wait (retryAfterSeconds).
func AppErrorExtensions(appErr *app.Error) map[string]any {
	ext := map[string]any{"code": appErr.Code}
	if appErr.Field != "" {
		ext["field"] = appErr.Field
	}
	if appErr.RetryAfter > 0 {
		ext["retryAfterSeconds"] = app.RetryAfterSeconds(appErr.RetryAfter)
	}
	return ext
}
