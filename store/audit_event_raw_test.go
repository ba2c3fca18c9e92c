package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/eventjson"
	"github.com/aetheriot/aether-audit/store"
	"github.com/aetheriot/aether-audit/store/storetest"
)

// TestStreamAuditEventsByTimeDecodesRowsExactly holds the export stream's
// wire decoder (borrowed, allocation-free events) equal to the regular scan:
// every streamed event, encoded at once, matches the JSON of the same event
// read by GetAuditEvent, field for field, over events using every optional
// part.
func TestStreamAuditEventsByTimeDecodesRowsExactly(t *testing.T) {
	pool := storetest.NewPool(t)
	st := store.New(pool)
	a := app.New(st, app.Config{})
	id := app.Identity{Subject: "svc", TenantID: "t1", ProjectIDs: []string{"p1"}, Permissions: []app.Permission{app.PermissionAuditWrite}}
	base := time.Date(2026, 11, 2, 3, 4, 5, 123456000, time.UTC)
	var drafts []domain.AuditEventDraft
	for i := range 40 {
		d := domain.AuditEventDraft{ProjectID: "p1", Action: "device.firmware.updated", OccurredAt: base.Add(time.Duration(i) * time.Minute),
			Subject:  domain.Subject{Type: domain.SubjectService, ID: fmt.Sprintf("svc-%d", i), DisplayName: "Ünïcode ✓ <b>&"},
			Resource: domain.Resource{Type: "device", ID: fmt.Sprintf("d\"%d\\", i)}, Outcome: domain.OutcomeSuccess,
			Details: json.RawMessage(fmt.Sprintf(`{"i":%d,"s":"line\nbreak \u2028 <tag>","n":[1,2.5,{"a":null}]}`, i))}
		if i%2 == 0 {
			d.Governance = &domain.Governance{Reason: "change window", Ticket: "CHG-1", Risk: domain.RiskHigh, ConfirmedBy: "ops"}
		}
		if i%3 == 0 {
			d.Correlation = &domain.Correlation{TraceID: "0123456789abcdef0123456789abcdef", RequestID: fmt.Sprintf("r%d", i)}
		}
		if i%4 == 0 {
			d.EvidenceDigests = []domain.EvidenceDigest{{Algorithm: "sha-256", Value: "abc", Label: "firmware"}}
		}
		drafts = append(drafts, d)
	}
	_, err := a.RecordAuditEvents(context.Background(), id, app.RecordAuditEventsInput{Events: drafts})
	require.NoError(t, err)

	ctx := context.Background()
	var streamed [][]byte
	seen := map[*domain.AuditEvent]bool{}
	err = st.StreamAuditEventsByTime(ctx, "t1", "p1", base, base.Add(time.Hour), nil, func(e *domain.AuditEvent) error {
		seen[e] = true
		b, err := eventjson.Append(nil, e)
		if err == nil {
			streamed = append(streamed, b)
		}
		return err
	})
	require.NoError(t, err)
	require.Len(t, streamed, len(drafts))
	require.Len(t, seen, 1, "every row was decoded from the wire into the one reused event")
	for i, got := range streamed {
		var probe struct {
			Sequence uint64 `json:"sequence,string"`
		}
		require.NoError(t, json.Unmarshal(got, &probe))
		want, err := st.GetAuditEventBySequence(ctx, "t1", "p1", probe.Sequence)
		require.NoError(t, err)
		wantJSON, err := json.Marshal(want)
		require.NoError(t, err)
		require.Equal(t, string(wantJSON), string(got), "row %d", i)
	}
}

// TestFilteredExportStreamsMatchTheSearch: a filtered export stream (by
// time and by sequence) decodes its rows from the wire like the unfiltered
// one and holds exactly what the search gives for the same filter within
// the same range (they share their conditions), never widened by the
// filter's own bounds.
func TestFilteredExportStreamsMatchTheSearch(t *testing.T) {
	pool := storetest.NewPool(t)
	st := store.New(pool)
	a := app.New(st, app.Config{})
	id := app.Identity{Subject: "svc", TenantID: "t1", ProjectIDs: []string{"p1"}, Permissions: []app.Permission{app.PermissionAuditWrite}}
	base := time.Date(2026, 11, 2, 3, 4, 5, 0, time.UTC)
	var drafts []domain.AuditEventDraft
	for i := range 30 {
		d := domain.AuditEventDraft{ProjectID: "p1", Action: []string{"device.updated", "user.login"}[i%2],
			OccurredAt: base.Add(time.Duration(i) * time.Minute), Subject: domain.Subject{Type: domain.SubjectUser, ID: "u1"},
			Resource: domain.Resource{Type: "device", ID: "d1"}, Outcome: domain.OutcomeSuccess, Details: json.RawMessage(`{}`)}
		if i%3 == 0 {
			d.Correlation = &domain.Correlation{RequestID: "r-1"}
		}
		drafts = append(drafts, d)
	}
	_, err := a.RecordAuditEvents(context.Background(), id, app.RecordAuditEventsInput{Events: drafts})
	require.NoError(t, err)
	ctx := context.Background()
	pattern, err := domain.ParseActionPattern("filter.action", "device.*")
	require.NoError(t, err)
	wideFrom, five, twenty := base.Add(-time.Hour), uint64(5), uint64(20)
	f := domain.AuditEventFilter{Action: &pattern, RequestID: "r-1", OccurredFrom: &wideFrom}

	search := func(extra domain.AuditEventFilter) []uint64 {
		evs, err := st.SearchAuditEvents(ctx, "t1", "p1", extra, domain.AuditEventPage{Limit: 100})
		require.NoError(t, err)
		var out []uint64
		for _, e := range evs {
			out = append(out, e.Sequence)
		}
		return out
	}
	collect := func(stream func(fn func(*domain.AuditEvent) error) error) ([]uint64, int) {
		var out []uint64
		seen := map[*domain.AuditEvent]bool{}
		require.NoError(t, stream(func(e *domain.AuditEvent) error {
			seen[e] = true
			out = append(out, e.Sequence)
			return nil
		}))
		return out, len(seen)
	}

	from, to := base.Add(10*time.Minute), base.Add(25*time.Minute)
	byTime, decoders := collect(func(fn func(*domain.AuditEvent) error) error {
		return st.StreamAuditEventsByTime(ctx, "t1", "p1", from, to, &f, fn)
	})
	narrowed := f
	narrowed.OccurredFrom, narrowed.OccurredTo = &from, &to
	require.Equal(t, search(narrowed), byTime)
	require.Equal(t, []uint64{13, 19, 25}, byTime, "device.* with r-1 (i = 12, 18, 24), not the filter's wider from")
	require.Equal(t, 1, decoders, "decoded from the wire into the one reused event")

	bySeq, _ := collect(func(fn func(*domain.AuditEvent) error) error {
		return st.StreamAuditEventsBySequence(ctx, "t1", "p1", five, twenty, &f, fn)
	})
	narrowed = f
	narrowed.SequenceFrom, narrowed.SequenceTo = &five, &twenty
	require.Equal(t, search(narrowed), bySeq)
	require.Equal(t, []uint64{7, 13, 19}, bySeq)
}
