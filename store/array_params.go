package store

import (
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
)

// Array parameters that pgx encodes without boxing their elements. pgx
// encodes a slice parameter through pgtype.ArrayGetter, whose Index returns
// each element as an interface value: for a []uuid.UUID, []string or
// []time.Time (pgx's FlatArray) that is one allocation per element, and
// for a uuid a second one in its wrapping encode plan. The types below
// return a pointer into their slice instead (no allocation), whose type
// implements pgx's valuer interface of the element's PostgreSQL type
// (pgtype.UUIDValuer, TextValuer, TimestamptzValuer), which the element
// codecs encode directly. The delivery statements send a few such arrays
// of up to a hundred elements per job (docs/benchmarks.md, "Go side of
// delivery").

// uuidParams is a uuid[] parameter.
type uuidParams []uuid.UUID

// uuidElem is an element of uuidParams.
type uuidElem uuid.UUID

// UUIDValue implements pgtype.UUIDValuer.
func (e *uuidElem) UUIDValue() (pgtype.UUID, error) { return pgtype.UUID{Bytes: *e, Valid: true}, nil }

// Dimensions implements pgtype.ArrayGetter.
func (a uuidParams) Dimensions() []pgtype.ArrayDimension { return dimensions(a == nil, len(a)) }

// Index implements pgtype.ArrayGetter.
func (a uuidParams) Index(i int) any { return (*uuidElem)(&a[i]) }

// IndexType implements pgtype.ArrayGetter.
func (a uuidParams) IndexType() any { return new(uuidElem) }

// textParams is a text[] parameter.
type textParams []string

// textElem is an element of textParams.
type textElem string

// TextValue implements pgtype.TextValuer.
func (e *textElem) TextValue() (pgtype.Text, error) {
	return pgtype.Text{String: string(*e), Valid: true}, nil
}

// Dimensions implements pgtype.ArrayGetter.
func (a textParams) Dimensions() []pgtype.ArrayDimension { return dimensions(a == nil, len(a)) }

// Index implements pgtype.ArrayGetter.
func (a textParams) Index(i int) any { return (*textElem)(&a[i]) }

// IndexType implements pgtype.ArrayGetter.
func (a textParams) IndexType() any { return new(textElem) }

// timeParams is a timestamptz[] parameter.
type timeParams []time.Time

// timeElem is an element of timeParams.
type timeElem time.Time

// TimestamptzValue implements pgtype.TimestamptzValuer.
func (e *timeElem) TimestamptzValue() (pgtype.Timestamptz, error) {
	return pgtype.Timestamptz{Time: time.Time(*e), Valid: true}, nil
}

// Dimensions implements pgtype.ArrayGetter.
func (a timeParams) Dimensions() []pgtype.ArrayDimension { return dimensions(a == nil, len(a)) }

// Index implements pgtype.ArrayGetter.
func (a timeParams) Index(i int) any { return (*timeElem)(&a[i]) }

// IndexType implements pgtype.ArrayGetter.
func (a timeParams) IndexType() any { return new(timeElem) }

// dimensions are those of a one-dimensional array of n elements, nil for
// a NULL array (a nil slice), as pgx's own slices encode.
func dimensions(null bool, n int) []pgtype.ArrayDimension {
	if null {
		return nil
	}
	return []pgtype.ArrayDimension{{Length: int32(n), LowerBound: 1}}
}

// nullIntParams is an int[] or bigint[] parameter whose elements may be
// NULL (Valid false).
type nullIntParams []pgtype.Int8

// nullIntElem is an element of nullIntParams.
type nullIntElem pgtype.Int8

// Int64Value implements pgtype.Int64Valuer.
func (e *nullIntElem) Int64Value() (pgtype.Int8, error) { return pgtype.Int8(*e), nil }

// Dimensions implements pgtype.ArrayGetter.
func (a nullIntParams) Dimensions() []pgtype.ArrayDimension { return dimensions(a == nil, len(a)) }

// Index implements pgtype.ArrayGetter.
func (a nullIntParams) Index(i int) any { return (*nullIntElem)(&a[i]) }

// IndexType implements pgtype.ArrayGetter.
func (a nullIntParams) IndexType() any { return new(nullIntElem) }
