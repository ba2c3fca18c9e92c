package app_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
)

// TestVisitAuditEventsIsTheSearchPage holds VisitAuditEvents to
// SearchAuditEvents: the same events (copied out during each call, since
// they borrow the row), page info and errors, in both orders, filtered,
// across page boundaries.
func TestVisitAuditEventsIsTheSearchPage(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	drafts := make([]domain.AuditEventDraft, 7)
	for i := range drafts {
		drafts[i] = draft("p1", "device.updated")
		if i%2 == 1 {
			drafts[i].Action = "user.login"
			drafts[i].Governance = &domain.Governance{Reason: "r", Risk: domain.RiskHigh}
			drafts[i].Details = json.RawMessage(`{"n":"\u0001é"}`)
		}
	}
	_, err := b.app.RecordAuditEvents(ctx, b.writer, app.RecordAuditEventsInput{Events: drafts})
	require.NoError(t, err)

	// A page as text: each event as JSON with its fingerprint and cursor,
	// then the page info.
	type textPage struct {
		Events      []string
		HasNextPage bool
		EndCursor   string
	}
	text := func(order domain.SortOrder, e *domain.AuditEvent) string {
		raw, err := json.Marshal(e)
		require.NoError(t, err)
		return string(raw) + " " + e.InputFingerprint.String() + " " + app.EncodeCursor(order, e.Sequence)
	}
	visit := func(in app.SearchAuditEventsInput) (textPage, error) {
		var page textPage
		info, err := b.app.VisitAuditEvents(ctx, b.reader, in, func(e *domain.AuditEvent) error {
			page.Events = append(page.Events, text(in.Order, e)) // e is only valid during the call
			return nil
		})
		page.HasNextPage, page.EndCursor = info.HasNextPage, info.EndCursor
		return page, err
	}
	search := func(in app.SearchAuditEventsInput) textPage {
		p, err := b.app.SearchAuditEvents(ctx, b.reader, in)
		require.NoError(t, err)
		page := textPage{HasNextPage: p.HasNextPage, EndCursor: p.EndCursor}
		for i := range p.Edges {
			require.Equal(t, app.EncodeCursor(in.Order, p.Edges[i].Event.Sequence), p.Edges[i].Cursor)
			page.Events = append(page.Events, text(in.Order, &p.Edges[i].Event))
		}
		return page
	}
	for _, order := range []domain.SortOrder{domain.OldestFirst, domain.NewestFirst} {
		for _, filter := range []app.AuditEventFilterInput{{}, {Action: "user.*"}} {
			in := app.SearchAuditEventsInput{ProjectID: "p1", First: ptr(2), Order: order, Filter: filter}
			pages := 0
			for {
				want := search(in)
				got, err := visit(in)
				require.NoError(t, err)
				require.Equal(t, want, got)
				require.NotEmpty(t, got.Events)
				pages++
				if !got.HasNextPage {
					break
				}
				in.After = got.EndCursor
			}
			require.Greater(t, pages, 1)
		}
	}

	empty, err := visit(app.SearchAuditEventsInput{ProjectID: "p1", Filter: app.AuditEventFilterInput{Action: "none.*"}})
	require.NoError(t, err)
	require.Equal(t, textPage{}, empty)

	_, err = visit(app.SearchAuditEventsInput{ProjectID: "p1", First: ptr(0)})
	require.Equal(t, app.CodeBadUserInput, app.ErrorOf(err).Code)
	_, err = visit(app.SearchAuditEventsInput{ProjectID: "p1", After: "not a cursor"})
	require.Equal(t, app.CodeBadUserInput, app.ErrorOf(err).Code)
}
