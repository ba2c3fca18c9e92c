package openapi_test

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/server/openapi"
)

// TestDocumentIsValidOpenAPI31: the embedded document is OpenAPI 3.1, every
// reference resolves, and it validates against the 3.1 specification's
// schema.
func TestDocumentIsValidOpenAPI31(t *testing.T) {
	doc, err := libopenapi.NewDocument(openapi.Document)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(doc.GetSpecInfo().Version, "3.1."), "version %s", doc.GetSpecInfo().Version)
	model, err := doc.BuildV3Model()
	require.NoError(t, err, "building the model (unresolved references?)")
	require.NotNil(t, model)
	require.Empty(t, model.Index.GetReferenceIndexErrors(), "reference errors")

	v, errs := validator.NewValidator(doc)
	require.Empty(t, errs)
	ok, verrs := v.ValidateDocument()
	for _, e := range verrs {
		t.Errorf("%s: %s", e.Message, e.Reason)
		for _, f := range e.SchemaValidationErrors {
			t.Errorf("  at %s (%s): %s", f.FieldPath, f.KeywordLocation, f.Reason)
		}
	}
	require.True(t, ok)
}

// TestDocsCopyIsCurrent: docs/openapi.json is byte for byte the embedded
// document (`make docs` copies it).
func TestDocsCopyIsCurrent(t *testing.T) {
	docs, err := os.ReadFile("../../docs/openapi.json")
	require.NoError(t, err)
	require.True(t, bytes.Equal(openapi.Document, docs), "docs/openapi.json differs from server/openapi/openapi.json: run make docs")
}
