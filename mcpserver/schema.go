package mcpserver

import (
	"fmt"
	"reflect"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
)

// schemaOptions infer the input schemas: sequences are decimal strings (or
// integers), times RFC 3339 strings.
var schemaOptions = &jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
	reflect.TypeFor[Sequence](): {
		Types:       []string{"string", "integer"},
		Pattern:     `^[0-9]{1,20}$`,
		Minimum:     jsonschema.Ptr(0.0),
		Description: "a sequence: a decimal string (or integer)",
	},
	reflect.TypeFor[time.Time](): {Type: "string", Format: "date-time"},
}}

// The enumerations of the inputs, as in the GraphQL schema.
var (
	outcomeValues       = []any{"SUCCESS", "FAILURE", "DENIED", "ERROR"}
	orderValues         = []any{orderOldestFirst, orderNewestFirst}
	deliveryStateValues = []any{"PENDING", "DELIVERING", "DELIVERED", "RETRYING", "DEAD_LETTERED"}
	exportStateValues   = []any{"QUEUED", "RUNNING", "READY", "FAILED", "EXPIRED"}
	exportKindValues    = []any{"AUDIT", "ALARM", "TELEMETRY"}
	exportFormatValues  = []any{"NDJSON", "CSV"}
	compressionValues   = []any{"NONE", "GZIP"}
)

// The orders of search_audit_events.
const (
	orderOldestFirst = "OLDEST_FIRST"
	orderNewestFirst = "NEWEST_FIRST"
)

// Page sizes of the list tools: smaller than the API's, so that a page fits
// a model's context.
const (
	defaultToolPageSize = 20
	maxToolPageSize     = 100
)

// inputSchema infers T's schema and applies edits to its properties.
func inputSchema[T any](edits ...func(*jsonschema.Schema)) *jsonschema.Schema {
	s, err := jsonschema.For[T](schemaOptions)
	if err != nil {
		panic(fmt.Sprintf("mcpserver: schema of %T: %v", *new(T), err))
	}
	for _, edit := range edits {
		edit(s)
	}
	return s
}

// property returns the schema of the property at path (items of an array
// are reached through the array's name).
func property(s *jsonschema.Schema, path ...string) *jsonschema.Schema {
	for _, name := range path {
		if s.Items != nil && s.Properties == nil {
			s = s.Items
		}
		p, ok := s.Properties[name]
		if !ok {
			panic("mcpserver: no property " + name)
		}
		s = p
	}
	if s.Items != nil {
		return s.Items
	}
	return s
}

// enum restricts the property at path to values.
func enum(values []any, path ...string) func(*jsonschema.Schema) {
	return func(s *jsonschema.Schema) { property(s, path...).Enum = values }
}

// pageSize bounds the property at path as a page size.
func pageSize(path ...string) func(*jsonschema.Schema) {
	return func(s *jsonschema.Schema) {
		p := property(s, path...)
		p.Minimum = jsonschema.Ptr(1.0)
		p.Maximum = jsonschema.Ptr(float64(maxToolPageSize))
	}
}

// filterEnums are the edits of a property holding an AuditEventFilter.
func filterEnums(name string) func(*jsonschema.Schema) {
	return enum(outcomeValues, name, "outcome")
}

// page reads the page size of a list tool: the default when absent, else
// 1 to maxToolPageSize.
func page(first *int) (*int, error) {
	if first == nil {
		n := defaultToolPageSize
		return &n, nil
	}
	if *first < 1 || *first > maxToolPageSize {
		return nil, badInput("first", "must be between 1 and %d", maxToolPageSize)
	}
	return first, nil
}
