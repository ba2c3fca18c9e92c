// Package eventjson is the one home of an audit event's JSON shape, the
// public event shape every surface emits: REST and SSE bodies, webhook
// payloads and NDJSON exports. Its encoder writes byte for byte what
// encoding/json's Marshal writes for domain.AuditEvent (whose field tags
// name the members), without reflection, so a row costs no allocation.
// The GraphQL fast path writes the selected fields of the same shape.
package eventjson
