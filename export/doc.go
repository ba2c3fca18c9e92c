// Package export writes data exports, bounded pieces of a project's audit,
// alarm or telemetry history, to object storage, and serves them back.
//
// Storage is a gocloud.dev/blob bucket opened by OpenBucket: file:// on a
// developer's machine, s3:// in production, mem:// in tests.
//
// # Object layout
//
// Each attempt at an export writes one object, named by Key:
//
//	exports/<tenant>/<project>/<exportID>-<attempt>.<ext>
//
// <tenant> and <project> are the ids percent-escaped so that each is one
// safe path segment and distinct ids never collide (see Key); <exportID> is
// the lower-case UUID; <ext> is ndjson or csv, plus .gz when gzipped. Every
// attempt of an export shares KeyPrefix, so a new attempt can remove what
// crashed attempts left with DeletePrefix, keeping at most the object it
// means to keep.
//
// The stored object is the file a user downloads: a gzipped export is the
// .gz file itself, stored with Content-Type application/gzip and no
// Content-Encoding; otherwise the Content-Type is application/x-ndjson or
// text/csv; charset=utf-8.
//
// # Writing
//
// CreateObject returns an ObjectWriter that streams rows through the
// encoder, the optional gzip compressor, a SHA-256 hash and byte counter,
// and into the bucket, holding a bounded amount of memory whatever the size
// of the export. The object appears whole at Commit or not at all: a write
// that fails, is cancelled or is aborted leaves nothing under its key.
//
// Objects are written once and never overwritten. CreateObject refuses a
// key that exists (ErrExists), and the write itself is conditional on the
// key still being absent when it commits.
//
// The ObjectResult of Commit describes the object as stored: Digest is
// "sha256:" and the lower-case hex SHA-256 of the stored bytes, Bytes their
// number, both after compression, so that a client can check the file it
// downloaded without unpacking it. Rows counts rows, not a CSV header. A
// size limit, also on stored bytes, makes the write that would pass it fail
// with ErrTooLarge.
//
// # NDJSON
//
// One row per line: the encoding/json form of the domain value (AuditEvent,
// AlarmRecord or TelemetryPoint), which is the shape the API publishes,
// followed by "\n". A value encoding/json refuses, such as a NaN or
// infinite telemetry value, fails the write.
//
// # CSV
//
// A header row naming the columns, then one record per row. Quoting
// follows RFC 4180 (a field holding a comma, a double quote, a line break
// or leading white space is double-quoted, with quotes doubled) but records
// end with "\n" rather than "\r\n", so that field values reach the file
// byte for byte. Values are written verbatim, with one exception against
// CSV injection (as OWASP recommends): a cell that begins with '=', '+',
// '-', '@', a tab or a carriage return, and is not a number as it stands,
// is prefixed with a single quote ('), which spreadsheets show as text
// and do not run. A reader that wants the stored value drops that quote
// from such cells; a negative number ("-2.5") is written as it is.
//
// Common rules: times are UTC in RFC 3339 with nanoseconds
// (time.RFC3339Nano, trailing zeros of the fraction dropped), integers are
// decimal, an absent optional value is the empty string, and JSON values
// are compact JSON text.
//
// AUDIT columns, from domain.AuditEvent:
//
//	id                        event id (UUID)
//	tenant_id                 tenant id
//	project_id                project id
//	sequence                  sequence number, decimal
//	action                    action
//	occurred_at               when the action happened
//	recorded_at               when the server recorded the event
//	subject_type              USER, SERVICE or SYSTEM
//	subject_id                subject id
//	subject_display_name      subject display name
//	resource_type             resource type
//	resource_id               resource id
//	outcome                   SUCCESS, FAILURE, DENIED or ERROR
//	governance_risk           LOW, MEDIUM or HIGH; empty without governance
//	governance_reason         governance reason; empty without governance
//	governance_ticket         governance ticket; empty without governance
//	governance_confirmed_by   governance confirmer; empty without governance
//	trace_id                  W3C trace id; empty without correlation
//	request_id                request id; empty without correlation
//	causation_id              causation id; empty without correlation
//	evidence_digests          JSON array of {"algorithm","value","label"}
//	                          objects; empty when there are none
//	details                   details JSON object; empty when absent
//	chain_hash                hash chain value, 64 lower-case hex digits
//	chain_version             canonical encoding version, 1 or 2
//	recorded_by_issuer        issuer of the recording token; empty for
//	                          version 1 events, as are the three below
//	recorded_by_subject       subject of the recording token
//	recorded_by_token_id      token id (jti, or a digest of the token)
//	recorded_by_client_id     client (azp or client_id); empty when absent
//
// ALARM columns, from domain.AlarmRecord:
//
//	id            alarm history entry id (UUID)
//	tenant_id     tenant id
//	project_id    project id
//	occurred_at   when the entry happened
//	alarm_id      alarm id
//	device_id     device id
//	severity      CRITICAL, MAJOR, MINOR, WARNING or INFO
//	state         RAISED, ACKNOWLEDGED or CLEARED
//	message       message
//	details       details JSON; empty when absent
//
// TELEMETRY columns, from domain.TelemetryPoint:
//
//	tenant_id     tenant id
//	project_id    project id
//	device_id     device id
//	metric        metric name
//	occurred_at   when the value was measured
//	value         the shortest decimal that reads back as the same float64
//	              (strconv.FormatFloat 'g' -1), such as 21.5, 1e+21, NaN or +Inf
//	unit          unit
//
// # Reading
//
// NewObjectReader gives an io.ReadSeeker over a stored object that fetches
// bytes lazily by range from the current offset, so http.ServeContent can
// answer Range requests without loading the object.
//
// # Download capabilities
//
// A download is authorised by a capability token from SignDownload rather
// than by the caller's session, so a link can be handed to a browser or a
// tool. The token is
//
//	base64url(payload) "." base64url(HMAC-SHA256(key, label || payload))
//
// unpadded, where payload is the version byte 1, the 16 bytes of the export
// id, the expiry as big-endian signed 64-bit Unix seconds and the tenant id
// bytes, and label is "aether-audit export download" followed by a zero
// byte. The key has at least 32 bytes. VerifyDownload checks the MAC in
// constant time and then the expiry; it reports ErrCapabilityInvalid for
// any token it did not issue (malformed, altered, signed with another key)
// and ErrCapabilityExpired for a genuine token at or past its expiry. The
// token is signed, not encrypted.
package export
