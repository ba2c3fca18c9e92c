package store

import (
	"context"
	"time"
)

// boundCancelDelay is how long past a bounded transaction's bound
// (Tx.BoundAppendWaits) the statement it has in flight is canceled. The
// bound's lock_timeout ends the transaction's first lock wait at the bound
// itself, cleanly, and its answer normally arrives within this delay; the
// cancel request ends every other wait: a second lock wait (lock_timeout
// times each wait from its own start), or one while PostgreSQL prepares a
// statement that pgx sends ahead of the batch's BEGIN and settings.
const boundCancelDelay = 250 * time.Millisecond

// cancelRequestTimeout bounds the cancel request's own connection.
const cancelRequestTimeout = 2 * time.Second

// cancelAfter arms a timer that, after d, asks PostgreSQL to cancel
// whatever statement the connection runs then (a cancel request on a
// connection of its own). A transaction still waiting then fails with
// query_canceled, and PostgreSQL skips the rest of its batch, COMMIT
// included: nothing of it is written. A second call leaves the first
// timer armed.
func (c *txConn) cancelAfter(d time.Duration) {
	if c.cancelTimer != nil {
		return
	}
	done := make(chan struct{})
	pg := c.conn.PgConn()
	c.cancelDone = done
	c.cancelTimer = time.AfterFunc(d, func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(context.Background(), cancelRequestTimeout)
		defer cancel()
		pg.CancelRequest(ctx) //nolint:errcheck // the transaction's own answer tells what happened
	})
}

// settle disarms the cancel timer once the transaction is over, and
// reports whether it had fired, after waiting for its request to finish.
// A connection whose cancel request fired must not serve another
// transaction: PostgreSQL signals the backend asynchronously, and a signal
// arriving late would cancel that transaction's statement.
func (c *txConn) settle() (fired bool) {
	if c.cancelTimer == nil || c.cancelTimer.Stop() {
		return false
	}
	<-c.cancelDone
	return true
}
