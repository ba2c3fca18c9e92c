package domain

import (
	"encoding/hex"
	"fmt"
	"io"
	"strconv"
)

// The enums and Hash implement gqlgen's Marshaler and Unmarshaler (plain io, no
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

// MarshalGQL writes the hash as a lower-case hex string.
func (h Hash) MarshalGQL(w io.Writer) { _, _ = io.WriteString(w, `"`+h.String()+`"`) }

// UnmarshalGQL reads a hash from its hex string.
func (h *Hash) UnmarshalGQL(v any) error {
	s, _ := v.(string)
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(h) {
		return fmt.Errorf("a hash must be %d hex digits", 2*len(h))
	}
	copy(h[:], b)
	return nil
}

// MarshalGQL writes the enum value.
func (s WebhookSubscriptionState) MarshalGQL(w io.Writer) {
	_, _ = io.WriteString(w, strconv.Quote(string(s)))
}

// UnmarshalGQL reads and validates an enum value.
func (s *WebhookSubscriptionState) UnmarshalGQL(v any) error {
	str, _ := v.(string)
	if str != string(WebhookSubscriptionActive) && str != string(WebhookSubscriptionDisabled) {
		return fmt.Errorf("%q is not a valid WebhookSubscriptionState", str)
	}
	*s = WebhookSubscriptionState(str)
	return nil
}

// MarshalGQL writes the enum value.
func (s WebhookDeliveryState) MarshalGQL(w io.Writer) {
	_, _ = io.WriteString(w, strconv.Quote(string(s)))
}

// UnmarshalGQL reads and validates an enum value.
func (s *WebhookDeliveryState) UnmarshalGQL(v any) error {
	str, _ := v.(string)
	if !WebhookDeliveryState(str).Valid() {
		return fmt.Errorf("%q is not a valid WebhookDeliveryState", str)
	}
	*s = WebhookDeliveryState(str)
	return nil
}

// MarshalGQL writes the enum value.
func (o WebhookAttemptOutcome) MarshalGQL(w io.Writer) {
	_, _ = io.WriteString(w, strconv.Quote(string(o)))
}

// UnmarshalGQL reads and validates an enum value.
func (o *WebhookAttemptOutcome) UnmarshalGQL(v any) error {
	str, _ := v.(string)
	switch WebhookAttemptOutcome(str) {
	case WebhookAttemptDelivering, WebhookAttemptSucceeded, WebhookAttemptFailed, WebhookAttemptUnknown:
		*o = WebhookAttemptOutcome(str)
		return nil
	}
	return fmt.Errorf("%q is not a valid WebhookAttemptOutcome", str)
}
