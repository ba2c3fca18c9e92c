package domain

import (
	"crypto/sha256"
	"encoding/json"
	"strconv"
	"time"

	"github.com/google/uuid"
)

// ChainVersion identifies the canonical encoding of newly recorded events.
// It is part of every encoded event so that two encodings can never
// collide: version 1 has no recordedBy; version 2 adds it after recordedAt.
// Events keep the version they were sealed with, so a chain crosses the
// boundary and v1 events verify exactly as before.
const ChainVersion = ChainVersionRecordedBy

// The canonical encoding versions.
const (
	// ChainVersionOriginal is the first encoding, without recordedBy.
	ChainVersionOriginal = 1
	// ChainVersionRecordedBy adds recordedBy, who recorded the event.
	ChainVersionRecordedBy = 2
)

// canonicalEvent fixes the canonical encoding of an audit event: a JSON object
// whose keys appear in this (lexicographic) order, with no white space and no
// HTML escaping. Absent optional objects are null; text fields absent are "".
// Times are RFC 3339 in UTC with exactly six fractional digits; the sequence
// is a decimal string; details are already canonical (CanonicalJSON).
type canonicalEvent struct {
	Action          string           `json:"action"`
	Correlation     *Correlation     `json:"correlation"`
	Details         json.RawMessage  `json:"details"`
	EvidenceDigests []EvidenceDigest `json:"evidenceDigests"`
	Governance      *Governance      `json:"governance"`
	ID              string           `json:"id"`
	OccurredAt      string           `json:"occurredAt"`
	Outcome         Outcome          `json:"outcome"`
	ProjectID       string           `json:"projectId"`
	RecordedAt      string           `json:"recordedAt,omitempty"`
	RecordedBy      *Recorder        `json:"recordedBy,omitempty"`
	Resource        Resource         `json:"resource"`
	Sequence        string           `json:"sequence,omitempty"`
	Subject         Subject          `json:"subject"`
	TenantID        string           `json:"tenantId,omitempty"`
	Version         int              `json:"v"`

	// occurred and recorded, when times is set, are written in place of
	// OccurredAt and RecordedAt (and id, seq of ID, Sequence), formatted straight into the output: what
	// the chain does once per event, without a string per time.
	// id and seq likewise replace ID and Sequence.
	occurred, recorded time.Time
	id                 uuid.UUID
	seq                uint64
	times              bool
}

// encode returns the canonical encoding of c: exactly what encoding/json
// produces for the struct above with HTML escaping off and no trailing
// newline (the tests hold the two equal), written without reflection.
func (c *canonicalEvent) encode() []byte {
	return c.appendTo(make([]byte, 0, 640+len(c.Details)))
}

