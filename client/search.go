package client

import (
	"context"
	"iter"
	"time"
)

// Order is the order of a search: OLDEST_FIRST (the default) or
// NEWEST_FIRST.
type Order string

// The orders.
const (
	OldestFirst Order = "OLDEST_FIRST"
	NewestFirst Order = "NEWEST_FIRST"
)

// Filter narrows a search or a subscription; every condition given must
// hold (AuditEventFilter in docs/api.md, "Searching").
type Filter struct {
	// Action is an exact action, or a prefix written prefix.* (device.*).
	Action       string    `json:"action,omitempty"`
	SubjectID    string    `json:"subjectId,omitempty"`
	ResourceType string    `json:"resourceType,omitempty"`
	ResourceID   string    `json:"resourceId,omitempty"`
	Outcome      []Outcome `json:"outcome,omitempty"`
	// OccurredFrom is inclusive, OccurredTo exclusive.
	OccurredFrom *time.Time `json:"occurredFrom,omitempty"`
	OccurredTo   *time.Time `json:"occurredTo,omitempty"`
	// SequenceFrom and SequenceTo are inclusive; 0 means not given.
	SequenceFrom      uint64             `json:"sequenceFrom,omitempty,string"`
	SequenceTo        uint64             `json:"sequenceTo,omitempty,string"`
	RecordedBySubject string             `json:"recordedBySubject,omitempty"`
	Correlation       *CorrelationFilter `json:"correlation,omitempty"`
}

// CorrelationFilter matches exact correlation ids.
type CorrelationFilter struct {
	TraceID     string `json:"traceId,omitempty"`
	RequestID   string `json:"requestId,omitempty"`
	CausationID string `json:"causationId,omitempty"`
}

// SearchOptions shape a search.
type SearchOptions struct {
	Filter *Filter
	Order  Order
	// PageSize is the events per request, 1-500 (default 100).
	PageSize int
	// After is the cursor to start after (Page.EndCursor of an earlier
	// search with the same order and filter); "" starts at the beginning.
	After string
}

// Page is one page of a search.
type Page struct {
	Events      []Event
	HasNextPage bool
	// EndCursor is the cursor of the page's last event; "" on an empty
	// page.
	EndCursor string
}

const searchPage = `query($p: ID!, $f: AuditEventFilter, $first: Int, $after: String, $order: AuditOrder) {
auditEvents(projectId: $p, filter: $f, first: $first, after: $after, order: $order) {
edges { node { ` + eventFields + ` } } pageInfo { hasNextPage endCursor } } }`

// SearchPage reads one page of a project's events.
func (c *Client) SearchPage(ctx context.Context, projectID string, opts SearchOptions) (Page, error) {
	vars := map[string]any{"p": projectID, "first": opts.PageSize}
	if opts.PageSize == 0 {
		vars["first"] = 100
	}
	if opts.Filter != nil {
		vars["f"] = opts.Filter
	}
	if opts.After != "" {
		vars["after"] = opts.After
	}
	if opts.Order != "" {
		vars["order"] = opts.Order
	}
	var out struct {
		AuditEvents struct {
			Edges    []struct{ Node Event }
			PageInfo struct {
				HasNextPage bool
				EndCursor   *string
			}
		}
	}
	if err := c.do(ctx, query, searchPage, vars, &out); err != nil {
		return Page{}, err
	}
	p := Page{Events: make([]Event, len(out.AuditEvents.Edges)), HasNextPage: out.AuditEvents.PageInfo.HasNextPage}
	for i, e := range out.AuditEvents.Edges {
		p.Events[i] = e.Node
	}
	if out.AuditEvents.PageInfo.EndCursor != nil {
		p.EndCursor = *out.AuditEvents.PageInfo.EndCursor
	}
	return p, nil
}

// SearchPages iterates over the pages of a search, reading each when the
// loop asks for it; an error ends the iteration after yielding it. Pages
// are separate reads: events that commit during an oldest-first search
// appear in its later pages.
func (c *Client) SearchPages(ctx context.Context, projectID string, opts SearchOptions) iter.Seq2[Page, error] {
	return func(yield func(Page, error) bool) {
		for {
			page, err := c.SearchPage(ctx, projectID, opts)
			if err != nil {
				yield(Page{}, err)
				return
			}
			if !yield(page, nil) || !page.HasNextPage || page.EndCursor == "" {
				return
			}
			opts.After = page.EndCursor
		}
	}
}

// Search iterates over every event of a project that passes the filter, in
// the chosen order, page by page (SearchPages). An error ends the
// iteration after yielding it.
func (c *Client) Search(ctx context.Context, projectID string, opts SearchOptions) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		for page, err := range c.SearchPages(ctx, projectID, opts) {
			if err != nil {
				yield(Event{}, err)
				return
			}
			for _, e := range page.Events {
				if !yield(e, nil) {
					return
				}
			}
		}
	}
}
