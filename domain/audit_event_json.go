package domain

import (
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
)

// AppendJSON appends the event's JSON encoding, byte for byte what
// encoding/json's Marshal produces for it (the public API shape), without
// reflection. If Marshal would fail for the event (details that are not
// valid JSON, a time outside years 0-9999), it appends nothing and returns b
// unchanged; AppendJSONChecked reports that error.
func (e *AuditEvent) AppendJSON(b []byte) []byte {
	out, err := e.AppendJSONChecked(b)
	if err != nil {
		return b
	}
	return out
}

// AppendJSONChecked is AppendJSON that returns the error json.Marshal would
// return for the event instead of appending nothing silently. On error it
// returns b unchanged.
func (e *AuditEvent) AppendJSONChecked(b []byte) ([]byte, error) {
	start := len(b)
	if !jsonTimeOK(e.OccurredAt) || !jsonTimeOK(e.RecordedAt) {
		return appendMarshal(b, e) // an error, in all likelihood
	}
	b = append(b, `{"id":`...)
	b = appendJSONUUID(b, e.ID)
	b = append(b, `,"tenantId":`...)
	b = appendMarshalString(b, e.TenantID)
	b = append(b, `,"projectId":`...)
	b = appendMarshalString(b, e.ProjectID)
	b = append(b, `,"sequence":"`...)
	b = strconv.AppendUint(b, e.Sequence, 10)
	b = append(b, `","action":`...)
	b = appendMarshalString(b, e.Action)
	b = append(b, `,"occurredAt":"`...)
	b = e.OccurredAt.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","recordedAt":"`...)
	b = e.RecordedAt.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","subject":{"type":`...)
	b = appendMarshalString(b, string(e.Subject.Type))
	b = append(b, `,"id":`...)
	b = appendMarshalString(b, e.Subject.ID)
	b = append(b, `,"displayName":`...)
	b = appendMarshalString(b, e.Subject.DisplayName)
	b = append(b, `},"resource":{"type":`...)
	b = appendMarshalString(b, e.Resource.Type)
	b = append(b, `,"id":`...)
	b = appendMarshalString(b, e.Resource.ID)
	b = append(b, `},"outcome":`...)
	b = appendMarshalString(b, string(e.Outcome))
	b = append(b, `,"governance":`...)
	if g := e.Governance; g == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, `{"reason":`...)
		b = appendMarshalString(b, g.Reason)
		b = append(b, `,"ticket":`...)
		b = appendMarshalString(b, g.Ticket)
		b = append(b, `,"risk":`...)
		b = appendMarshalString(b, string(g.Risk))
		b = append(b, `,"confirmedBy":`...)
		b = appendMarshalString(b, g.ConfirmedBy)
		b = append(b, '}')
	}
	b = append(b, `,"correlation":`...)
	if c := e.Correlation; c == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, `{"traceId":`...)
		b = appendMarshalString(b, c.TraceID)
		b = append(b, `,"requestId":`...)
		b = appendMarshalString(b, c.RequestID)
		b = append(b, `,"causationId":`...)
		b = appendMarshalString(b, c.CausationID)
		b = append(b, '}')
	}
	b = append(b, `,"evidenceDigests":`...)
	if e.EvidenceDigests == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range e.EvidenceDigests {
			d := &e.EvidenceDigests[i]
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"algorithm":`...)
			b = appendMarshalString(b, d.Algorithm)
			b = append(b, `,"value":`...)
			b = appendMarshalString(b, d.Value)
			b = append(b, `,"label":`...)
			b = appendMarshalString(b, d.Label)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = append(b, `,"details":`...)
	switch {
	case e.Details == nil:
		b = append(b, "null"...)
	case rawJSONVerbatim(e.Details):
		b = append(b, e.Details...)
	default:
		// White space to drop, characters to escape, deep nesting or
		// invalid JSON: let encoding/json decide.
		enc, err := json.Marshal(e.Details)
		if err != nil {
			return appendMarshal(b[:start], e) // the whole event's error
		}
		b = append(b, enc...)
	}
	b = append(b, `,"chainHash":"`...)
	b = appendHex(b, e.ChainHash[:])
	b = append(b, `"}`...)
	return b, nil
}

// AppendWebhookPayloadJSON appends the body of a webhook of the event,
// {"type": its action, "timestamp": its RecordedAt, "data": the event},
// byte for byte what encoding/json's Marshal produces for that shape (the
// app's WebhookPayload), without reflection. If Marshal would fail for the
// event, it returns b unchanged and an error.
func (e *AuditEvent) AppendWebhookPayloadJSON(b []byte) ([]byte, error) {
	start := len(b)
	b = append(b, `{"type":`...)
	b = appendMarshalString(b, e.Action)
	b = append(b, `,"timestamp":"`...)
	b = e.RecordedAt.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","data":`...)
	b, err := e.AppendJSONChecked(b)
	if err != nil {
		return b[:start], err
	}
	return append(b, '}'), nil
}

// appendMarshal is the slow path for events the fast path finds
// unencodable: it appends json.Marshal's encoding of e or returns its error.
func appendMarshal(b []byte, e *AuditEvent) ([]byte, error) {
	enc, err := json.Marshal(e)
	if err != nil {
		return b, err
	}
	return append(b, enc...), nil
}

// jsonTimeOK reports whether time.Time.MarshalJSON accepts t: a four-digit
// year and a zone offset below 24 hours.
func jsonTimeOK(t time.Time) bool {
	if y := t.Year(); y < 0 || y > 9999 {
		return false
	}
	_, off := t.Zone()
	return off > -24*3600 && off < 24*3600
}

