package export

import (
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/aetheriot/aether-audit/domain"
)

// Key returns the object key of one attempt at writing an export:
//
//	exports/<tenant>/<project>/<exportID>-<attempt>.<ext>
//
// where <tenant> and <project> are tenantID and projectID escaped as below,
// <exportID> is the canonical lower-case UUID, <attempt> is
// attempt in decimal and <ext> is "ndjson" or "csv", followed by ".gz" when
// gzipped.
//
// Escaping keeps the bytes [A-Za-z0-9_-], and '.' unless the whole id is "."
// or ".."; every other byte (including '/', '%' and each byte of a
// multi-byte UTF-8 character) becomes '%' and two upper-case hex digits, as
// in URL percent-encoding. Percent-decoding a segment gives the id back, so
// distinct arguments always give distinct keys: tenant "a/b" with project
// "c" is "exports/a%2Fb/c/...", tenant "a" with project "b/c" is
// "exports/a/b%2Fc/...".
func Key(tenantID, projectID string, exportID uuid.UUID, attempt int, format domain.DataExportFormat, compression domain.DataExportCompression) string {
	return KeyPrefix(tenantID, projectID, exportID) + strconv.Itoa(attempt) + "." + extension(format, compression)
}

// KeyPrefix returns "exports/<tenant>/<project>/<exportID>-", the prefix
// shared by the keys of every attempt at one export and by no other key, so
// that DeletePrefix with it removes the leftovers of failed attempts.
func KeyPrefix(tenantID, projectID string, exportID uuid.UUID) string {
	return "exports/" + escapeSegment(tenantID) + "/" + escapeSegment(projectID) + "/" + exportID.String() + "-"
}

// escapeSegment makes s safe as one segment of an object key, as Key
// describes.
func escapeSegment(s string) string {
	dotsOnly := s == "." || s == ".."
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if keepInSegment(c) && !(dotsOnly && c == '.') {
			b.WriteByte(c)
			continue
		}
		const hexDigits = "0123456789ABCDEF"
		b.WriteByte('%')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&0x0f])
	}
	return b.String()
}

// keepInSegment reports whether c stands for itself in an escaped segment.
func keepInSegment(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' ||
		c == '.' || c == '_' || c == '-'
}

// CheckpointKey returns the object key of a signed audit checkpoint:
//
//	checkpoints/<tenant>/<project>/<sequence>.jws
//
// with <tenant> and <project> escaped as in Key and <sequence> in decimal.
func CheckpointKey(tenantID, projectID string, seq uint64) string {
	return "checkpoints/" + escapeSegment(tenantID) + "/" + escapeSegment(projectID) + "/" + strconv.FormatUint(seq, 10) + ".jws"
}

// KeySegment escapes s as one segment of an object key, as Key escapes its
// tenant and project: other packages that name objects of a tenant's
// project (audit streams) use it so that names never collide.
func KeySegment(s string) string { return escapeSegment(s) }
