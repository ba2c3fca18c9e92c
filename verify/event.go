package verify

import (
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/aetheriot/aether-audit/domain"
)

// line is one export line read back: the event as the domain package
// knows it (with canonical details) and the chain hash the line claims.
type line struct {
	event domain.AuditEvent
	// claimed is the line's "chainHash".
	claimed domain.Hash
	// recordedBy is where event.RecordedBy points when the line has one,
	// saving an allocation per line.
	recordedBy domain.Recorder
}

// fieldError is a problem with one field of a line.
type fieldError struct {
	field string
	err   error
}

func (e *fieldError) Error() string { return e.field + ": " + e.err.Error() }

// parseLine reads one export line (which must not change afterwards: the
// event's strings point into it): an event JSON object as eventjson.Append
// writes it. It decodes every field the canonical encoding covers as
// encoding/json would decode it into domain.AuditEvent (times, the
// decimal sequence, the UUID), re-canonicalizes details, and requires
// sequence, chainHash and the other covered fields to be present. A line
// without chainVersion is of version 1 (exports from before version 2).
//
// A line laid out exactly as eventjson.Append writes it is read by
// parseLayout; any other line, or one with a problem, by parseAny. Both
// read each field with the same function, so they agree.
func parseLine(b []byte, l *line) error {
	if parseLayout(b, l) {
		return nil
	}
	return parseAny(b, l)
}

// A field reader reads the value of one key of the event object into l.
type fieldReader func(s *scanner, l *line) error

func readID(s *scanner, l *line) error {
	v, err := s.str()
	if err == nil {
		l.event.ID, err = parseUUID(v)
	}
	return err
}

func readTenant(s *scanner, l *line) (err error) {
	l.event.TenantID, err = s.str()
	return err
}

func readProject(s *scanner, l *line) (err error) {
	l.event.ProjectID, err = s.str()
	return err
}

func readSequence(s *scanner, l *line) error {
	raw, escaped, err := s.rawString()
	if err != nil {
		return err
	}
	if escaped || len(raw) == 0 {
		return errSyntax
	}
	l.event.Sequence, err = strconv.ParseUint(string(raw), 10, 64)
	return err
}

func readAction(s *scanner, l *line) (err error) {
	l.event.Action, err = s.str()
	return err
}

func readOccurred(s *scanner, l *line) (err error) {
	l.event.OccurredAt, err = s.time()
	return err
}

func readRecorded(s *scanner, l *line) (err error) {
	l.event.RecordedAt, err = s.time()
	return err
}

func readSubject(s *scanner, l *line) (err error) {
	l.event.Subject, err = s.subject(false)
	return err
}

func readResource(s *scanner, l *line) (err error) {
	l.event.Resource, err = s.resource(false)
	return err
}

func readOutcome(s *scanner, l *line) error {
	v, err := s.str()
	l.event.Outcome = domain.Outcome(v)
	return err
}

func readGovernance(s *scanner, l *line) (err error) {
	l.event.Governance, err = s.governance(false)
	return err
}

func readCorrelation(s *scanner, l *line) (err error) {
	l.event.Correlation, err = s.correlation(false)
	return err
}

func readEvidence(s *scanner, l *line) (err error) {
	l.event.EvidenceDigests, err = s.evidenceDigests()
	return err
}

func readDetails(s *scanner, l *line) (err error) {
	l.event.Details, err = s.details()
	return err
}

func readChainHash(s *scanner, l *line) error {
	raw, escaped, err := s.rawString()
	if err != nil {
		return err
	}
	if escaped || len(raw) != 2*len(l.claimed) {
		return fmt.Errorf("must be 64 hex digits")
	}
	bad := byte(0) // hex.Decode, through the table
	for i := range l.claimed {
		hi, lo := unhex[raw[2*i]], unhex[raw[2*i+1]]
		bad |= hi | lo
		l.claimed[i] = hi<<4 | lo
	}
	if bad&0xf0 != 0 {
		return fmt.Errorf("must be 64 hex digits")
	}
	return nil
}

func readChainVersion(s *scanner, l *line) error {
	raw, err := s.skip()
	if err != nil {
		return err
	}
	switch string(raw) {
	case "1":
		l.event.ChainVersion = domain.ChainVersionOriginal
	case "2":
		l.event.ChainVersion = domain.ChainVersionRecordedBy
	default:
		return fmt.Errorf("unknown canonical encoding version %s", raw)
	}
	return nil
}

func readRecordedBy(s *scanner, l *line) (err error) {
	l.event.RecordedBy, err = s.recorder(&l.recordedBy, false)
	return err
}