// appendTo appends the encoding to b.
func (c *canonicalEvent) appendTo(b []byte) []byte {
	b = append(b, `{"action":`...)
	b = appendJSONString(b, c.Action)
	b = append(b, `,"correlation":`...)
	if c.Correlation == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, `{"traceId":`...)
		b = appendJSONString(b, c.Correlation.TraceID)
		b = append(b, `,"requestId":`...)
		b = appendJSONString(b, c.Correlation.RequestID)
		b = append(b, `,"causationId":`...)
		b = appendJSONString(b, c.Correlation.CausationID)
		b = append(b, '}')
	}
	b = append(b, `,"details":`...)
	if len(c.Details) == 0 {
		b = append(b, "{}"...)
	} else {
		b = append(b, c.Details...)
	}
	b = append(b, `,"evidenceDigests":[`...)
	for i, d := range c.EvidenceDigests {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"algorithm":`...)
		b = appendJSONString(b, d.Algorithm)
		b = append(b, `,"value":`...)
		b = appendJSONString(b, d.Value)
		b = append(b, `,"label":`...)
		b = appendJSONString(b, d.Label)
		b = append(b, '}')
	}
	b = append(b, `],"governance":`...)
	if c.Governance == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, `{"reason":`...)
		b = appendJSONString(b, c.Governance.Reason)
		b = append(b, `,"ticket":`...)
		b = appendJSONString(b, c.Governance.Ticket)
		b = append(b, `,"risk":`...)
		b = appendJSONString(b, string(c.Governance.Risk))
		b = append(b, `,"confirmedBy":`...)
		b = appendJSONString(b, c.Governance.ConfirmedBy)
		b = append(b, '}')
	}
	b = append(b, `,"id":`...)
	if c.times {
		b = appendUUID(b, c.id)
	} else {
		b = appendJSONString(b, c.ID)
	}
	b = append(b, `,"occurredAt":`...)
	if c.times {
		b = appendTime(b, c.occurred)
	} else {
		b = appendJSONString(b, c.OccurredAt)
	}
	b = append(b, `,"outcome":`...)
	b = appendJSONString(b, string(c.Outcome))
	b = append(b, `,"projectId":`...)
	b = appendJSONString(b, c.ProjectID)
	if c.times {
		b = append(b, `,"recordedAt":`...)
		b = appendTime(b, c.recorded)
	} else if c.RecordedAt != "" {
		b = append(b, `,"recordedAt":`...)
		b = appendJSONString(b, c.RecordedAt)
	}
	if r := c.RecordedBy; r != nil {
		b = append(b, `,"recordedBy":{"issuer":`...)
		b = appendJSONString(b, r.Issuer)
		b = append(b, `,"subject":`...)
		b = appendJSONString(b, r.Subject)
		b = append(b, `,"tokenId":`...)
		b = appendJSONString(b, r.TokenID)
		b = append(b, `,"clientId":`...)
		b = appendJSONString(b, r.ClientID)
		b = append(b, '}')
	}
	b = append(b, `,"resource":{"type":`...)
	b = appendJSONString(b, c.Resource.Type)
	b = append(b, `,"id":`...)
	b = appendJSONString(b, c.Resource.ID)
	b = append(b, '}')
	if c.times {
		b = append(b, `,"sequence":"`...)
		b = strconv.AppendUint(b, c.seq, 10)
		b = append(b, '"')
	} else if c.Sequence != "" {
		b = append(b, `,"sequence":`...)
		b = appendJSONString(b, c.Sequence)
	}
	b = append(b, `,"subject":{"type":`...)
	b = appendJSONString(b, string(c.Subject.Type))
	b = append(b, `,"id":`...)
	b = appendJSONString(b, c.Subject.ID)
	b = append(b, `,"displayName":`...)
	b = appendJSONString(b, c.Subject.DisplayName)
	b = append(b, '}')
	if c.TenantID != "" {
		b = append(b, `,"tenantId":`...)
		b = appendJSONString(b, c.TenantID)
	}
	b = append(b, `,"v":`...)
	b = strconv.AppendInt(b, int64(c.Version), 10)
	return append(b, '}')
}

// appendJSONString appends s as a JSON string exactly as encoding/json
// writes it with HTML escaping off. Plain printable ASCII, the common case,
// is copied as is; anything else goes through encoding/json itself.
func appendJSONString(b []byte, s string) []byte {
	i := 0
	for ; i+8 <= len(s); i += 8 { // eight bytes at a time
		w := s[i : i+8] // the loads below combine into one
		x := uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24 |
			uint64(w[4])<<32 | uint64(w[5])<<40 | uint64(w[6])<<48 | uint64(w[7])<<56
		if notPlain8(x) {
			return appendMarshaledString(b, s)
		}
	}
	for ; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return appendMarshaledString(b, s)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// appendMarshaledString appends s as encoding/json writes it.
func appendMarshaledString(b []byte, s string) []byte {
	enc, err := marshalCanonical(s)
	if err != nil {
		panic("domain: encoding string: " + err.Error()) // strings always encode
	}
	return append(b, enc...)
}

// notPlain8 reports whether any of the eight bytes of x is not printable
// ASCII copied as is: below 0x20, above 0x7e, a quote or a backslash.
// Each term is zero unless some byte is such a byte (a borrow starts only
// at one), so the answer is exact.
func notPlain8(x uint64) bool {
	const (
		ones  = 0x0101010101010101
		highs = 0x8080808080808080
	)
	quote := x ^ (ones * '"')
	backslash := x ^ (ones * '\\')
	del := x ^ (ones * 0x7f)
	less := (x - ones*0x20) &^ x // a byte below 0x20
	return (x|less|(quote-ones)&^quote|(backslash-ones)&^backslash|(del-ones)&^del)&highs != 0
}

// canonicalTimeLayout is the canonical form of a time: UTC, six
// fractional digits.
const canonicalTimeLayout = "2006-01-02T15:04:05.000000Z"

func formatTime(t time.Time) string {
	return t.UTC().Format(canonicalTimeLayout)
}

// appendUUID appends u as a JSON string in its lower-case hyphenated form,
// the bytes of appendJSONString(b, u.String()).
func appendUUID(b []byte, u uuid.UUID) []byte {
	const digits = "0123456789abcdef"
	b = append(b, '"')
	for i, x := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			b = append(b, '-')
		}
		b = append(b, digits[x>>4], digits[x&0xf])
	}
	return append(b, '"')
}

