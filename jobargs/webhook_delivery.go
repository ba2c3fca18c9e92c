package jobargs

import (
	"encoding/hex"
	"fmt"

	"github.com/google/uuid"
)

// WebhookDeliveryArgs asks for one attempt of each of up to 100 deliveries
// (app's maxDeliveryBatch) to one destination: the first attempts of a
// fan-out's new deliveries (batched, so that their intents and outcomes are
// written with one statement each), or one delivery's retry, redrive or
// resend. Attempts[i] is the attempt number the job is for of its i-th
// delivery (1 when absent): a delivery found in another state is left
// alone.
//
// Deliveries holds the deliveries' ids and their events' ids as one string
// of hex digits (64 per delivery: its id, then its event's id), not as JSON
// arrays: River indexes job arguments with GIN, one index entry per array
// element, written again on every state change of the job (inserted,
// running, completed), which cost PostgreSQL more than the job's own
// statements. Jobs enqueued before that change carry the ids in
// LegacyDeliveryIDs and LegacyEventIDs instead, and still run.
type WebhookDeliveryArgs struct {
	TenantID          string      `json:"tenant_id"`
	DestinationID     uuid.UUID   `json:"destination_id"`
	Deliveries        string      `json:"deliveries,omitempty"`
	LegacyDeliveryIDs []uuid.UUID `json:"delivery_ids,omitempty"`
	LegacyEventIDs    []uuid.UUID `json:"event_ids,omitempty"`
	Attempts          []int       `json:"attempts,omitempty"`
}

// Kind names the job.
func (WebhookDeliveryArgs) Kind() string { return "webhook_delivery" }

// packedDeliveryLen is the length of one delivery in
// WebhookDeliveryArgs.Deliveries.
const packedDeliveryLen = 64

// SetDeliveries sets the job's deliveries to n deliveries, the i-th of
// which has the ids ids(i) returns, packed in one allocation.
func (args *WebhookDeliveryArgs) SetDeliveries(n int, ids func(i int) (delivery, event uuid.UUID)) {
	b := make([]byte, n*packedDeliveryLen)
	for i := range n {
		delivery, event := ids(i)
		p := b[i*packedDeliveryLen:]
		hex.Encode(p[:32], delivery[:])
		hex.Encode(p[32:packedDeliveryLen], event[:])
	}
	args.Deliveries = string(b)
}

// Len is the number of deliveries the job is for.
func (args WebhookDeliveryArgs) Len() int {
	if args.Deliveries == "" {
		return len(args.LegacyDeliveryIDs)
	}
	return len(args.Deliveries) / packedDeliveryLen
}

// IDs returns the ids of the job's deliveries and of their events, in
// order; an error if the arguments are malformed.
func (args WebhookDeliveryArgs) IDs() (deliveries, events []uuid.UUID, err error) {
	if args.Deliveries == "" {
		if len(args.LegacyEventIDs) != len(args.LegacyDeliveryIDs) {
			return nil, nil, fmt.Errorf("webhook delivery job of %d deliveries and %d events", len(args.LegacyDeliveryIDs), len(args.LegacyEventIDs))
		}
		return args.LegacyDeliveryIDs, args.LegacyEventIDs, nil
	}
	if len(args.Deliveries)%packedDeliveryLen != 0 {
		return nil, nil, fmt.Errorf("webhook delivery job: deliveries of %d characters", len(args.Deliveries))
	}
	n := len(args.Deliveries) / packedDeliveryLen
	deliveries, events = make([]uuid.UUID, n), make([]uuid.UUID, n)
	for i := range n {
		p := args.Deliveries[i*packedDeliveryLen:]
		if _, err := hex.Decode(deliveries[i][:], []byte(p[:32])); err != nil {
			return nil, nil, fmt.Errorf("webhook delivery job: %w", err)
		}
		if _, err := hex.Decode(events[i][:], []byte(p[32:packedDeliveryLen])); err != nil {
			return nil, nil, fmt.Errorf("webhook delivery job: %w", err)
		}
	}
	return deliveries, events, nil
}

// Attempt is the attempt number the job is for of its i-th delivery.
func (args WebhookDeliveryArgs) Attempt(i int) int {
	if i < len(args.Attempts) {
		return args.Attempts[i]
	}
	return 1
}
