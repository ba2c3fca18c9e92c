// Package graph holds the GraphQL resolvers: each decodes its input, calls
// one use case of package app with the verified identity, and encodes the
// result. Generated code lives in graph/generated and graph/model.
package graph

//go:generate go run github.com/99designs/gqlgen generate

import (
	"context"
	"log/slog"

	"github.com/99designs/gqlgen/graphql"

	"github.com/aetheriot/aether-audit/app"
)

// Resolver is the root resolver; it holds the use cases.
type Resolver struct {
	App    *app.App
	Logger *slog.Logger
}

// fail turns a resolver's error into an *app.Error, so that the error
// presenter can tell the use cases' answers from errors of input coercion.
// Internal causes are logged here and never shown.
func (r *Resolver) fail(ctx context.Context, err error) error {
	appErr := app.ErrorOf(err)
	if appErr.Code == app.CodeInternal && r.Logger != nil {
		field := ""
		if fc := graphql.GetFieldContext(ctx); fc != nil {
			field = fc.Field.Name
		}
		r.Logger.ErrorContext(ctx, "graphql resolver failed", "field", field, "err", err)
	}
	return appErr
}

// nullIfNotFound answers a lookup by id: the value, null for NOT_FOUND (a
// missing record and another tenant's look the same), or the error.
func nullIfNotFound[T any](r *Resolver, ctx context.Context, v *T, err error) (*T, error) {
	if err == nil {
		return v, nil
	}
	if app.ErrorOf(err).Code == app.CodeNotFound {
		return nil, nil
	}
	return nil, r.fail(ctx, err)
}