// appendTime appends t in canonicalTimeLayout as a JSON string: the same
// bytes as appendJSONString(b, formatTime(t)), which holds only digits and
// punctuation, without the intermediate string. Years 0 to 9999 have their
// digits written directly, the layout not being interpreted per call (the
// chain formats two times per event); other years go through AppendFormat.
func appendTime(b []byte, t time.Time) []byte {
	t = t.UTC()
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		b = append(b, '"')
		b = t.AppendFormat(b, canonicalTimeLayout)
		return append(b, '"')
	}
	hour, minute, sec := t.Clock()
	micro := t.Nanosecond() / 1000 // the layout truncates, as here
	var a [len(canonicalTimeLayout) + 2]byte
	a[0] = '"'
	put4(a[1:], year)
	a[5] = '-'
	put2(a[6:], int(month))
	a[8] = '-'
	put2(a[9:], day)
	a[11] = 'T'
	put2(a[12:], hour)
	a[14] = ':'
	put2(a[15:], minute)
	a[17] = ':'
	put2(a[18:], sec)
	a[20] = '.'
	put2(a[21:], micro/10000)
	put2(a[23:], micro/100%100)
	put2(a[25:], micro%100)
	a[27] = 'Z'
	a[28] = '"'
	return append(b, a[:]...)
}

// put2 writes n (0 to 99) as two decimal digits at the start of b.
func put2(b []byte, n int) {
	b[0], b[1] = byte('0'+n/10), byte('0'+n%10)
}

// put4 writes n (0 to 9999) as four decimal digits at the start of b.
func put4(b []byte, n int) {
	put2(b, n/100)
	put2(b[2:], n%100)
}

// CanonicalBytes returns the event's canonical encoding: the JSON object
// {"action","correlation","details","evidenceDigests","governance","id",
// "occurredAt","outcome","projectId","recordedAt","recordedBy","resource",
// "sequence","subject","tenantId","v"} in that key order, with no white
// space and no HTML escaping. Times are RFC 3339 UTC with six fractional
// digits, the sequence a decimal string, details canonical JSON, absent
// optional objects null, "v" the event's ChainVersion. recordedBy
// ({"issuer","subject","tokenId","clientId"}) is present from version 2 on;
// a version 1 event encodes exactly as it always did. This is what
// ChainHash covers.
func (e *AuditEvent) CanonicalBytes() []byte {
	return e.AppendCanonical(make([]byte, 0, 640+len(e.Details)))
}

