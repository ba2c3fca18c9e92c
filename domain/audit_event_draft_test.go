package domain

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

var testNow = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func validDraft() AuditEventDraft {
	return AuditEventDraft{
		ID:         uuid.MustParse("0193f3c4-0000-7000-8000-000000000001"),
		ProjectID:  "p1",
		Action:     "device.firmware.updated",
		OccurredAt: testNow.Add(-time.Minute),
		Subject:    Subject{Type: SubjectUser, ID: "u1", DisplayName: "Ada"},
		Resource:   Resource{Type: "device", ID: "d1"},
		Outcome:    OutcomeSuccess,
		Details:    json.RawMessage(`{"b": 1, "a": {"z": true, "y": [1, 2.50, "x"]}}`),
	}
}

func TestNormalizeAcceptsValidDraft(t *testing.T) {
	d := validDraft()
	d.Governance = &Governance{Reason: "maintenance"}
	d.OccurredAt = time.Date(2026, 11, 30, 13, 0, 0, 123456789, time.FixedZone("x", 3600))
	require.NoError(t, d.Normalize("", testNow))
	require.Equal(t, `{"a":{"y":[1,2.50,"x"],"z":true},"b":1}`, string(d.Details))
	require.Equal(t, RiskLow, d.Governance.Risk, "risk defaults to LOW")
	require.Equal(t, time.UTC, d.OccurredAt.Location())
	require.Equal(t, 123456000, d.OccurredAt.Nanosecond(), "truncated to microseconds")
}

func TestNormalizeRejects(t *testing.T) {
	for name, tc := range map[string]struct {
		mutate func(*AuditEventDraft)
		field  string
	}{
		"missing project":         {func(d *AuditEventDraft) { d.ProjectID = "" }, "projectId"},
		"upper-case action":       {func(d *AuditEventDraft) { d.Action = "Device.Updated" }, "action"},
		"single-segment action":   {func(d *AuditEventDraft) { d.Action = "login" }, "action"},
		"long action":             {func(d *AuditEventDraft) { d.Action = "a." + strings.Repeat("b", 200) }, "action"},
		"missing occurredAt":      {func(d *AuditEventDraft) { d.OccurredAt = time.Time{} }, "occurredAt"},
		"occurredAt far future":   {func(d *AuditEventDraft) { d.OccurredAt = testNow.Add(48 * time.Hour) }, "occurredAt"},
		"bad subject type":        {func(d *AuditEventDraft) { d.Subject.Type = "ROBOT" }, "subject.type"},
		"missing subject id":      {func(d *AuditEventDraft) { d.Subject.ID = "" }, "subject.id"},
		"control char subject id": {func(d *AuditEventDraft) { d.Subject.ID = "a\x00b" }, "subject.id"},
		"padded subject id":       {func(d *AuditEventDraft) { d.Subject.ID = " u1" }, "subject.id"},
		"long display name":       {func(d *AuditEventDraft) { d.Subject.DisplayName = strings.Repeat("x", MaxNameLength+1) }, "subject.displayName"},
		"invalid utf8":            {func(d *AuditEventDraft) { d.Subject.DisplayName = "\xff" }, "subject.displayName"},
		"bad resource type":       {func(d *AuditEventDraft) { d.Resource.Type = "1device" }, "resource.type"},
		"missing resource id":     {func(d *AuditEventDraft) { d.Resource.ID = "" }, "resource.id"},
		"bad outcome":             {func(d *AuditEventDraft) { d.Outcome = "MAYBE" }, "outcome"},
		"bad risk":                {func(d *AuditEventDraft) { d.Governance = &Governance{Risk: "EXTREME"} }, "governance.risk"},
		"bad trace id":            {func(d *AuditEventDraft) { d.Correlation = &Correlation{TraceID: "XYZ"} }, "correlation.traceId"},
		"too many digests": {func(d *AuditEventDraft) {
			d.EvidenceDigests = make([]EvidenceDigest, MaxEvidenceDigests+1)
		}, "evidenceDigests"},
		"bad digest algorithm": {func(d *AuditEventDraft) {
			d.EvidenceDigests = []EvidenceDigest{{Algorithm: "SHA 256", Value: "ab"}}
		}, "evidenceDigests[0].algorithm"},
		"details not object": {func(d *AuditEventDraft) { d.Details = json.RawMessage(`[1,2]`) }, "details"},
		"details invalid":    {func(d *AuditEventDraft) { d.Details = json.RawMessage(`{"a":`) }, "details"},
		"details trailing":   {func(d *AuditEventDraft) { d.Details = json.RawMessage(`{} {}`) }, "details"},
		"details too deep": {func(d *AuditEventDraft) {
			d.Details = json.RawMessage(strings.Repeat(`{"a":`, MaxDetailsDepth+1) + "1" + strings.Repeat("}", MaxDetailsDepth+1))
		}, "details"},
		"details too large": {func(d *AuditEventDraft) {
			d.Details = json.RawMessage(`{"a":"` + strings.Repeat("x", MaxDetailsBytes) + `"}`)
		}, "details"},
	} {
		t.Run(name, func(t *testing.T) {
			d := validDraft()
			tc.mutate(&d)
			err := d.Normalize("", testNow)
			var verr *ValidationError
			require.ErrorAs(t, err, &verr)
			require.Equal(t, tc.field, verr.Field)
		})
	}
}

func TestNormalizePrefixesPath(t *testing.T) {
	d := validDraft()
	d.Outcome = "NOPE"
	err := d.Normalize("events[7]", testNow)
	var verr *ValidationError
	require.ErrorAs(t, err, &verr)
	require.Equal(t, "events[7].outcome", verr.Field)
}

func TestCanonicalJSONIsIdempotentAndOrderInsensitive(t *testing.T) {
	a, err := CanonicalJSON(json.RawMessage(`{ "z": "<&>", "a": [ {"y":1,"x":2} ], "n": 1e2 }`))
	require.NoError(t, err)
	require.Equal(t, `{"a":[{"x":2,"y":1}],"n":1e2,"z":"<&>"}`, string(a))
	b, err := CanonicalJSON(a)
	require.NoError(t, err)
	require.Equal(t, a, b)
	empty, err := CanonicalJSON(nil)
	require.NoError(t, err)
	require.Equal(t, "{}", string(empty))
}

func TestFingerprintCoversContent(t *testing.T) {
	a, b := validDraft(), validDraft()
	require.NoError(t, a.Normalize("", testNow))
	b.Details = json.RawMessage(`{"a":{"y":[1,2.50,"x"],"z":true},"b":1}`) // same object, other spelling
	require.NoError(t, b.Normalize("", testNow))
	require.Equal(t, a.Fingerprint(), b.Fingerprint())
	b.Resource.ID = "d2"
	require.NotEqual(t, a.Fingerprint(), b.Fingerprint())
}

func TestActionPattern(t *testing.T) {
	exact, err := ParseActionPattern("f", "device.firmware.updated")
	require.NoError(t, err)
	require.True(t, exact.Matches("device.firmware.updated"))
	require.False(t, exact.Matches("device.firmware.updated.x"))

	prefix, err := ParseActionPattern("f", "device.*")
	require.NoError(t, err)
	require.True(t, prefix.Matches("device.firmware.updated"))
	require.False(t, prefix.Matches("devices.x"))
	require.Equal(t, "device.", prefix.Prefix())
	require.Equal(t, "device.*", prefix.String())

	for _, bad := range []string{"", "*", ".*", "Device.*", "device.*.x", "device..x"} {
		_, err := ParseActionPattern("f", bad)
		require.Error(t, err, bad)
	}
}
