// Package openapi holds the OpenAPI 3.1 document of Aether Audit's REST and
// SSE endpoints (openapi.json), written by hand and embedded into the
// binary; package server serves it at GET /api/v1/openapi.json. The server's
// tests send real requests to every route it describes and validate each
// answer against it, and docs/openapi.json is a byte-equal copy (`make
// docs` writes it, a test of this package fails when it differs).
package openapi

import _ "embed"

// Document is the OpenAPI 3.1 document, as JSON. Callers must not modify it.
//
//go:embed openapi.json
var Document []byte
