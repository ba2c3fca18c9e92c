// Package outbox is a transactional outbox for producers of audit events:
// a business change and its audit event commit together in the producer's
// own PostgreSQL, and a relay ships the event to Aether Audit afterwards.
//
//	outbox.Migrate(ctx, pool)                   // once: creates the table aether_outbox
//	tx, _ := pool.Begin(ctx)
//	tx.Exec(ctx, `UPDATE devices SET firmware = $1 WHERE id = $2`, "1.1", "dev-7")
//	outbox.Record(ctx, tx, client.EventInput{...}) // the event, in the same transaction
//	tx.Commit(ctx)                              // both, or neither
//
// A [Relay] (in the producer's process, or `aether relay` as a sidecar for
// producers in any language that insert rows with plain SQL) sends committed
// rows to Aether with [client.Client.RecordBatch], in batches, and deletes
// them only after Aether confirmed them.
//
// # Guarantees
//
//   - A transaction that rolls back leaves no event; one that commits leaves
//     its events, which reach Aether unless Aether refuses them (below).
//   - Exactly once by event id: every row has an id (a UUIDv7 when Record
//     is given none), and Aether answers a resent id with the event it
//     already stored. A crash of the relay or of Aether at any point
//     therefore resends at most rows Aether already has.
//   - Order: rows ship in the order of their transactions, as PostgreSQL
//     numbers them (the 64-bit transaction id, xid8), and within a
//     transaction in the order Record wrote them. A row ships only once
//     every transaction with a smaller id that is writing to the outbox has
//     ended, so a row never overtakes one that is written and not yet
//     committed; a transaction that only writes its first row later commits
//     later, and ships after what was shipped before. So a transaction that
//     committed before another began always ships first: per project,
//     Aether's sequence follows the producer's commits.
//   - One sender: relays on one table elect a leader with a PostgreSQL
//     session advisory lock; the others wait and take over within their
//     poll interval when the leader's connection ends.
//   - A row Aether refuses for its content (BAD_USER_INPUT,
//     IDEMPOTENCY_CONFLICT) is parked: it stays in the table with
//     parked_at and last_error set, and the rows after it go on. Any other
//     failure (network, Aether down, RATE_LIMITED, a token refused) is
//     retried with back-off, holding the order.
//
// The relay's metrics (Prometheus) are its backlog, parked rows, the age
// of the oldest waiting row, the lag from Record to Aether's confirmation,
// and counters of shipped and parked events and failed sends.
package outbox
