package domain

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
)

// Field limits of an audit event. Inputs past them are rejected, never cut.
const (
	MaxIDLength             = 256   // subject.id, resource.id, governance.confirmedBy
	MaxNameLength           = 256   // subject.displayName
	MaxResourceTypeLength   = 64    // resource.type
	MaxReasonLength         = 1024  // governance.reason
	MaxShortTextLength      = 128   // governance.ticket, correlation ids, digest labels
	MaxEvidenceDigests      = 16    // entries of evidenceDigests
	MaxDigestAlgorithmBytes = 32    // evidenceDigests[].algorithm
	MaxDigestValueBytes     = 256   // evidenceDigests[].value
	MaxDetailsBytes         = 16384 // canonical JSON of details
	MaxDetailsDepth         = 16    // nesting of objects and arrays in details
	// MaxOccurredAtSkew is how far in the future occurredAt may lie, for
	// clock skew between the emitter and us.
	MaxOccurredAtSkew = 24 * time.Hour
)

var (
	minOccurredAt = time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)
)

// AuditEventDraft is an audit event as a client submits it, before the server
// assigns its sequence, recording time and chain hash.
type AuditEventDraft struct {
	// ID is the client's id for idempotent ingest; uuid.Nil means the server
	// generates one (and the event cannot be deduplicated).
	ID              uuid.UUID
	ProjectID       string
	Action          string
	OccurredAt      time.Time
	Subject         Subject
	Resource        Resource
	Outcome         Outcome
	Governance      *Governance
	Correlation     *Correlation
	EvidenceDigests []EvidenceDigest
	// Details is any JSON object (nil means {}); Normalize makes it canonical.
	Details json.RawMessage
	// RecordedBy is who records the event, taken from the verified token by
	// the application, never from the client's input. It is not part of
	// the Fingerprint: a producer that retries with a refreshed token
	// resends the same event.
	RecordedBy *Recorder
}

// Normalize validates every field against the documented limits and brings
// the draft to its canonical form: occurredAt in UTC at microsecond precision,
// details as canonical JSON, governance risk defaulted to LOW. The first
// broken rule is returned as a *ValidationError whose Field is prefixed with
// path (e.g. "events[3]").
func (d *AuditEventDraft) Normalize(path string, now time.Time) error {
	f := func(name string) string {
		if path == "" {
			return name
		}
		return path + "." + name
	}
	if err := checkText(f("projectId"), d.ProjectID, MaxShortTextLength, true, true); err != nil {
		return err
	}
	if err := ValidateAction(f("action"), d.Action); err != nil {
		return err
	}
	if d.OccurredAt.IsZero() {
		return invalid(f("occurredAt"), "is required")
	}
	d.OccurredAt = d.OccurredAt.UTC().Truncate(time.Microsecond)
	if d.OccurredAt.Before(minOccurredAt) {
		return invalid(f("occurredAt"), "must not be before 1970-01-01")
	}
	if d.OccurredAt.After(now.Add(MaxOccurredAtSkew)) {
		return invalid(f("occurredAt"), "must not be more than 24h in the future")
	}
	if !d.Subject.Type.Valid() {
		return invalid(f("subject.type"), "must be USER, SERVICE or SYSTEM")
	}
	if err := checkText(f("subject.id"), d.Subject.ID, MaxIDLength, true, true); err != nil {
		return err
	}
	if err := checkText(f("subject.displayName"), d.Subject.DisplayName, MaxNameLength, false, false); err != nil {
		return err
	}
	if d.Resource.Type == "" || len(d.Resource.Type) > MaxResourceTypeLength || !isResourceType(d.Resource.Type) {
		return invalid(f("resource.type"), "must be 1-%d characters of letters, digits, _ . : - starting with a letter", MaxResourceTypeLength)
	}
	if err := checkText(f("resource.id"), d.Resource.ID, MaxIDLength, true, true); err != nil {
		return err
	}
	if !d.Outcome.Valid() {
		return invalid(f("outcome"), "must be SUCCESS, FAILURE, DENIED or ERROR")
	}
	if g := d.Governance; g != nil {
		if g.Risk == "" {
			g.Risk = RiskLow
		}
		if !g.Risk.Valid() {
			return invalid(f("governance.risk"), "must be LOW, MEDIUM or HIGH")
		}
		if err := checkText(f("governance.reason"), g.Reason, MaxReasonLength, false, false); err != nil {
			return err
		}
		if err := checkText(f("governance.ticket"), g.Ticket, MaxShortTextLength, false, true); err != nil {
			return err
		}
		if err := checkText(f("governance.confirmedBy"), g.ConfirmedBy, MaxIDLength, false, true); err != nil {
			return err
		}
	}
	if c := d.Correlation; c != nil {
		if c.TraceID != "" && !isTraceID(c.TraceID) {
			return invalid(f("correlation.traceId"), "must be a W3C trace id: 32 lower-case hex digits")
		}
		if err := checkText(f("correlation.requestId"), c.RequestID, MaxShortTextLength, false, true); err != nil {
			return err
		}
		if err := checkText(f("correlation.causationId"), c.CausationID, MaxShortTextLength, false, true); err != nil {
			return err
		}
		if *c == (Correlation{}) {
			d.Correlation = nil
		}
	}
	if len(d.EvidenceDigests) > MaxEvidenceDigests {
		return invalid(f("evidenceDigests"), "must have at most %d entries", MaxEvidenceDigests)
	}
	for i := range d.EvidenceDigests {
		e := &d.EvidenceDigests[i]
		p := f("evidenceDigests") + "[" + strconv.Itoa(i) + "]"
		if e.Algorithm == "" || len(e.Algorithm) > MaxDigestAlgorithmBytes || !isDigestAlgorithm(e.Algorithm) {
			return invalid(p+".algorithm", "must be a lower-case algorithm name such as sha256")
		}
		if err := checkText(p+".value", e.Value, MaxDigestValueBytes, true, true); err != nil {
			return err
		}
		if err := checkText(p+".label", e.Label, MaxShortTextLength, false, false); err != nil {
			return err
		}
	}
	details, err := CanonicalJSON(d.Details)
	if err != nil {
		return invalid(f("details"), "%s", err.Error())
	}
	d.Details = details
	return nil
}

