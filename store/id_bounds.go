package store

import (
	"bytes"

	"github.com/google/uuid"
)

// idBounds returns the least and the greatest of ids in PostgreSQL's order
// of uuids (their bytes'); with no ids, the whole range.
//
// The delivery statements that look deliveries up by a uuid[] of ids also
// bound id by them (id BETWEEN lo AND hi): webhook_deliveries is
// partitioned by ranges of id (migration 00024), and PostgreSQL prunes
// partitions by a comparison with a parameter when a generic plan starts
// ("Subplans Removed"), but not by id = ANY($ids): a generic plan of that
// alone reads every partition, the DEFAULT one included, for every id.
// PostgreSQL's default plan cache mode settles on a statement's generic
// plan after five custom ones on a connection when its estimated cost is
// no higher, so the bounds keep that plan on the partitions of a job's
// ids: one, but for a job across a month's end.
func idBounds(ids []uuid.UUID) (lo, hi uuid.UUID) {
	if len(ids) == 0 {
		return uuid.Nil, uuid.Max
	}
	lo, hi = ids[0], ids[0]
	for _, id := range ids[1:] {
		if bytes.Compare(id[:], lo[:]) < 0 {
			lo = id
		}
		if bytes.Compare(id[:], hi[:]) > 0 {
			hi = id
		}
	}
	return lo, hi
}
