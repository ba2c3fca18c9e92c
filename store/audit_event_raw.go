package store

import (
	"encoding/binary"
	"encoding/json"
	"time"
	"unsafe"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/aetheriot/aether-audit/domain"
)

// rawEventDecoder decodes audit event rows (auditEventColumns) straight from
// the wire into a reused AuditEvent whose strings and byte slices borrow the
// row's buffer: no allocation per row. The event is valid only until the
// next row, so it serves callers that consume each event at once (exports
// encode it and drop it). It handles the binary formats pgx asks for; a
// result in any other format is left to scanAuditEvent.
type rawEventDecoder struct {
	e       domain.AuditEvent
	gov     domain.Governance
	corr    domain.Correlation
	rec     domain.Recorder
	digests []domain.EvidenceDigest
}

// pgEpoch is PostgreSQL's timestamp epoch.
var pgEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// binaryColumns are the columns of auditEventColumns that must come in
// binary format for the raw decoder (the others are text, the same bytes in
// both formats).
var binaryColumns = map[int]bool{2: true, 3: true, 5: true, 6: true, 24: true}

// rawDecodable reports whether the result's columns come in the formats the
// raw decoder reads.
func rawDecodable(fields []pgconn.FieldDescription) bool {
	if len(fields) != len(auditEventColumnNames) {
		return false
	}
	for i, f := range fields {
		if binaryColumns[i] && f.Format != pgx.BinaryFormatCode {
			return false
		}
	}
	// evidence_digests (jsonb) is read in either format.
	return true
}

// borrow returns b as a string without copying: valid while b is.
func borrow(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

func pgTime(b []byte) time.Time {
	us := int64(binary.BigEndian.Uint64(b))
	return pgEpoch.Add(time.Duration(us) * time.Microsecond)
}

// decode fills the decoder's event from one row; ok is false when a value
// is not what the raw decoder expects (then scanAuditEvent decides).
func (d *rawEventDecoder) decode(v [][]byte, jsonbBinary bool) (e *domain.AuditEvent, ok bool) {
	if len(v[2]) != 8 || len(v[3]) != 16 || len(v[5]) != 8 || len(v[6]) != 8 || v[21] == nil || len(v[22]) != 32 || len(v[23]) != 32 || len(v[24]) != 2 {
		return nil, false
	}
	e = &d.e
	e.TenantID, e.ProjectID = borrow(v[0]), borrow(v[1])
	e.Sequence = binary.BigEndian.Uint64(v[2])
	copy(e.ID[:], v[3])
	e.Action = borrow(v[4])
	e.OccurredAt, e.RecordedAt = pgTime(v[5]), pgTime(v[6])
	e.Subject = domain.Subject{Type: domain.SubjectType(borrow(v[7])), ID: borrow(v[8]), DisplayName: borrow(v[9])}
	e.Resource = domain.Resource{Type: borrow(v[10]), ID: borrow(v[11])}
	e.Outcome = domain.Outcome(borrow(v[12]))
	e.Governance = nil
	if v[13] != nil {
		d.gov = domain.Governance{Risk: domain.Risk(borrow(v[13])), Reason: borrow(v[14]), Ticket: borrow(v[15]), ConfirmedBy: borrow(v[16])}
		e.Governance = &d.gov
	}
	e.Correlation = nil
	if len(v[17]) > 0 || len(v[18]) > 0 || len(v[19]) > 0 {
		d.corr = domain.Correlation{TraceID: borrow(v[17]), RequestID: borrow(v[18]), CausationID: borrow(v[19])}
		e.Correlation = &d.corr
	}
	digests := v[20]
	if jsonbBinary {
		if len(digests) == 0 || digests[0] != 1 {
			return nil, false
		}
		digests = digests[1:]
	}
	d.digests = d.digests[:0]
	if len(digests) > 2 {
		// Rare and small; decoded like scanAuditEvent does.
		if err := json.Unmarshal(digests, &d.digests); err != nil {
			return nil, false
		}
	}
	e.EvidenceDigests = d.digests
	if e.EvidenceDigests == nil {
		e.EvidenceDigests = []domain.EvidenceDigest{}
	}
	e.Details = v[21]
	copy(e.InputFingerprint[:], v[22])
	copy(e.ChainHash[:], v[23])
	e.ChainVersion = int(int16(binary.BigEndian.Uint16(v[24])))
	e.RecordedBy = nil
	if e.ChainVersion >= domain.ChainVersionRecordedBy {
		d.rec = domain.Recorder{Issuer: borrow(v[25]), Subject: borrow(v[26]), TokenID: borrow(v[27]), ClientID: borrow(v[28])}
		e.RecordedBy = &d.rec
	}
	return e, true
}
