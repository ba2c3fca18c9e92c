package export

import (
	"fmt"
	"strings"

	"github.com/aetheriot/aether-audit/domain"
)

// The Content-Type of each kind of stored object.
const (
	contentTypeNDJSON = "application/x-ndjson"
	contentTypeCSV    = "text/csv; charset=utf-8"
	contentTypeGzip   = "application/gzip"
)

// contentType returns the Content-Type an object of format and compression
// is stored with. A gzipped object is the gzip file itself, not a
// Content-Encoding of the inner format.
func contentType(format domain.DataExportFormat, compression domain.DataExportCompression) string {
	if compression == domain.DataExportGzip {
		return contentTypeGzip
	}
	if format == domain.DataExportCSV {
		return contentTypeCSV
	}
	return contentTypeNDJSON
}

// extension returns the file name extension of an object of format and
// compression, without the leading dot: "ndjson", "csv", "ndjson.gz" or
// "csv.gz". An undefined format yields its lower-cased name.
func extension(format domain.DataExportFormat, compression domain.DataExportCompression) string {
	ext := strings.ToLower(string(format))
	if compression == domain.DataExportGzip {
		ext += ".gz"
	}
	return ext
}

// validateShape reports an error unless kind, format and compression are
// all defined values.
func validateShape(kind domain.DataExportKind, format domain.DataExportFormat, compression domain.DataExportCompression) error {
	switch {
	case !kind.Valid():
		return fmt.Errorf("export: undefined kind %q", kind)
	case !format.Valid():
		return fmt.Errorf("export: undefined format %q", format)
	case !compression.Valid():
		return fmt.Errorf("export: undefined compression %q", compression)
	}
	return nil
}
