package domain

import (
	"fmt"
	"io"
	"strconv"
)

// The enums implement gqlgen's Marshaler and Unmarshaler (plain io, no
// import of gqlgen) so GraphQL binds them directly.

// MarshalGQL writes the enum value.
func (t SubjectType) MarshalGQL(w io.Writer) { _, _ = io.WriteString(w, strconv.Quote(string(t))) }

// UnmarshalGQL reads and validates an enum value.
func (t *SubjectType) UnmarshalGQL(v any) error {
	s, _ := v.(string)
	if !SubjectType(s).Valid() {
		return fmt.Errorf("%q is not a valid AuditSubjectType", s)
	}
	*t = SubjectType(s)
	return nil
}

// MarshalGQL writes the enum value.
func (o Outcome) MarshalGQL(w io.Writer) { _, _ = io.WriteString(w, strconv.Quote(string(o))) }

// UnmarshalGQL reads and validates an enum value.
func (o *Outcome) UnmarshalGQL(v any) error {
	s, _ := v.(string)
	if !Outcome(s).Valid() {
		return fmt.Errorf("%q is not a valid AuditOutcome", s)
	}
	*o = Outcome(s)
	return nil
}

// MarshalGQL writes the enum value.
func (r Risk) MarshalGQL(w io.Writer) { _, _ = io.WriteString(w, strconv.Quote(string(r))) }

// UnmarshalGQL reads and validates an enum value.
func (r *Risk) UnmarshalGQL(v any) error {
	s, _ := v.(string)
	if !Risk(s).Valid() {
		return fmt.Errorf("%q is not a valid AuditRisk", s)
	}
	*r = Risk(s)
	return nil
}
