package eventjson

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/domain"
)

// requireMarshalEqual checks Append and AppendWebhookPayload against json.Marshal, appending to
// a non-empty prefix to catch writes outside the appended part.
func requireMarshalEqual(t *testing.T, e *domain.AuditEvent) {
	t.Helper()
	want, wantErr := json.Marshal(e)
	prefix := []byte("prefix:")
	got, err := Append(prefix, e)
	if wantErr != nil {
		require.EqualError(t, err, wantErr.Error())
		require.Equal(t, "prefix:", string(got))
		got, err = AppendWebhookPayload([]byte("prefix:"), e)
		require.Error(t, err)
		require.Equal(t, "prefix:", string(got))
		return
	}
	require.NoError(t, err)
	require.Equal(t, "prefix:"+string(want), string(got))
	got, err = Append(nil, e)
	require.NoError(t, err)
	require.Equal(t, string(want), string(got))

	// The webhook body: the app's WebhookPayload shape.
	payload, err := json.Marshal(struct {
		Type      string             `json:"type"`
		Timestamp time.Time          `json:"timestamp"`
		Data      *domain.AuditEvent `json:"data"`
	}{e.Action, e.RecordedAt, e})
	require.NoError(t, err)
	got, err = AppendWebhookPayload(prefix, e)
	require.NoError(t, err)
	require.Equal(t, "prefix:"+string(payload), string(got))
}

func fullJSONEvent() domain.AuditEvent {
	return domain.AuditEvent{
		ID:         uuid.MustParse("0195f3a2-7c1e-7d4b-9a8f-0123456789ab"),
		TenantID:   "tenant-1",
		ProjectID:  "project-1",
		Sequence:   42,
		Action:     "device.config.update",
		OccurredAt: time.Date(2025, 3, 4, 5, 6, 7, 891011000, time.UTC),
		RecordedAt: time.Date(2025, 3, 4, 5, 6, 8, 0, time.UTC),
		Subject:    domain.Subject{Type: domain.SubjectUser, ID: "u-1", DisplayName: "Ada Lovelace"},
		Resource:   domain.Resource{Type: "device", ID: "d-1"},
		Outcome:    domain.OutcomeSuccess,
		Governance: &domain.Governance{Reason: "maintenance", Ticket: "OPS-1", Risk: domain.RiskHigh, ConfirmedBy: "u-2"},
		Correlation: &domain.Correlation{
			TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", RequestID: "req-1", CausationID: "cause-1",
		},
		EvidenceDigests: []domain.EvidenceDigest{
			{Algorithm: "sha256", Value: "abc", Label: "photo"},
			{Algorithm: "sha256", Value: "def", Label: "log"},
		},
		Details:          json.RawMessage(`{"after":{"mode":"eco"},"before":{"mode":"boost"},"n":[1,-2.5e3,0,true,null]}`),
		ChainHash:        domain.Hash{0xde, 0xad, 0xbe, 0xef, 31: 0xff},
		ChainVersion:     domain.ChainVersionRecordedBy,
		RecordedBy:       &domain.Recorder{Issuer: "https://idp.example/<a>", Subject: "svc \u2028 1", TokenID: "j-1", ClientID: "c\"1"},
		InputFingerprint: domain.Hash{1, 2, 3},
	}
}

