package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
)

// MaxBatch is the most events one RecordBatch call may carry.
const MaxBatch = 1000

const recordOne = `mutation($in: RecordAuditEventInput!) { recordAuditEvent(input: $in) { event { ` + eventFields + ` } } }`

const recordMany = `mutation($in: RecordAuditEventsInput!) { recordAuditEvents(input: $in) { events { ` + eventFields + ` } } }`

const recordManyReceipts = `mutation($in: RecordAuditEventsInput!) { recordAuditEvents(input: $in) { events { id projectId sequence } } }`

// Receipt is Aether's confirmation of one recorded event: its id and its
// place in its project.
type Receipt struct {
	ID        string `json:"id"`
	ProjectID string `json:"projectId"`
	Sequence  uint64 `json:"sequence,string"`
}

// Record appends one event and returns it as stored. An event without an
// ID gets a UUIDv7 first, so that retries (see the package documentation)
// and repeats of the call with the same input return the stored event
// instead of recording it twice. The same ID with other content fails with
// IDEMPOTENCY_CONFLICT.
func (c *Client) Record(ctx context.Context, ev EventInput) (Event, error) {
	if err := withID(&ev); err != nil {
		return Event{}, err
	}
	var out struct {
		RecordAuditEvent struct{ Event Event }
	}
	if err := c.do(ctx, idempotentCommand, recordOne, map[string]any{"in": ev}, &out); err != nil {
		return Event{}, err
	}
	return out.RecordAuditEvent.Event, nil
}

// RecordBatch appends 1 to MaxBatch events in one transaction, all or
// nothing, and returns them as stored, in input order. Events without an ID
// get a UUIDv7 first (the caller's slice is not changed), which makes the
// call idempotent as Record is. A batch may span several projects; within a
// project the events get consecutive sequences in input order. When one
// event is refused, nothing is stored and the [*Error] names it in Field
// (e.g. "events[3].action").
func (c *Client) RecordBatch(ctx context.Context, events []EventInput) ([]Event, error) {
	if len(events) == 0 {
		return nil, errors.New("client: RecordBatch needs at least one event")
	}
	in := make([]EventInput, len(events))
	copy(in, events)
	for i := range in {
		if err := withID(&in[i]); err != nil {
			return nil, err
		}
	}
	var out struct {
		RecordAuditEvents struct{ Events []Event }
	}
	vars := map[string]any{"in": map[string]any{"events": in}}
	if err := c.do(ctx, idempotentCommand, recordMany, vars, &out); err != nil {
		return nil, err
	}
	if len(out.RecordAuditEvents.Events) != len(in) {
		return nil, fmt.Errorf("client: the server returned %d events for %d", len(out.RecordAuditEvents.Events), len(in))
	}
	return out.RecordAuditEvents.Events, nil
}

// RecordBatchReceipts is RecordBatch for producers that need only Aether's
// confirmation (such as the outbox relay): the same call, with the same
// retries and idempotency, answered with a Receipt per event instead of
// the stored events, which is less for the server to write and for the
// client to read.
func (c *Client) RecordBatchReceipts(ctx context.Context, events []EventInput) ([]Receipt, error) {
	if len(events) == 0 {
		return nil, errors.New("client: RecordBatchReceipts needs at least one event")
	}
	in := make([]EventInput, len(events))
	copy(in, events)
	for i := range in {
		if err := withID(&in[i]); err != nil {
			return nil, err
		}
	}
	var out struct {
		RecordAuditEvents struct{ Events []Receipt }
	}
	vars := map[string]any{"in": map[string]any{"events": in}}
	if err := c.do(ctx, idempotentCommand, recordManyReceipts, vars, &out); err != nil {
		return nil, err
	}
	if len(out.RecordAuditEvents.Events) != len(in) {
		return nil, fmt.Errorf("client: the server returned %d receipts for %d events", len(out.RecordAuditEvents.Events), len(in))
	}
	return out.RecordAuditEvents.Events, nil
}

// withID gives ev a UUIDv7 when it has no ID.
func withID(ev *EventInput) error {
	if ev.ID != "" {
		return nil
	}
	id, err := uuid.NewV7()
	if err != nil {
		return fmt.Errorf("client: generating an event id: %w", err)
	}
	ev.ID = id.String()
	return nil
}