// parseLayout reads a line laid out exactly as eventjson.Append writes
// it: these keys in this order, no white space, and no problem; it
// reports whether it did. parseAny would read such a line the same way
// (the same readers on the same values in the same order, every
// required key present). For any other line it reports false, and l is
// to be read again. The keys are literals, so that the compiler compares
// them inline.
func parseLayout(b []byte, l *line) bool {
	*l = line{}
	l.event.ChainVersion = domain.ChainVersionOriginal
	s := scanner{b: b}
	return s.lit(`{"id":`) && readID(&s, l) == nil &&
		s.lit(`,"tenantId":`) && readTenant(&s, l) == nil &&
		s.lit(`,"projectId":`) && readProject(&s, l) == nil &&
		s.lit(`,"sequence":`) && readSequence(&s, l) == nil &&
		s.lit(`,"action":`) && readAction(&s, l) == nil &&
		s.lit(`,"occurredAt":`) && readOccurred(&s, l) == nil &&
		s.lit(`,"recordedAt":`) && readRecorded(&s, l) == nil &&
		s.lit(`,"subject":`) && readSubject(&s, l) == nil &&
		s.lit(`,"resource":`) && readResource(&s, l) == nil &&
		s.lit(`,"outcome":`) && readOutcome(&s, l) == nil &&
		s.lit(`,"governance":`) && readGovernance(&s, l) == nil &&
		s.lit(`,"correlation":`) && readCorrelation(&s, l) == nil &&
		s.lit(`,"evidenceDigests":`) && readEvidence(&s, l) == nil &&
		s.lit(`,"details":`) && readDetails(&s, l) == nil &&
		s.lit(`,"chainHash":`) && readChainHash(&s, l) == nil &&
		s.lit(`,"chainVersion":`) && readChainVersion(&s, l) == nil &&
		s.lit(`,"recordedBy":`) && readRecordedBy(&s, l) == nil &&
		s.lit("}") && s.i == len(s.b)
}

// parseAny reads a line with its keys in any order (see parseLine).
func parseAny(b []byte, l *line) error {
	*l = line{}
	e := &l.event
	e.ChainVersion = domain.ChainVersionOriginal
	s := scanner{b: b}
	if !s.consume('{') {
		return &fieldError{"event", fmt.Errorf("not a JSON object")}
	}
	var seen uint32
	const (
		hasID = 1 << iota
		hasTenant
		hasProject
		hasSequence
		hasAction
		hasOccurred
		hasRecorded
		hasSubject
		hasResource
		hasOutcome
		hasDetails
		hasChainHash
		required = 1<<iota - 1
	)
	err := s.fields(func(key []byte) error {
		var (
			read fieldReader
			bit  uint32
		)
		switch string(key) {
		case "id":
			read, bit = readID, hasID
		case "tenantId":
			read, bit = readTenant, hasTenant
		case "projectId":
			read, bit = readProject, hasProject
		case "sequence":
			read, bit = readSequence, hasSequence
		case "action":
			read, bit = readAction, hasAction
		case "occurredAt":
			read, bit = readOccurred, hasOccurred
		case "recordedAt":
			read, bit = readRecorded, hasRecorded
		case "subject":
			read, bit = readSubject, hasSubject
		case "resource":
			read, bit = readResource, hasResource
		case "outcome":
			read, bit = readOutcome, hasOutcome
		case "governance":
			read = readGovernance
		case "correlation":
			read = readCorrelation
		case "evidenceDigests":
			read = readEvidence
		case "details":
			read, bit = readDetails, hasDetails
		case "chainHash":
			read, bit = readChainHash, hasChainHash
		case "chainVersion":
			read = readChainVersion
		case "recordedBy":
			read = readRecordedBy
		default:
			read = func(s *scanner, _ *line) error {
				_, err := s.skip() // not covered by the hash
				return err
			}
		}
		seen |= bit
		if err := read(&s, l); err != nil {
			return &fieldError{string(key), err}
		}
		return nil
	})
	if err != nil {
		if _, ok := err.(*fieldError); !ok {
			err = &fieldError{"event", err}
		}
		return err
	}
	if s.peek() != 0 {
		return &fieldError{"event", fmt.Errorf("text after the JSON object")}
	}
	if seen&required != required {
		for _, f := range []struct {
			bit  uint32
			name string
		}{{hasID, "id"}, {hasTenant, "tenantId"}, {hasProject, "projectId"}, {hasSequence, "sequence"},
			{hasAction, "action"}, {hasOccurred, "occurredAt"}, {hasRecorded, "recordedAt"},
			{hasSubject, "subject"}, {hasResource, "resource"}, {hasOutcome, "outcome"},
			{hasDetails, "details"}, {hasChainHash, "chainHash"}} {
			if seen&f.bit == 0 {
				return &fieldError{f.name, fmt.Errorf("missing")}
			}
		}
	}
	return nil
}