func TestAppendMatchesMarshal(t *testing.T) {
	t.Parallel()
	berlin, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	odd := time.FixedZone("odd", -(3*3600 + 30*60 + 15))

	cases := map[string]func(e *domain.AuditEvent){
		"full":    func(*domain.AuditEvent) {},
		"minimal": func(e *domain.AuditEvent) { *e = domain.AuditEvent{} },
		"nil optionals": func(e *domain.AuditEvent) {
			e.Governance, e.Correlation, e.EvidenceDigests, e.Details = nil, nil, nil, nil
		},
		"v1 no recorder":    func(e *domain.AuditEvent) { e.ChainVersion, e.RecordedBy = domain.ChainVersionOriginal, nil },
		"empty recorder":    func(e *domain.AuditEvent) { e.RecordedBy = &domain.Recorder{} },
		"empty digests":     func(e *domain.AuditEvent) { e.EvidenceDigests = []domain.EvidenceDigest{} },
		"zero governance":   func(e *domain.AuditEvent) { e.Governance = &domain.Governance{} },
		"zero correlation":  func(e *domain.AuditEvent) { e.Correlation = &domain.Correlation{} },
		"max sequence":      func(e *domain.AuditEvent) { e.Sequence = math.MaxUint64 },
		"details null":      func(e *domain.AuditEvent) { e.Details = json.RawMessage(`null`) },
		"details empty":     func(e *domain.AuditEvent) { e.Details = json.RawMessage{} },
		"details scalar":    func(e *domain.AuditEvent) { e.Details = json.RawMessage(`"x"`) },
		"details number":    func(e *domain.AuditEvent) { e.Details = json.RawMessage(`-0.5E+10`) },
		"details empties":   func(e *domain.AuditEvent) { e.Details = json.RawMessage(`{"a":{},"b":[],"c":[{}]}`) },
		"details ws":        func(e *domain.AuditEvent) { e.Details = json.RawMessage(" { \"a\" :\t[1,\r\n 2] } \n") },
		"details ws in str": func(e *domain.AuditEvent) { e.Details = json.RawMessage(`{"a b":" c\td "}`) },
		"details html":      func(e *domain.AuditEvent) { e.Details = json.RawMessage(`{"h":"<b>&amp;</b>"}`) },
		"details html key":  func(e *domain.AuditEvent) { e.Details = json.RawMessage(`{"<":1}`) },
		"details 2028":      func(e *domain.AuditEvent) { e.Details = json.RawMessage("{\"s\":\"a\u2028b\u2029c\"}") },
		"details E2 other":  func(e *domain.AuditEvent) { e.Details = json.RawMessage("{\"s\":\"\u2026\u20ac\u2027\u202a\"}") },
		"details unicode":   func(e *domain.AuditEvent) { e.Details = json.RawMessage("{\"s\":\"Grüße 😀 日本\"}") },
		"details escapes": func(e *domain.AuditEvent) {
			e.Details = json.RawMessage(`{"s":"\"\\\/\b\f\n\r\t\u00e9\uD83D\uDE00\u003c"}`)
		},
		"details bad utf8": func(e *domain.AuditEvent) { e.Details = json.RawMessage("{\"s\":\"\xff\xfe\xe2\x80\"}") },
		"details deep": func(e *domain.AuditEvent) {
			e.Details = json.RawMessage(strings.Repeat("[", 500) + strings.Repeat("]", 500))
		},
		"details too deep": func(e *domain.AuditEvent) {
			e.Details = json.RawMessage(strings.Repeat("[", 10001) + strings.Repeat("]", 10001))
		},
		"invalid broken":       func(e *domain.AuditEvent) { e.Details = json.RawMessage(`{broken`) },
		"invalid trailing":     func(e *domain.AuditEvent) { e.Details = json.RawMessage(`{"a":1}x`) },
		"invalid two values":   func(e *domain.AuditEvent) { e.Details = json.RawMessage(`1 2`) },
		"invalid leading 0":    func(e *domain.AuditEvent) { e.Details = json.RawMessage(`[01]`) },
		"invalid number":       func(e *domain.AuditEvent) { e.Details = json.RawMessage(`[1.]`) },
		"invalid exponent":     func(e *domain.AuditEvent) { e.Details = json.RawMessage(`[1e]`) },
		"invalid minus":        func(e *domain.AuditEvent) { e.Details = json.RawMessage(`-`) },
		"invalid escape":       func(e *domain.AuditEvent) { e.Details = json.RawMessage(`["\x"]`) },
		"invalid u escape":     func(e *domain.AuditEvent) { e.Details = json.RawMessage(`["\u12g4"]`) },
		"invalid control":      func(e *domain.AuditEvent) { e.Details = json.RawMessage("[\"a\nb\"]") },
		"invalid comma":        func(e *domain.AuditEvent) { e.Details = json.RawMessage(`[1,]`) },
		"invalid obj comma":    func(e *domain.AuditEvent) { e.Details = json.RawMessage(`{"a":1,}`) },
		"invalid literal":      func(e *domain.AuditEvent) { e.Details = json.RawMessage(`tru`) },
		"invalid unterminated": func(e *domain.AuditEvent) { e.Details = json.RawMessage(`"abc`) },
		"invalid key":          func(e *domain.AuditEvent) { e.Details = json.RawMessage(`{1:2}`) },
		"strings special": func(e *domain.AuditEvent) {
			e.Action = "quote\" backslash\\ slash/ <script>&amp; \u2028\u2029"
			e.TenantID = "ctl\x00\x01\x07\b\f\n\r\t\x1f\x7f end"
			e.ProjectID = "bad\xffutf8\xc3\x28 and \xe2\x80 cut"
			e.Subject.DisplayName = "Émoji 😀 日本語 \U0010FFFF"
			e.Resource.ID = "\xed\xa0\x80 surrogate"
			e.Governance.Reason = "<>&'"
			e.EvidenceDigests[0].Label = "\u00a0\ufeff\ufffd"
		},
		"whole second": func(e *domain.AuditEvent) { e.OccurredAt = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC) },
		"millis":       func(e *domain.AuditEvent) { e.OccurredAt = time.Date(2025, 1, 1, 0, 0, 0, 120000000, time.UTC) },
		"nanos":        func(e *domain.AuditEvent) { e.RecordedAt = time.Date(2025, 1, 1, 0, 0, 0, 1, time.UTC) },
		"berlin":       func(e *domain.AuditEvent) { e.OccurredAt = e.OccurredAt.In(berlin) },
		"odd zone":     func(e *domain.AuditEvent) { e.RecordedAt = e.RecordedAt.In(odd) },
		"local":        func(e *domain.AuditEvent) { e.OccurredAt = e.OccurredAt.Local() },
		"monotonic":    func(e *domain.AuditEvent) { e.OccurredAt = time.Now() },
		"year 0":       func(e *domain.AuditEvent) { e.OccurredAt = time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC) },
		"year 9999":    func(e *domain.AuditEvent) { e.OccurredAt = time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC) },
		"year 10000":   func(e *domain.AuditEvent) { e.OccurredAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) },
		"year -1":      func(e *domain.AuditEvent) { e.RecordedAt = time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC) },
		"zone 24h":     func(e *domain.AuditEvent) { e.OccurredAt = e.OccurredAt.In(time.FixedZone("x", 24*3600)) },
		"zone 23h59m":  func(e *domain.AuditEvent) { e.OccurredAt = e.OccurredAt.In(time.FixedZone("x", 24*3600-60)) },
		"zone -23h59m": func(e *domain.AuditEvent) { e.OccurredAt = e.OccurredAt.In(time.FixedZone("x", -(24*3600 - 59))) },
		"zone -24h":    func(e *domain.AuditEvent) { e.OccurredAt = e.OccurredAt.In(time.FixedZone("x", -24*3600)) },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := fullJSONEvent()
			mutate(&e)
			requireMarshalEqual(t, &e)
		})
	}
}

