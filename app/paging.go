package app

import (
	"encoding/base64"
	"fmt"

	"github.com/google/uuid"
)

// parseID reads a GraphQL ID that must be a UUID; a malformed one is simply
// not found (it cannot name anything).
func parseID(s string, notFound error) (uuid.UUID, error) {
	u, err := uuid.Parse(s)
	if err != nil {
		return uuid.Nil, notFound
	}
	return u, nil
}

// idPage reads first/after of a list of records keyed by UUID: a page size
// (default DefaultPageSize, at most MaxWebhookPageSize) and the id after
// which the page starts.
func idPage(first *int, after string) (int, uuid.UUID, error) {
	limit, err := pageSize(first)
	if err != nil {
		return 0, uuid.Nil, err
	}
	if after == "" {
		return limit, uuid.Nil, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(after)
	if err != nil {
		return 0, uuid.Nil, badInput("after", "is not a cursor of this list")
	}
	id, err := uuid.FromBytes(raw)
	if err != nil {
		return 0, uuid.Nil, badInput("after", "is not a cursor of this list")
	}
	return limit, id, nil
}

// pageSize reads first of a list: DefaultPageSize when nil, else 1 to
// MaxWebhookPageSize.
func pageSize(first *int) (int, error) {
	if first == nil {
		return DefaultPageSize, nil
	}
	if *first < 1 || *first > MaxWebhookPageSize {
		return 0, badInput("first", fmt.Sprintf("must be between 1 and %d", MaxWebhookPageSize))
	}
	return *first, nil
}

// IDCursor is the opaque cursor of a record keyed by UUID (webhook
// subscriptions and deliveries, exports) in its list.
func IDCursor(id uuid.UUID) string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// Page is one page of a list: its items and whether more follow.
type Page[T any] struct {
	Items       []T
	HasNextPage bool
}

// pageOf trims a result fetched with limit+1 rows into a page.
func pageOf[T any](items []T, limit int) Page[T] {
	if len(items) > limit {
		return Page[T]{Items: items[:limit], HasNextPage: true}
	}
	return Page[T]{Items: items}
}
