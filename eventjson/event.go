package eventjson

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/aetheriot/aether-audit/domain"
)

// Append appends the event's JSON encoding, the public event shape shared
// by GraphQL, REST, SSE, webhooks and exports: byte for byte what
// encoding/json's Marshal produces for domain.AuditEvent, without
// reflection. If Marshal would fail for the event (details that are not
// valid JSON, a time outside years 0-9999), it returns Marshal's error and
// b unchanged.
func Append(b []byte, e *domain.AuditEvent) ([]byte, error) {
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
	b = append(b, `","chainVersion":`...)
	b = strconv.AppendInt(b, int64(e.ChainVersion), 10)
	if r := e.RecordedBy; r == nil {
		b = append(b, `,"recordedBy":null}`...)
	} else {
		b = append(b, `,"recordedBy":{"issuer":`...)
		b = appendMarshalString(b, r.Issuer)
		b = append(b, `,"subject":`...)
		b = appendMarshalString(b, r.Subject)
		b = append(b, `,"tokenId":`...)
		b = appendMarshalString(b, r.TokenID)
		b = append(b, `,"clientId":`...)
		b = appendMarshalString(b, r.ClientID)
		b = append(b, `}}`...)
	}
	return b, nil
}

// AppendWebhookPayload appends the body of a webhook of the event,
// {"type": its action, "timestamp": its RecordedAt, "data": the event},
// byte for byte what encoding/json's Marshal produces for that shape (the
// app's WebhookPayload), without reflection. If Marshal would fail for the
// event, it returns b unchanged and an error.
func AppendWebhookPayload(b []byte, e *domain.AuditEvent) ([]byte, error) {
	start := len(b)
	b = append(b, `{"type":`...)
	b = appendMarshalString(b, e.Action)
	b = append(b, `,"timestamp":"`...)
	b = e.RecordedAt.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","data":`...)
	b, err := Append(b, e)
	if err != nil {
		return b[:start], err
	}
	return append(b, '}'), nil
}

// appendMarshal is the slow path for events the fast path finds
// unencodable: it appends json.Marshal's encoding of e or returns its error.
func appendMarshal(b []byte, e *domain.AuditEvent) ([]byte, error) {
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
