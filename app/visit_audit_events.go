package app

import (
	"context"

	"github.com/aetheriot/aether-audit/domain"
)

// AuditEventPageInfo is what a page of VisitAuditEvents tells besides its
// events.
type AuditEventPageInfo struct {
	HasNextPage bool
	// EndCursor is the cursor of the page's last event, "" for an empty
	// page.
	EndCursor string
}

// VisitAuditEvents is SearchAuditEvents for callers that write each event
// as it arrives (the GraphQL page's fast path): the same authorization,
// validation and page, but fn is called with each event of the page in
// order, straight from the database row, instead of a page of copies. The
// event fn gets, its strings and slices, are valid only during that call:
// fn must not keep them. An error of fn ends the visit and is returned.
func (a *App) VisitAuditEvents(ctx context.Context, id Identity, in SearchAuditEventsInput, fn func(e *domain.AuditEvent) error) (AuditEventPageInfo, error) {
	filter, page, err := searchPage(id, in)
	if err != nil {
		return AuditEventPageInfo{}, err
	}
	limit := page.Limit - 1
	var (
		info    AuditEventPageInfo
		n       int
		lastSeq uint64
	)
	err = a.store.VisitAuditEvents(ctx, id.TenantID, in.ProjectID, filter, page, func(e *domain.AuditEvent) error {
		if n == limit {
			info.HasNextPage = true
			return nil
		}
		n++
		lastSeq = e.Sequence
		return fn(e)
	})
	if err != nil {
		return AuditEventPageInfo{}, err
	}
	if n > 0 {
		info.EndCursor = EncodeCursor(in.Order, lastSeq)
	}
	return info, nil
}
