package verify

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/eventjson"
)

// layoutLines returns export lines (without "\n") as eventjson.Append
// writes them, of varied events: v1 and v2, with and without governance,
// correlation, evidence, recordedBy, escapes and non-ASCII text.
func layoutLines(t *testing.T) [][]byte {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	details := []string{`{"a":1,"b":"x"}`, `{"html":"<b>&</b>","sep":"a\u2028b","n":1.50}`, `{"é":"ü","z":[1,{"y":null}]}`, `{}`}
	var lines [][]byte
	for i := range 24 {
		d := domain.AuditEventDraft{
			ID: uuid.NewSHA1(uuid.NameSpaceOID, []byte(strconv.Itoa(i))), ProjectID: "p-1", Action: "device.firmware.updated",
			OccurredAt: now.Add(-time.Duration(i) * time.Millisecond),
			Subject:    domain.Subject{Type: domain.SubjectUser, ID: "u-" + strconv.Itoa(i), DisplayName: "Ada \"<Lovelace>\" ü"},
			Resource:   domain.Resource{Type: "device", ID: "dev-" + strconv.Itoa(i)},
			Outcome:    domain.OutcomeSuccess,
			Details:    json.RawMessage(details[i%len(details)]),
		}
		if i%3 == 0 {
			d.Governance = &domain.Governance{Reason: "maintenance", Ticket: "CHG-1"}
		}
		if i%4 == 1 {
			d.Correlation = &domain.Correlation{TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", RequestID: "r-1"}
		}
		if i%5 == 2 {
			d.EvidenceDigests = []domain.EvidenceDigest{{Algorithm: "sha256", Value: "ab12", Label: "fw"}, {Algorithm: "a", Value: "b"}}
		}
		if i%2 == 0 {
			d.RecordedBy = &domain.Recorder{Issuer: "https://idp", Subject: "svc", TokenID: "j", ClientID: "c"}
		}
		require.NoError(t, d.Normalize("", now))
		events, _ := domain.ChainHead{Sequence: uint64(i)}.Append("acme", []domain.AuditEventDraft{d}, now)
		if i%6 == 5 {
			events[0].ChainVersion, events[0].RecordedBy = domain.ChainVersionOriginal, nil
		}
		b, err := eventjson.Append(nil, &events[0])
		require.NoError(t, err)
		lines = append(lines, b)
	}
	return lines
}

// parseLayout reads the lines eventjson.Append writes, as parseAny does;
// and on lines changed at random it either declines or agrees with
// parseAny, which then finds no problem.
func TestParseLayoutAgreesWithParseAny(t *testing.T) {
	lines := layoutLines(t)
	var fast, slow line
	for _, b := range lines {
		require.True(t, parseLayout(b, &fast), "%s", b)
		require.NoError(t, parseAny(b, &slow))
		require.True(t, reflect.DeepEqual(fast, slow), "%s", b)
	}
	rng := rand.New(rand.NewPCG(13, 14))
	edits := []string{" ", "\\", `"`, ",", "}", "{", "x", "0", "\n", `,"extra":1`, `"id":"x",`, "\u00e9", "\xff"}
	declined := 0
	for range 100_000 {
		b := bytes.Clone(lines[rng.IntN(len(lines))])
		at := rng.IntN(len(b))
		switch rng.IntN(3) {
		case 0:
			b = append(b[:at:at], append([]byte(edits[rng.IntN(len(edits))]), b[at:]...)...)
		case 1:
			b = append(b[:at:at], b[at+1:]...)
		default:
			b[at] = edits[rng.IntN(len(edits))][0]
		}
		errAny := parseAny(b, &slow)
		if !parseLayout(b, &fast) {
			declined++
			continue
		}
		if errAny != nil || !reflect.DeepEqual(fast, slow) {
			t.Fatalf("%s: parseLayout read it, parseAny: %v", b, errAny)
		}
	}
	t.Logf("%d of 100000 changed lines left to parseAny", declined)
}

// The nested objects' readers read what their Any forms read, and stop at
// the same place, on the layouts eventjson.Append writes and on 100k
// randomly changed ones.
func TestNestedLayoutsAgreeWithAny(t *testing.T) {
	type reader func(s *scanner) (any, error)
	readers := []struct {
		texts     []string
		fast, any reader
	}{
		{[]string{`{"type":"USER","id":"u-1","displayName":"Ada \"<L>\" ü"}`, `{"type":"SERVICE","id":"g","displayName":""}`},
			func(s *scanner) (any, error) { return s.subject(false) }, func(s *scanner) (any, error) { return s.subject(true) }},
		{[]string{`{"type":"device","id":"dev-1"}`},
			func(s *scanner) (any, error) { return s.resource(false) }, func(s *scanner) (any, error) { return s.resource(true) }},
		{[]string{`{"reason":"r","ticket":"CHG-1","risk":"LOW","confirmedBy":""}`, `null`},
			func(s *scanner) (any, error) { return s.governance(false) }, func(s *scanner) (any, error) { return s.governance(true) }},
		{[]string{`{"traceId":"4bf92f3577b34da6a3ce929d0e0e4736","requestId":"r\n","causationId":""}`, `null`},
			func(s *scanner) (any, error) { return s.correlation(false) }, func(s *scanner) (any, error) { return s.correlation(true) }},
		{[]string{`{"issuer":"https://idp/","subject":"svc","tokenId":"j","clientId":"c"}`, `null`},
			func(s *scanner) (any, error) { return s.recorder(new(domain.Recorder), false) },
			func(s *scanner) (any, error) { return s.recorder(new(domain.Recorder), true) }},
	}
	rng := rand.New(rand.NewPCG(15, 16))
	edits := []string{" ", "\\", `"`, ",", "}", "{", ":", "x", "\u00e9", "\xff", `,"x":1`, `"id":"y",`, "null"}
	for i := range 100_000 {
		r := readers[i%len(readers)]
		b := []byte(r.texts[rng.IntN(len(r.texts))] + `,"next":1}`)
		if i >= len(readers)*2 {
			at := rng.IntN(len(b))
			switch rng.IntN(3) {
			case 0:
				b = append(b[:at:at], append([]byte(edits[rng.IntN(len(edits))]), b[at:]...)...)
			case 1:
				b = append(b[:at:at], b[at+1:]...)
			default:
				b[at] = edits[rng.IntN(len(edits))][0]
			}
		}
		fs, as := scanner{b: b}, scanner{b: b}
		fv, ferr := r.fast(&fs)
		av, aerr := r.any(&as)
		if !reflect.DeepEqual(fv, av) || (ferr == nil) != (aerr == nil) || (ferr == nil && fs.i != as.i) {
			t.Fatalf("%s: %#v %v at %d; Any: %#v %v at %d", b, fv, ferr, fs.i, av, aerr, as.i)
		}
	}
}