const hexDigits = "0123456789abcdef"

func appendHex(b []byte, src []byte) []byte {
	for _, c := range src {
		b = append(b, hexDigits[c>>4], hexDigits[c&0x0f])
	}
	return b
}

// appendJSONUUID appends u as its MarshalText form, a quoted 36-character
// lower-case hex string.
func appendJSONUUID(b []byte, u uuid.UUID) []byte {
	b = append(b, '"')
	b = appendHex(b, u[0:4])
	b = append(b, '-')
	b = appendHex(b, u[4:6])
	b = append(b, '-')
	b = appendHex(b, u[6:8])
	b = append(b, '-')
	b = appendHex(b, u[8:10])
	b = append(b, '-')
	b = appendHex(b, u[10:16])
	return append(b, '"')
}

// marshalSafe[c] is true for the ASCII bytes encoding/json's Marshal copies
// into a string unchanged (it escapes control characters, '"', '\\' and,
// for HTML safety, '<', '>' and '&').
var marshalSafe = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// appendMarshalString appends s as a JSON string escaped exactly as
// encoding/json's Marshal does: HTML characters and U+2028/U+2029 as \u
// escapes, invalid UTF-8 as \ufffd, \b \f \n \r \t short escapes, other
// control characters as \u00xx. (appendJSONString in chain.go is the
// canonical, non-HTML-escaping form and is not interchangeable.)
func appendMarshalString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if marshalSafe[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0x0f])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0x0f])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// maxVerbatimDepth bounds the nesting rawJSONVerbatim follows; deeper
// details take the encoding/json path.
const maxVerbatimDepth = 200

// rawJSONVerbatim reports whether encoding/json's Marshal would copy raw
// unchanged: it is one valid JSON value with no white space outside strings,
// no '<', '>' or '&' and no U+2028/U+2029. It may answer false for values
// Marshal copies unchanged (deep nesting); it never answers true for one
// Marshal rejects or rewrites.
func rawJSONVerbatim(raw []byte) bool {
	v := verbatimScanner{raw: raw}
	return v.value(0) && v.i == len(raw)
}

type verbatimScanner struct {
	raw []byte
	i   int
}

func (v *verbatimScanner) value(depth int) bool {
	if v.i >= len(v.raw) {
		return false
	}
	switch c := v.raw[v.i]; {
	case c == '{':
		if depth >= maxVerbatimDepth {
			return false
		}
		v.i++
		if v.i < len(v.raw) && v.raw[v.i] == '}' {
			v.i++
			return true
		}
		for {
			if v.i >= len(v.raw) || v.raw[v.i] != '"' || !v.str() {
				return false
			}
			if v.i >= len(v.raw) || v.raw[v.i] != ':' {
				return false
			}
			v.i++
			if !v.value(depth + 1) {
				return false
			}
			if v.i >= len(v.raw) {
				return false
			}
			switch v.raw[v.i] {
			case ',':
				v.i++
			case '}':
				v.i++
				return true
			default:
				return false
			}
		}
	case c == '[':
		if depth >= maxVerbatimDepth {
			return false
		}
		v.i++
		if v.i < len(v.raw) && v.raw[v.i] == ']' {
			v.i++
			return true
		}
		for {
			if !v.value(depth + 1) {
				return false
			}
			if v.i >= len(v.raw) {
				return false
			}
			switch v.raw[v.i] {
			case ',':
				v.i++
			case ']':
				v.i++
				return true
			default:
				return false
			}
		}
	case c == '"':
		return v.str()
	case c == '-' || ('0' <= c && c <= '9'):
		return v.number()
	case c == 't':
		return v.literal("true")
	case c == 'f':
		return v.literal("false")
	case c == 'n':
		return v.literal("null")
	}
	return false
}

func (v *verbatimScanner) literal(lit string) bool {
	if len(v.raw)-v.i < len(lit) || string(v.raw[v.i:v.i+len(lit)]) != lit {
		return false
	}
	v.i += len(lit)
	return true
}

// str scans a string starting at its opening quote.
func (v *verbatimScanner) str() bool {
	raw := v.raw
	i := v.i + 1
	for i < len(raw) {
		c := raw[i]
		switch {
		case c == '"':
			v.i = i + 1
			return true
		case c < 0x20 || c == '<' || c == '>' || c == '&':
			return false
		case c == '\\':
			if i+1 >= len(raw) {
				return false
			}
			switch raw[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(raw) {
					return false
				}
				for _, h := range raw[i+2 : i+6] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return false
					}
				}
				i += 6
			default:
				return false
			}
		case c == 0xE2:
			// U+2028 and U+2029 are E2 80 A8 and E2 80 A9.
			if i+2 < len(raw) && raw[i+1] == 0x80 && (raw[i+2] == 0xA8 || raw[i+2] == 0xA9) {
				return false
			}
			i++
		default:
			i++
		}
	}
	return false
}

func (v *verbatimScanner) number() bool {
	raw := v.raw
	i := v.i
	if raw[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(raw) && '0' <= raw[i] && raw[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if i >= len(raw) {
		return false
	}
	if raw[i] == '0' {
		i++
	} else if digits() == 0 {
		return false
	}
	if i < len(raw) && raw[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(raw) && (raw[i] == 'e' || raw[i] == 'E') {
		i++
		if i < len(raw) && (raw[i] == '+' || raw[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	v.i = i
	return true
}