// Fingerprint is the SHA-256 of the normalized draft's canonical encoding. Two
// submissions with the same id are the same event exactly when their
// fingerprints are equal; otherwise the second fails closed.
func (d *AuditEventDraft) Fingerprint() Hash {
	c := canonicalEvent{
		Action:          d.Action,
		Correlation:     d.Correlation,
		Details:         d.Details,
		EvidenceDigests: d.EvidenceDigests,
		Governance:      d.Governance,
		ID:              d.ID.String(),
		OccurredAt:      formatTime(d.OccurredAt),
		Outcome:         d.Outcome,
		ProjectID:       d.ProjectID,
		Resource:        d.Resource,
		Subject:         d.Subject,
		// Fingerprints stay on the first encoding, so that events stored
		// before version 2 still match their resubmissions.
		Version: ChainVersionOriginal,
	}
	return sha256.Sum256(c.encode())
}

// checkText checks a free-text or identifier field: valid UTF-8, no control
// characters, at most max bytes; identifiers (ident) also may not have
// leading or trailing white space.
func checkText(field, s string, max int, required, ident bool) error {
	if s == "" {
		if required {
			return invalid(field, "is required")
		}
		return nil
	}
	if len(s) > max {
		return invalid(field, "must be at most %d bytes", max)
	}
	if !utf8.ValidString(s) {
		return invalid(field, "must be valid UTF-8")
	}
	for _, r := range s {
		if unicode.IsControl(r) && (ident || (r != '\n' && r != '\t')) {
			return invalid(field, "must not contain control characters")
		}
	}
	if ident && strings.TrimSpace(s) != s {
		return invalid(field, "must not start or end with white space")
	}
	return nil
}

// CanonicalJSON returns the canonical encoding of a JSON object: object keys
// sorted by their UTF-8 bytes, no insignificant white space, numbers exactly
// as written, strings escaped as Go's encoding/json does without HTML
// escaping. nil or empty input is the empty object. It rejects anything but
// an object, input nested deeper than MaxDetailsDepth and results larger than
// MaxDetailsBytes. CanonicalJSON is idempotent.
func CanonicalJSON(raw json.RawMessage) (json.RawMessage, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return json.RawMessage("{}"), nil
	}
	if len(raw) > 4*MaxDetailsBytes {
		return nil, errString("must be at most " + strconv.Itoa(MaxDetailsBytes) + " bytes")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, errString("must be valid JSON")
	}
	if dec.More() {
		return nil, errString("must be a single JSON object")
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, errString("must be a JSON object")
	}
	if depth(v) > MaxDetailsDepth {
		return nil, errString("must not nest deeper than " + strconv.Itoa(MaxDetailsDepth) + " levels")
	}
	out, err := marshalCanonical(v)
	if err != nil {
		return nil, errString("must be valid JSON")
	}
	if len(out) > MaxDetailsBytes {
		return nil, errString("must be at most " + strconv.Itoa(MaxDetailsBytes) + " bytes")
	}
	return out, nil
}

func depth(v any) int {
	switch t := v.(type) {
	case map[string]any:
		m := 0
		for _, c := range t {
			m = max(m, depth(c))
		}
		return m + 1
	case []any:
		m := 0
		for _, c := range t {
			m = max(m, depth(c))
		}
		return m + 1
	default:
		return 0
	}
}

func marshalCanonical(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

type errString string

func (e errString) Error() string { return string(e) }

// ValidateText checks a text field against the rules of audit event fields:
// at most max bytes, valid UTF-8, no control characters (an identifier
// allows none and no surrounding white space; other text allows newlines
// and tabs), and present when required. PostgreSQL refuses some of what it
// rules out (NUL), so every stored text goes through it.
func ValidateText(field, s string, max int, required, ident bool) error {
	return checkText(field, s, max, required, ident)
}
