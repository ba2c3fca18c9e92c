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

// marshalEnum writes an enum value as a GraphQL string.
func marshalEnum(w io.Writer, v string) { _, _ = io.WriteString(w, strconv.Quote(v)) }

// unmarshalEnum reads an enum value and checks it with valid.
func unmarshalEnum(v any, typeName string, valid func(string) bool) (string, error) {
	s, _ := v.(string)
	if !valid(s) {
		return "", fmt.Errorf("%q is not a valid %s", s, typeName)
	}
	return s, nil
}

// MarshalGQL writes the enum value.
func (k DataExportKind) MarshalGQL(w io.Writer) { marshalEnum(w, string(k)) }

// UnmarshalGQL reads and validates an enum value.
func (k *DataExportKind) UnmarshalGQL(v any) error {
	s, err := unmarshalEnum(v, "DataExportKind", func(s string) bool { return DataExportKind(s).Valid() })
	*k = DataExportKind(s)
	return err
}

// MarshalGQL writes the enum value.
func (f DataExportFormat) MarshalGQL(w io.Writer) { marshalEnum(w, string(f)) }

// UnmarshalGQL reads and validates an enum value.
func (f *DataExportFormat) UnmarshalGQL(v any) error {
	s, err := unmarshalEnum(v, "DataExportFormat", func(s string) bool { return DataExportFormat(s).Valid() })
	*f = DataExportFormat(s)
	return err
}

// MarshalGQL writes the enum value.
func (c DataExportCompression) MarshalGQL(w io.Writer) { marshalEnum(w, string(c)) }

// UnmarshalGQL reads and validates an enum value.
func (c *DataExportCompression) UnmarshalGQL(v any) error {
	s, err := unmarshalEnum(v, "DataExportCompression", func(s string) bool { return DataExportCompression(s).Valid() })
	*c = DataExportCompression(s)
	return err
}

// MarshalGQL writes the enum value.
func (s DataExportState) MarshalGQL(w io.Writer) { marshalEnum(w, string(s)) }

// UnmarshalGQL reads and validates an enum value.
func (s *DataExportState) UnmarshalGQL(v any) error {
	str, err := unmarshalEnum(v, "DataExportState", func(s string) bool { return DataExportState(s).Valid() })
	*s = DataExportState(str)
	return err
}

// MarshalGQL writes the enum value.
func (s AlarmSeverity) MarshalGQL(w io.Writer) { marshalEnum(w, string(s)) }

// UnmarshalGQL reads and validates an enum value.
func (s *AlarmSeverity) UnmarshalGQL(v any) error {
	str, err := unmarshalEnum(v, "AlarmSeverity", func(s string) bool {
		switch AlarmSeverity(s) {
		case AlarmCritical, AlarmMajor, AlarmMinor, AlarmWarning, AlarmInfo:
			return true
		}
		return false
	})
	*s = AlarmSeverity(str)
	return err
}

// MarshalGQL writes the enum value.
func (s AlarmState) MarshalGQL(w io.Writer) { marshalEnum(w, string(s)) }

// UnmarshalGQL reads and validates an enum value.
func (s *AlarmState) UnmarshalGQL(v any) error {
	str, err := unmarshalEnum(v, "AlarmState", func(s string) bool {
		return AlarmState(s) == AlarmRaised || AlarmState(s) == AlarmAcknowledged || AlarmState(s) == AlarmCleared
	})
	*s = AlarmState(str)
	return err
}
