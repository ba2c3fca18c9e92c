package app_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
)

func searchSeqs(t *testing.T, b *testBundle, in app.SearchAuditEventsInput) []uint64 {
	t.Helper()
	page, err := b.app.SearchAuditEvents(context.Background(), b.reader, in)
	require.NoError(t, err)
	out := []uint64{}
	for _, e := range page.Edges {
		out = append(out, e.Event.Sequence)
	}
	return out
}

func ptr[T any](v T) *T { return &v }

func TestSearchAuditEventsFilters(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	mk := func(action, subject, resType, resID string, outcome domain.Outcome, at time.Duration) domain.AuditEventDraft {
		d := draft("p1", action)
		d.Subject.ID = subject
		d.Resource = domain.Resource{Type: resType, ID: resID}
		d.Outcome = outcome
		d.OccurredAt = occurred.Add(at)
		return d
	}
	_, err := b.app.RecordAuditEvents(ctx, b.writer, app.RecordAuditEventsInput{Events: []domain.AuditEventDraft{
		mk("device.firmware.updated", "u1", "device", "d1", domain.OutcomeSuccess, 0),         // 1
		mk("device.registered", "u2", "device", "d2", domain.OutcomeFailure, time.Hour),       // 2
		mk("user.login", "u1", "session", "s1", domain.OutcomeDenied, 2*time.Hour),            // 3
		mk("devices.other", "u3", "device", "d1", domain.OutcomeSuccess, 3*time.Hour),         // 4
		mk("device.firmware.updated", "u2", "device", "d2", domain.OutcomeError, 4*time.Hour), // 5
	}})
	require.NoError(t, err)
	_, err = b.app.RecordAuditEvent(ctx, b.writer, draft("p2", "device.registered"), "")
	require.NoError(t, err)

	for name, tc := range map[string]struct {
		filter app.AuditEventFilterInput
		want   []uint64
	}{
		"none":            {app.AuditEventFilterInput{}, []uint64{1, 2, 3, 4, 5}},
		"exact action":    {app.AuditEventFilterInput{Action: "device.firmware.updated"}, []uint64{1, 5}},
		"prefix action":   {app.AuditEventFilterInput{Action: "device.*"}, []uint64{1, 2, 5}},
		"deeper prefix":   {app.AuditEventFilterInput{Action: "device.firmware.*"}, []uint64{1, 5}},
		"subject":         {app.AuditEventFilterInput{SubjectID: "u1"}, []uint64{1, 3}},
		"resource type":   {app.AuditEventFilterInput{ResourceType: "device"}, []uint64{1, 2, 4, 5}},
		"resource id":     {app.AuditEventFilterInput{ResourceType: "device", ResourceID: "d1"}, []uint64{1, 4}},
		"outcomes":        {app.AuditEventFilterInput{Outcomes: []domain.Outcome{domain.OutcomeDenied, domain.OutcomeError}}, []uint64{3, 5}},
		"occurred range":  {app.AuditEventFilterInput{OccurredFrom: ptr(occurred.Add(time.Hour)), OccurredTo: ptr(occurred.Add(3 * time.Hour))}, []uint64{2, 3}},
		"sequence range":  {app.AuditEventFilterInput{SequenceFrom: ptr(uint64(2)), SequenceTo: ptr(uint64(4))}, []uint64{2, 3, 4}},
		"combined":        {app.AuditEventFilterInput{Action: "device.*", SubjectID: "u2", Outcomes: []domain.Outcome{domain.OutcomeError}}, []uint64{5}},
		"nothing matches": {app.AuditEventFilterInput{SubjectID: "nobody"}, []uint64{}},
	} {
		t.Run(name, func(t *testing.T) {
			require.Equal(t, tc.want, searchSeqs(t, b, app.SearchAuditEventsInput{ProjectID: "p1", Filter: tc.filter}))
			// Newest first returns the same set reversed.
			rev := searchSeqs(t, b, app.SearchAuditEventsInput{ProjectID: "p1", Filter: tc.filter, Order: domain.NewestFirst})
			for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
				rev[i], rev[j] = rev[j], rev[i]
			}
			require.Equal(t, tc.want, rev)
		})
	}
}

