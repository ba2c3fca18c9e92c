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
