//go:build tools

// Package tools pins the code generators the build uses.
package tools

import _ "github.com/99designs/gqlgen"