func TestSearchAuditEventsPagination(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	recordN(t, b, "p1", 7)

	for _, order := range []domain.SortOrder{domain.OldestFirst, domain.NewestFirst} {
		var got []uint64
		after := ""
		pages := 0
		for {
			page, err := b.app.SearchAuditEvents(ctx, b.reader, app.SearchAuditEventsInput{ProjectID: "p1", First: ptr(3), After: after, Order: order})
			require.NoError(t, err)
			pages++
			for _, e := range page.Edges {
				got = append(got, e.Event.Sequence)
			}
			if !page.HasNextPage {
				break
			}
			require.Equal(t, page.Edges[len(page.Edges)-1].Cursor, page.EndCursor)
			after = page.EndCursor
		}
		require.Equal(t, 3, pages)
		if order == domain.OldestFirst {
			require.Equal(t, []uint64{1, 2, 3, 4, 5, 6, 7}, got)
		} else {
			require.Equal(t, []uint64{7, 6, 5, 4, 3, 2, 1}, got)
		}
	}

	// A cursor of one order is refused by the other.
	page, err := b.app.SearchAuditEvents(ctx, b.reader, app.SearchAuditEventsInput{ProjectID: "p1", First: ptr(2)})
	require.NoError(t, err)
	_, err = b.app.SearchAuditEvents(ctx, b.reader, app.SearchAuditEventsInput{ProjectID: "p1", After: page.EndCursor, Order: domain.NewestFirst})
	requireCode(t, err, app.CodeBadUserInput)

	// AfterSequence resumes like REST and SSE do.
	require.Equal(t, []uint64{6, 7}, searchSeqs(t, b, app.SearchAuditEventsInput{ProjectID: "p1", AfterSequence: ptr(uint64(5))}))
}

func TestSearchAuditEventsRejectsBadInput(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	for name, in := range map[string]app.SearchAuditEventsInput{
		"malformed cursor":    {ProjectID: "p1", After: "not-a-cursor"},
		"forged cursor":       {ProjectID: "p1", After: "YWUxOng6MQ"},
		"page too large":      {ProjectID: "p1", First: ptr(app.MaxPageSize + 1)},
		"page zero":           {ProjectID: "p1", First: ptr(0)},
		"bad action pattern":  {ProjectID: "p1", Filter: app.AuditEventFilterInput{Action: "Device.*"}},
		"bad outcome":         {ProjectID: "p1", Filter: app.AuditEventFilterInput{Outcomes: []domain.Outcome{"MAYBE"}}},
		"inverted time range": {ProjectID: "p1", Filter: app.AuditEventFilterInput{OccurredFrom: ptr(occurred), OccurredTo: ptr(occurred)}},
		"inverted seq range":  {ProjectID: "p1", Filter: app.AuditEventFilterInput{SequenceFrom: ptr(uint64(5)), SequenceTo: ptr(uint64(4))}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := b.app.SearchAuditEvents(ctx, b.reader, in)
			requireCode(t, err, app.CodeBadUserInput)
		})
	}
}

func TestSearchAuditEventsScoping(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	recordN(t, b, "p1", 2)

	otherTenant := b.reader
	otherTenant.TenantID = "t2"
	page, err := b.app.SearchAuditEvents(ctx, otherTenant, app.SearchAuditEventsInput{ProjectID: "p1"})
	require.NoError(t, err)
	require.Empty(t, page.Edges, "another tenant's project of the same name is empty")

	onlyP2 := b.reader
	onlyP2.ProjectIDs = []string{"p2"}
	_, err = b.app.SearchAuditEvents(ctx, onlyP2, app.SearchAuditEventsInput{ProjectID: "p1"})
	requireCode(t, err, app.CodeNotFound)
	_, err = b.app.SearchAuditEvents(ctx, b.writer, app.SearchAuditEventsInput{ProjectID: "p1"})
	requireCode(t, err, app.CodeForbidden)
}

func TestCursorRoundTrip(t *testing.T) {
	for _, order := range []domain.SortOrder{domain.OldestFirst, domain.NewestFirst} {
		for _, seq := range []uint64{0, 1, 1 << 40, ^uint64(0)} {
			gotOrder, gotSeq, err := app.DecodeCursor(app.EncodeCursor(order, seq))
			require.NoError(t, err)
			require.Equal(t, order, gotOrder)
			require.Equal(t, seq, gotSeq)
		}
	}
}

func TestSearchAuditEventsDefaultAndMaxPageSize(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	for range 2 {
		recordN(t, b, "p1", app.MaxRecordBatch/2+10)
	}
	page, err := b.app.SearchAuditEvents(ctx, b.reader, app.SearchAuditEventsInput{ProjectID: "p1"})
	require.NoError(t, err)
	require.Len(t, page.Edges, app.DefaultPageSize)
	require.Equal(t, 50, app.DefaultPageSize)
	require.True(t, page.HasNextPage)

	page, err = b.app.SearchAuditEvents(ctx, b.reader, app.SearchAuditEventsInput{ProjectID: "p1", First: ptr(app.MaxPageSize)})
	require.NoError(t, err)
	require.Len(t, page.Edges, 500)
	require.True(t, page.HasNextPage)
}
