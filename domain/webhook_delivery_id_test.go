package domain

import (
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

func TestFanoutDeliveryID(t *testing.T) {
	sub, ev := uuid.New(), uuid.New()
	at := time.Date(2026, 11, 30, 23, 59, 59, 999_000_000, time.UTC)
	id := FanoutDeliveryID(sub, ev, at)
	if id != FanoutDeliveryID(sub, ev, at) {
		t.Fatal("the same subscription and event must get the same id")
	}
	if id == FanoutDeliveryID(uuid.New(), ev, at) || id == FanoutDeliveryID(sub, uuid.New(), at) {
		t.Fatal("another subscription or event must get another id")
	}
	if id.Version() != 7 || id.Variant() != uuid.RFC4122 {
		t.Fatalf("%s is not a UUIDv7", id)
	}
	sec, nsec := id.Time().UnixTime()
	if got := time.Unix(sec, nsec).UTC(); !got.Equal(at) {
		t.Fatalf("time %s, want %s", got, at)
	}
	// The month's bound (the smallest UUIDv7 of its first millisecond)
	// orders it before the next month's deliveries.
	next := FanoutDeliveryID(sub, ev, at.Add(time.Millisecond))
	if id.String() >= next.String() {
		t.Fatalf("%s does not sort before %s", id, next)
	}
}

// TestWebhookDeliveryIdempotencyKeyInOneAllocation: the webhook-id is
// "msg_" and the delivery id's hex digits without dashes, as it always was
// (receivers deduplicate on it), built in one allocation.
func TestWebhookDeliveryIdempotencyKeyInOneAllocation(t *testing.T) {
	for range 100 {
		id := uuid.New()
		require.Equal(t, "msg_"+strings.ReplaceAll(id.String(), "-", ""), WebhookDeliveryIdempotencyKey(id))
	}
	require.Equal(t, "msg_0190a1b2c3d4e5f60718293a4b5c6d7e",
		WebhookDeliveryIdempotencyKey(uuid.MustParse("0190a1b2-c3d4-e5f6-0718-293a4b5c6d7e")))
	id := uuid.New()
	var key string
	require.Equal(t, 1.0, testing.AllocsPerRun(100, func() { key = WebhookDeliveryIdempotencyKey(id) }), key)
}