// unhex maps the hex digits to their values and every other byte to 0xff.
var unhex = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for i, c := range "0123456789abcdef" {
		t[c] = byte(i)
	}
	for i, c := range "ABCDEF" {
		t[c] = byte(10 + i)
	}
	return t
}()

// parseUUID is uuid.Parse, reading the usual hyphenated form directly;
// any other form, or a bad digit, goes through uuid.Parse itself.
func parseUUID(s string) (uuid.UUID, error) {
	var u uuid.UUID
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return uuid.Parse(s)
	}
	bad := byte(0)
	j := 0
	for i := 0; i < 36; i += 2 {
		if i == 8 || i == 13 || i == 18 || i == 23 {
			i++
		}
		hi, lo := unhex[s[i]], unhex[s[i+1]]
		bad |= hi | lo
		u[j] = hi<<4 | lo
		j++
	}
	if bad&0xf0 != 0 {
		return uuid.Parse(s) // its error
	}
	return u, nil
}

// time reads an RFC 3339 time as time.Time's UnmarshalJSON does.
func (s *scanner) time() (time.Time, error) {
	raw, escaped, err := s.rawString()
	if err != nil {
		return time.Time{}, err
	}
	if escaped {
		return time.Time{}, errSyntax
	}
	if t, ok := parseUTCTime(raw); ok {
		return t, nil
	}
	return time.Parse(time.RFC3339, string(raw))
}

// parseUTCTime parses the common form of the export's times,
// "2006-01-02T15:04:05[.fraction]Z", faster than time.Parse; ok is false
// for anything else (other zones go through time.Parse).
func parseUTCTime(b []byte) (time.Time, bool) {
	if len(b) < 20 || b[len(b)-1] != 'Z' || b[4] != '-' || b[7] != '-' || b[10] != 'T' || b[13] != ':' || b[16] != ':' {
		return time.Time{}, false
	}
	num := func(b []byte) (int, bool) {
		n := 0
		for _, c := range b {
			if c < '0' || c > '9' {
				return 0, false
			}
			n = n*10 + int(c-'0')
		}
		return n, true
	}
	year, ok1 := num(b[0:4])
	month, ok2 := num(b[5:7])
	day, ok3 := num(b[8:10])
	hour, ok4 := num(b[11:13])
	minute, ok5 := num(b[14:16])
	sec, ok6 := num(b[17:19])
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) || month < 1 || month > 12 || day < 1 ||
		day > daysIn(year, month) || hour > 23 || minute > 59 || sec > 59 {
		return time.Time{}, false
	}
	nsec := 0
	if frac := b[19 : len(b)-1]; len(frac) > 0 {
		if frac[0] != '.' || len(frac) < 2 || len(frac) > 10 {
			return time.Time{}, false
		}
		n, ok := num(frac[1:])
		if !ok {
			return time.Time{}, false
		}
		for range 10 - len(frac) {
			n *= 10
		}
		nsec = n
	}
	// time.Date's result for these fields, without its normalization.
	unix := daysSinceEpoch(year, month, day)*86400 + int64(hour*3600+minute*60+sec)
	return time.Unix(unix, int64(nsec)).UTC(), true
}

// daysIn returns the number of days of the month (1 to 12) of the year.
func daysIn(year, month int) int {
	if month == 2 && year%4 == 0 && (year%100 != 0 || year%400 == 0) {
		return 29
	}
	return int("\x1f\x1c\x1f\x1e\x1f\x1e\x1f\x1f\x1e\x1f\x1e\x1f"[month-1])
}

// daysSinceEpoch returns the number of days from 1970-01-01 to the date
// (proleptic Gregorian; year 0 to 9999, month 1 to 12), by the
// days-from-civil algorithm (eras of 400 years starting in March).
func daysSinceEpoch(year, month, day int) int64 {
	y := int64(year)
	if month <= 2 {
		y--
	}
	era := y
	if era < 0 {
		era -= 399
	}
	era /= 400
	yoe := y - era*400                     // [0, 399]
	mp := (int64(month) + 9) % 12          // March is 0
	doy := (153*mp+2)/5 + int64(day) - 1   // [0, 365]
	doe := yoe*365 + yoe/4 - yoe/100 + doy // [0, 146096]
	return era*146097 + doe - 719468
}

