package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/aetheriot/aether-audit/client"
)

// NotifyChannel is the channel Record notifies (at commit) so that a
// waiting relay ships at once instead of at its next poll. Producers that
// write the table with plain SQL may run NOTIFY aether_outbox too.
const NotifyChannel = "aether_outbox"

// insertSQL writes one row and wakes the relay when the transaction
// commits (PostgreSQL folds the notifications of one transaction).
const insertSQL = `WITH row AS (INSERT INTO aether_outbox (id, event) VALUES ($1::uuid, $2::json) RETURNING 1)
SELECT pg_notify('aether_outbox', '') FROM row`

// Record writes event into the outbox inside the producer's transaction tx
// and returns its id: event.ID, or a new UUIDv7 when it is empty. The event
// reaches Aether after tx commits, and never if tx rolls back. Aether
// validates the event when the relay sends it; Record checks only that it
// names a project and an action, so that a mistake is caught in the
// producer's transaction rather than parked later.
func Record(ctx context.Context, tx pgx.Tx, event client.EventInput) (string, error) {
	if event.ProjectID == "" || event.Action == "" {
		return "", errors.New("outbox: an event needs a ProjectID and an Action")
	}
	if event.ID == "" {
		id, err := uuid.NewV7()
		if err != nil {
			return "", fmt.Errorf("outbox: generating an event id: %w", err)
		}
		event.ID = id.String()
	}
	if _, err := uuid.Parse(event.ID); err != nil {
		return "", fmt.Errorf("outbox: event id %q is not a UUID", event.ID)
	}
	body, err := json.Marshal(event)
	if err != nil {
		return "", fmt.Errorf("outbox: encoding the event: %w", err)
	}
	if _, err := tx.Exec(ctx, insertSQL, event.ID, string(body)); err != nil {
		return "", fmt.Errorf("outbox: recording the event: %w", err)
	}
	return event.ID, nil
}
