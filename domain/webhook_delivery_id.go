package domain

import (
	"crypto/sha256"
	"encoding/binary"
	"time"

	"github.com/google/uuid"
)

// FanoutDeliveryID is the id of the fan-out's delivery of an event to a
// subscription: a UUIDv7 whose time is the event's recording (at, to the
// millisecond) and whose other 74 bits come from a SHA-256 of the
// subscription and event ids. The same (subscription, event) always gets
// the same id, so the primary key of webhook_deliveries, a table
// partitioned by id (migration 00024), keeps the fan-out exactly-once: a
// unique index on (subscription, event) cannot span its partitions. A
// delivery shares the month of its event, so it is kept as long as
// deliveries of that month are. Replays get fresh ids.
func FanoutDeliveryID(subscriptionID, eventID uuid.UUID, at time.Time) uuid.UUID {
	h := sha256.New()
	h.Write(subscriptionID[:])
	h.Write(eventID[:])
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return uuidV7(at, sum[:10])
}

// UUIDv7At is a UUIDv7 of the millisecond of at with random bits from
// rand (at least 10 bytes; only 74 bits are used).
func UUIDv7At(at time.Time, rand []byte) uuid.UUID { return uuidV7(at, rand) }

func uuidV7(at time.Time, rand []byte) uuid.UUID {
	var id uuid.UUID
	var ms [8]byte
	binary.BigEndian.PutUint64(ms[:], uint64(at.UnixMilli()))
	copy(id[:6], ms[2:])
	copy(id[6:], rand[:10])
	id[6] = 0x70 | id[6]&0x0f // version 7
	id[8] = 0x80 | id[8]&0x3f // variant RFC 9562
	return id
}