// stringObject is the shape of a nested object whose members are all
// strings (subject, resource, governance, correlation, recordedBy): its
// keys in the order eventjson.Append writes them, and the text before
// each value in that layout.
type stringObject struct {
	keys   []string
	layout []string
}

// newStringObject describes an object with these keys, in written order.
func newStringObject(keys ...string) *stringObject {
	o := &stringObject{keys: keys}
	for i, k := range keys {
		sep := ","
		if i == 0 {
			sep = "{"
		}
		o.layout = append(o.layout, sep+`"`+k+`":`)
	}
	return o
}

// The nested objects of the event line.
var (
	subjectObject     = newStringObject("type", "id", "displayName")
	resourceObject    = newStringObject("type", "id")
	governanceObject  = newStringObject("reason", "ticket", "risk", "confirmedBy")
	correlationObject = newStringObject("traceId", "requestId", "causationId")
	recorderObject    = newStringObject("issuer", "subject", "tokenId", "clientId")
)

// read reads an object of o into dst (one destination per key, in o's
// order): first as laid out by eventjson.Append, member by member, and
// when the text differs anywhere, again from its start with its keys in
// any order (unknown keys skipped, the last of a repeated key kept), which
// yields the same values for the same text. anyOrder skips the first try
// (for tests).
func (o *stringObject) read(s *scanner, dst *[4]*string, anyOrder bool) error {
	start := s.i
	if !anyOrder {
		ok := true
		for i, text := range o.layout {
			if !s.lit(text) {
				ok = false
				break
			}
			v, err := s.str()
			if err != nil {
				ok = false
				break
			}
			*dst[i] = v
		}
		if ok && s.lit("}") {
			return nil
		}
		s.i = start
		for i := range o.keys {
			*dst[i] = ""
		}
	}
	if !s.consume('{') {
		return errSyntax
	}
	return s.fields(func(key []byte) error {
		for i, k := range o.keys {
			if string(key) == k {
				v, err := s.str()
				*dst[i] = v
				return err
			}
		}
		_, err := s.skip()
		return err
	})
}

func (s *scanner) subject(anyOrder bool) (v domain.Subject, err error) {
	var typ string
	err = subjectObject.read(s, &[4]*string{&typ, &v.ID, &v.DisplayName}, anyOrder)
	v.Type = domain.SubjectType(typ)
	return v, err
}

func (s *scanner) resource(anyOrder bool) (v domain.Resource, err error) {
	err = resourceObject.read(s, &[4]*string{&v.Type, &v.ID}, anyOrder)
	return v, err
}

// governance reads null (nil) or a governance object.
func (s *scanner) governance(anyOrder bool) (*domain.Governance, error) {
	if s.literal("null") {
		return nil, nil
	}
	v := &domain.Governance{}
	var risk string
	err := governanceObject.read(s, &[4]*string{&v.Reason, &v.Ticket, &risk, &v.ConfirmedBy}, anyOrder)
	v.Risk = domain.Risk(risk)
	return v, err
}

// correlation reads null (nil) or a correlation object.
func (s *scanner) correlation(anyOrder bool) (*domain.Correlation, error) {
	if s.literal("null") {
		return nil, nil
	}
	v := &domain.Correlation{}
	return v, correlationObject.read(s, &[4]*string{&v.TraceID, &v.RequestID, &v.CausationID}, anyOrder)
}

// recorder reads a recordedBy object into v and returns v (or nil for
// null).
func (s *scanner) recorder(v *domain.Recorder, anyOrder bool) (*domain.Recorder, error) {
	if s.literal("null") {
		return nil, nil
	}
	*v = domain.Recorder{}
	return v, recorderObject.read(s, &[4]*string{&v.Issuer, &v.Subject, &v.TokenID, &v.ClientID}, anyOrder)
}

// evidenceDigests reads the array (null reads as empty: the canonical
// encoding writes [] for both).
func (s *scanner) evidenceDigests() ([]domain.EvidenceDigest, error) {
	if s.literal("null") {
		return nil, nil
	}
	if !s.consume('[') {
		return nil, errSyntax
	}
	var out []domain.EvidenceDigest
	if s.consume(']') {
		return out, nil
	}
	for {
		if !s.consume('{') {
			return nil, errSyntax
		}
		var d domain.EvidenceDigest
		err := s.fields(func(key []byte) error {
			var err error
			switch string(key) {
			case "algorithm":
				d.Algorithm, err = s.str()
			case "value":
				d.Value, err = s.str()
			case "label":
				d.Label, err = s.str()
			default:
				_, err = s.skip()
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		out = append(out, d)
		if s.consume(']') {
			return out, nil
		}
		if !s.consume(',') {
			return nil, errSyntax
		}
	}
}