// AppendCanonical appends the event's canonical encoding (CanonicalBytes)
// to b and returns the extended slice: for callers that hash many events
// with one buffer.
func (e *AuditEvent) AppendCanonical(b []byte) []byte {
	c := canonicalEvent{
		Action:          e.Action,
		Correlation:     e.Correlation,
		Details:         e.Details,
		EvidenceDigests: e.EvidenceDigests,
		Governance:      e.Governance,
		Outcome:         e.Outcome,
		ProjectID:       e.ProjectID,
		Resource:        e.Resource,
		Subject:         e.Subject,
		TenantID:        e.TenantID,
		Version:         e.ChainVersion,
		id:              e.ID,
		seq:             e.Sequence,
		occurred:        e.OccurredAt,
		recorded:        e.RecordedAt,
		times:           true,
	}
	switch {
	case e.ChainVersion < ChainVersionRecordedBy:
		// Version 1 (and the zero value of events built by hand) has no
		// recordedBy, whatever the event carries.
		c.Version = ChainVersionOriginal
	case e.RecordedBy == nil:
		c.RecordedBy = &Recorder{}
	default:
		c.RecordedBy = e.RecordedBy
	}
	return c.appendTo(b)
}

// ComputeChainHash returns SHA-256(prev || e.CanonicalBytes()), where prev is
// the chain hash of the previous event of the same tenant and project, or 32
// zero bytes for its first event.
func (e *AuditEvent) ComputeChainHash(prev Hash) Hash {
	h, _ := e.ChainHashWith(prev, nil)
	return h
}

// ChainHashWith is ComputeChainHash using buf as scratch space; it returns
// the hash and the buffer (grown if needed) for the next call, so a
// verifier of many events allocates nothing per event.
func (e *AuditEvent) ChainHashWith(prev Hash, buf []byte) (Hash, []byte) {
	buf = append(buf[:0], prev[:]...)
	buf = e.AppendCanonical(buf)
	return sha256.Sum256(buf), buf
}

// ChainHead is the newest event of a tenant/project: its sequence, chain
// hash and recorded time. The zero value is the head of an empty project.
type ChainHead struct {
	Sequence uint64
	Hash     Hash
	// RecordedAt is when the head event was recorded (zero when unknown:
	// an empty project, or a head stored before migration 00022).
	RecordedAt time.Time
}

// Append seals drafts as the next events after the head, in order: each gets
// the next dense sequence, recordedAt and its chain hash. It returns the
// events and the new head. Drafts must be normalized and of this project.
//
// recordedAt never goes back within a project: a recordedAt before the
// head's (a clock stepped back, another process's clock ahead) records the
// events at the head's time instead, so sequence order and recorded_at
// order agree (the partitions of audit_events by month of recorded_at hold
// consecutive runs of each project's sequences).
func (h ChainHead) Append(tenantID string, drafts []AuditEventDraft, recordedAt time.Time) ([]AuditEvent, ChainHead) {
	recordedAt = recordedAt.UTC().Truncate(time.Microsecond)
	if recordedAt.Before(h.RecordedAt) {
		recordedAt = h.RecordedAt.UTC()
	}
	h.RecordedAt = recordedAt
	out := make([]AuditEvent, len(drafts))
	for i := range drafts {
		d := &drafts[i]
		h.Sequence++
		ev := AuditEvent{
			ID:              d.ID,
			TenantID:        tenantID,
			ProjectID:       d.ProjectID,
			Sequence:        h.Sequence,
			Action:          d.Action,
			OccurredAt:      d.OccurredAt,
			RecordedAt:      recordedAt,
			Subject:         d.Subject,
			Resource:        d.Resource,
			Outcome:         d.Outcome,
			Governance:      d.Governance,
			Correlation:     d.Correlation,
			EvidenceDigests: d.EvidenceDigests,
			Details:         d.Details,
			RecordedBy:      d.RecordedBy,
			ChainVersion:    ChainVersion,
		}
		if ev.RecordedBy == nil {
			ev.RecordedBy = &Recorder{}
		}
		if ev.EvidenceDigests == nil {
			ev.EvidenceDigests = []EvidenceDigest{}
		}
		ev.ChainHash = ev.ComputeChainHash(h.Hash)
		h.Hash = ev.ChainHash
		out[i] = ev
	}
	return out, h
}
