// Package graph holds the GraphQL resolvers: each decodes its input, calls
// one use case of package app with the verified identity, and encodes the
// result. Generated code lives in graph/generated and graph/model.
package graph

//go:generate go run github.com/99designs/gqlgen generate

import "github.com/aetheriot/aether-audit/app"

// Resolver is the root resolver; it holds the use cases.
type Resolver struct {
	App *app.App
}