func TestAppendMatchesMarshalRandomized(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	pool := []rune("aZ09 -_/.:\"\\<>&'\x00\x01\b\f\n\r\t\x1f\x7f\u00e9\u2028\u2029\u2026\ufffd\ufeff😀日")
	str := func() string {
		var sb strings.Builder
		for range rng.IntN(12) {
			if rng.IntN(20) == 0 {
				sb.WriteByte(byte(0x80 + rng.IntN(0x80))) // invalid UTF-8
				continue
			}
			sb.WriteRune(pool[rng.IntN(len(pool))])
		}
		return sb.String()
	}
	details := func() json.RawMessage {
		switch rng.IntN(6) {
		case 0:
			return nil
		case 1:
			v, err := json.Marshal(map[string]any{str(): str(), "n": rng.Float64() * 1e6, "l": []any{rng.IntN(100), str(), nil, true}})
			require.NoError(t, err)
			return v
		case 2:
			// Unescaped HTML and U+2028 in strings, as a non-HTML-safe
			// encoder would write them.
			var sb strings.Builder
			enc := json.NewEncoder(&sb)
			enc.SetEscapeHTML(false)
			require.NoError(t, enc.Encode(map[string]string{str(): str()}))
			return json.RawMessage(sb.String()) // ends in "\n"
		case 3:
			v, err := json.MarshalIndent(map[string]any{"a": []int{1, 2}, str(): map[string]string{"b": str()}}, "", "  ")
			require.NoError(t, err)
			return v
		case 4:
			return json.RawMessage(`{"s":"` + str() + `"}`) // often invalid
		default:
			v, err := domain.CanonicalJSON(json.RawMessage(`{"k":"v","z":[1,2,{"y":null}]}`))
			require.NoError(t, err)
			return v
		}
	}
	zones := []*time.Location{time.UTC, time.FixedZone("p", 5*3600+45*60), time.FixedZone("m", -8*3600)}
	tm := func() time.Time {
		t := time.Unix(rng.Int64N(4e9), 0).In(zones[rng.IntN(len(zones))])
		switch rng.IntN(3) {
		case 0:
			return t
		case 1:
			return t.Add(time.Duration(rng.IntN(1000)) * time.Millisecond)
		default:
			return t.Add(time.Duration(rng.IntN(1e9)))
		}
	}
	for range 2000 {
		e := domain.AuditEvent{
			TenantID: str(), ProjectID: str(), Sequence: rng.Uint64(), Action: str(),
			OccurredAt: tm(), RecordedAt: tm(),
			Subject:  domain.Subject{Type: domain.SubjectType(str()), ID: str(), DisplayName: str()},
			Resource: domain.Resource{Type: str(), ID: str()},
			Outcome:  domain.Outcome(str()),
			Details:  details(),
		}
		for i := range e.ID {
			e.ID[i] = byte(rng.Uint32())
			e.ChainHash[i] = byte(rng.Uint32())
		}
		if rng.IntN(2) == 0 {
			e.Governance = &domain.Governance{Reason: str(), Ticket: str(), Risk: domain.Risk(str()), ConfirmedBy: str()}
		}
		if rng.IntN(2) == 0 {
			e.Correlation = &domain.Correlation{TraceID: str(), RequestID: str(), CausationID: str()}
		}
		if n := rng.IntN(4); n > 0 {
			e.EvidenceDigests = make([]domain.EvidenceDigest, n-1)
			for i := range e.EvidenceDigests {
				e.EvidenceDigests[i] = domain.EvidenceDigest{Algorithm: str(), Value: str(), Label: str()}
			}
		}
		requireMarshalEqual(t, &e)
	}
}

func TestAppendDoesNotAllocate(t *testing.T) {
	e := fullJSONEvent()
	buf := make([]byte, 0, 4096)
	allocs := testing.AllocsPerRun(100, func() { buf, _ = Append(buf[:0], &e) })
	require.Zero(t, allocs)
}

func BenchmarkAppend(b *testing.B) {
	e := fullJSONEvent()
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf, _ = Append(buf[:0], &e)
	}
	b.SetBytes(int64(len(buf)))
}

func BenchmarkJSONMarshal(b *testing.B) {
	e := fullJSONEvent()
	var n int
	b.ReportAllocs()
	for b.Loop() {
		v, err := json.Marshal(&e)
		if err != nil {
			b.Fatal(err)
		}
		n = len(v)
	}
	b.SetBytes(int64(n))
}
