package outbox

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
)

// Table is the outbox table Migrate creates, in the connection's
// search_path.
const Table = "aether_outbox"

// Execer runs a statement: a *pgx.Conn, a *pgxpool.Pool or a pgx.Tx.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// schemaSQL creates the table. Its columns:
//
//   - position: the order rows were written in;
//   - txid: the writing transaction (pg_current_xact_id()), the shipping
//     order, and the horizon below which every transaction has ended;
//   - id: the event's id, its idempotency key in Aether;
//   - event: the RecordAuditEventInput as JSON (the json type keeps the
//     producer's bytes, so details keep their numbers as written);
//   - created_at: when the row was written, for the lag metrics;
//   - parked_at, last_error: set when Aether refused the event.
const schemaSQL = `
SELECT pg_advisory_xact_lock(hashtext('aether_outbox.migrate'));
CREATE TABLE IF NOT EXISTS aether_outbox (
    position   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    txid       xid8 NOT NULL DEFAULT pg_current_xact_id(),
    id         uuid NOT NULL DEFAULT gen_random_uuid(),
    event      json NOT NULL,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    parked_at  timestamptz,
    last_error text
);
CREATE INDEX IF NOT EXISTS aether_outbox_ready ON aether_outbox (txid, position) WHERE parked_at IS NULL;
`

// Migrate creates the outbox table and its index in the producer's
// database if they do not exist. It is safe to run at every start and from
// several processes at once: the statements run as one transaction (the
// caller's, when conn is a pgx.Tx) under a transaction-scoped advisory
// lock.
func Migrate(ctx context.Context, conn Execer) error {
	// Without arguments pgx sends the statements in one simple-protocol
	// message, which PostgreSQL runs as one implicit transaction.
	if _, err := conn.Exec(ctx, schemaSQL); err != nil {
		return fmt.Errorf("outbox: migrating: %w", err)
	}
	return nil
}
