package domain

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// FuzzCanonicalJSON feeds arbitrary bytes to CanonicalJSON, the check and
// normal form of an audit event's details: it never panics; what it
// accepts comes out as a JSON object of at most MaxDetailsBytes bytes of
// valid UTF-8, nested at most MaxDetailsDepth deep, that is its own
// canonical form and means the same as the input. The seed corpus is in
// testdata/fuzz/FuzzCanonicalJSON.
func FuzzCanonicalJSON(f *testing.F) {
	f.Add([]byte(`{"b":[1,2.50,{"c":null}],"a":"\u00e9"}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		out, err := CanonicalJSON(raw)
		if err != nil {
			require.Nil(t, out)
			return
		}
		require.LessOrEqual(t, len(out), MaxDetailsBytes)
		require.True(t, utf8.Valid(out), "%q", out)
		require.True(t, json.Valid(out), "%q", out)
		var got, want any
		require.NoError(t, decodeNumbers(out, &got))
		require.IsType(t, map[string]any{}, got)
		require.LessOrEqual(t, depth(got), MaxDetailsDepth)
		if len(bytes.TrimSpace(raw)) > 0 {
			require.NoError(t, decodeNumbers(raw, &want))
			require.Equal(t, want, got, "canonical form of %q means something else: %q", raw, out)
		}
		again, err := CanonicalJSON(out)
		require.NoError(t, err)
		require.Equal(t, string(out), string(again), "not idempotent")
	})
}

func decodeNumbers(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return dec.Decode(v)
}

// FuzzAuditEventDraft normalizes a draft built from arbitrary text fields
// and details: Normalize never panics, refuses with a *ValidationError
// naming a field of the draft, and accepts only text PostgreSQL can store
// (valid UTF-8 without NUL) within the documented limits; a normalized
// draft normalizes again to itself.
func FuzzAuditEventDraft(f *testing.F) {
	f.Add("p1", "device.reboot", "user-1", "Ada", "device", "dev-1", "maintenance", "req-1", "sha256", "abc", []byte(`{"n":1}`), int64(1767225600))
	now := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, project, action, subjectID, displayName, resourceType, resourceID, reason, requestID,
		algorithm, digest string, details []byte, occurredAt int64) {
		d := AuditEventDraft{
			ProjectID:       project,
			Action:          action,
			OccurredAt:      time.Unix(occurredAt, 0),
			Subject:         Subject{Type: SubjectUser, ID: subjectID, DisplayName: displayName},
			Resource:        Resource{Type: resourceType, ID: resourceID},
			Outcome:         OutcomeSuccess,
			Governance:      &Governance{Reason: reason},
			Correlation:     &Correlation{RequestID: requestID},
			EvidenceDigests: []EvidenceDigest{{Algorithm: algorithm, Value: digest}},
			Details:         details,
		}
		err := d.Normalize("events[0]", now)
		if err != nil {
			var verr *ValidationError
			require.True(t, errors.As(err, &verr), "%T %v", err, err)
			require.True(t, strings.HasPrefix(verr.Field, "events[0]."), "field %q", verr.Field)
			require.NotEmpty(t, verr.Message)
			return
		}
		for _, s := range []string{d.ProjectID, d.Action, d.Subject.ID, d.Subject.DisplayName, d.Resource.Type, d.Resource.ID,
			d.Governance.Reason, d.EvidenceDigests[0].Algorithm, d.EvidenceDigests[0].Value, string(d.Details)} {
			require.True(t, utf8.ValidString(s), "accepted %q", s)
			require.NotContains(t, s, "\x00")
		}
		if d.Correlation != nil {
			require.True(t, utf8.ValidString(d.Correlation.RequestID))
			require.NotContains(t, d.Correlation.RequestID, "\x00")
		}
		require.LessOrEqual(t, len(d.Details), MaxDetailsBytes)
		fp := d.Fingerprint()
		again := d
		require.NoError(t, again.Normalize("events[0]", now))
		require.Equal(t, fp, again.Fingerprint(), "normalizing twice changed the draft")
	})
}
