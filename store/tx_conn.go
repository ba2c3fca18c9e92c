package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// txConn is the connection of one InTx transaction, and what its
// statements run on. It saves round trips at both ends of the transaction:
//
//   - BEGIN is not sent on its own: it goes with the transaction's first
//     statement, in one pgx batch (pgx.Batch.BeginTx). A transaction that
//     starts with a QueryRow, a Query or an Exec (a command's
//     LockAuditHead, a delivery job's outcomes) opens and runs it in one
//     round trip.
//   - Statements whose only result is success or failure can be queued
//     (queue) rather than sent: they go with the next statement, in one
//     batch, or with the COMMIT. AppendAuditEvents queues its writes, so an
//     append's INSERT, head UPDATE and notification travel with the COMMIT.
//
// Every statement still runs in the transaction and in the order it was
// issued; a queued statement that fails fails the statement it went with
// (or the commit), so the caller sees the error there and the transaction
// rolls back, with nothing of it committed.
type txConn struct {
	conn *pgx.Conn
	// tx is the transaction once BEGIN has been sent, nil before.
	tx pgx.Tx
	// queued are the statements waiting to go with the next one.
	queued []queuedStatement
	// cancelTimer, when armed (cancelAfter), cancels the statement in
	// flight past the transaction's bound; cancelDone is closed once its
	// request has finished.
	cancelTimer *time.Timer
	cancelDone  chan struct{}
}

// queuedStatement is a statement queued on a txConn, and what it does (for
// its error).
type queuedStatement struct {
	what string
	sql  string
	args []any
}

// queue queues a statement whose result is only its success: it is sent
// with the next statement of the transaction, or with its COMMIT. Its error
// is reported, prefixed with what, by that statement or by the commit.
func (c *txConn) queue(what, sql string, args ...any) {
	c.queued = append(c.queued, queuedStatement{what: what, sql: sql, args: args})
}

// prelude returns a batch holding what must reach the server before the
// next statement: BEGIN if the transaction has not begun, then the queued
// statements. The caller adds its own statements and sends it with send.
func (c *txConn) prelude() *pgx.Batch {
	b := &pgx.Batch{}
	if c.tx == nil {
		b.BeginTx(pgx.TxOptions{})
	}
	for _, s := range c.queued {
		b.Queue(s.sql, s.args...)
	}
	return b
}

// send sends b, started by prelude, and reads the prelude's results. It
// returns b's results positioned at the caller's first statement, or the
// error of the prelude, after closing the results.
func (c *txConn) send(ctx context.Context, b *pgx.Batch) (pgx.BatchResults, error) {
	var br pgx.BatchResults
	begin := c.tx == nil
	if begin {
		br = c.conn.SendBatch(ctx, b)
		c.tx = br.Tx()
	} else {
		br = c.tx.SendBatch(ctx, b)
	}
	queued := c.queued
	c.queued = nil
	fail := func(err error) (pgx.BatchResults, error) {
		br.Close() //nolint:errcheck // err is the first error
		return nil, err
	}
	if begin {
		if _, err := br.Exec(); err != nil {
			return fail(fmt.Errorf("beginning transaction: %w", err))
		}
	}
	for _, s := range queued {
		if _, err := br.Exec(); err != nil {
			return fail(fmt.Errorf("%s: %w", s.what, err))
		}
	}
	return br, nil
}

// flush sends what prelude holds, if anything, on its own.
func (c *txConn) flush(ctx context.Context) error {
	if c.tx != nil && len(c.queued) == 0 {
		return nil
	}
	br, err := c.send(ctx, c.prelude())
	if err != nil {
		return err
	}
	return br.Close()
}

// pgxTx returns the transaction as a pgx.Tx, for code that needs one
// (River), after sending BEGIN and the queued statements.
func (c *txConn) pgxTx(ctx context.Context) (pgx.Tx, error) {
	if err := c.flush(ctx); err != nil {
		return nil, err
	}
	return c.tx, nil
}

// commit commits the transaction: with the queued statements, in one
// batch, when there are any; on its own otherwise. A transaction that never
// ran a statement has nothing to commit.
func (c *txConn) commit(ctx context.Context) error {
	if len(c.queued) == 0 {
		if c.tx == nil {
			return nil
		}
		return c.tx.Commit(ctx)
	}
	b := c.prelude()
	b.Queue("COMMIT")
	br, err := c.send(ctx, b)
	if err != nil {
		return err
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	// COMMIT of a failed transaction answers ROLLBACK, without an error.
	if tag.String() != "COMMIT" {
		return pgx.ErrTxCommitRollback
	}
	return nil
}

// rollback rolls back whatever is left open: a transaction that failed, or
// whose commit did not complete. Queued statements are dropped unsent.
func (c *txConn) rollback(ctx context.Context) {
	c.queued = nil
	if c.tx == nil || c.conn.IsClosed() || c.conn.PgConn().TxStatus() == 'I' {
		return
	}
	// On failure pgx closes the connection, which the pool then discards.
	c.tx.Rollback(ctx) //nolint:errcheck // the caller already has its error
}

// Exec runs sql in the transaction, with the prelude in the same round trip.
func (c *txConn) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if c.tx != nil && len(c.queued) == 0 {
		return c.tx.Exec(ctx, sql, args...)
	}
	b := c.prelude()
	b.Queue(sql, args...)
	br, err := c.send(ctx, b)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

// QueryRow runs sql in the transaction, with the prelude in the same round
// trip. The row must be scanned.
func (c *txConn) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if c.tx != nil && len(c.queued) == 0 {
		return c.tx.QueryRow(ctx, sql, args...)
	}
	b := c.prelude()
	b.Queue(sql, args...)
	br, err := c.send(ctx, b)
	if err != nil {
		return errRow{err}
	}
	return batchRow{row: br.QueryRow(), br: br}
}

// Query runs sql in the transaction, with the prelude in the same round
// trip.
func (c *txConn) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if c.tx != nil && len(c.queued) == 0 {
		return c.tx.Query(ctx, sql, args...)
	}
	b := c.prelude()
	b.Queue(sql, args...)
	br, err := c.send(ctx, b)
	if err != nil {
		return errRows{err}, err
	}
	rows, err := br.Query()
	return &batchRows{Rows: rows, br: br}, err
}

// CopyFrom copies rows in the transaction, after the prelude.
func (c *txConn) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	if err := c.flush(ctx); err != nil {
		return 0, err
	}
	return c.tx.CopyFrom(ctx, table, columns, src)
}

// SendBatch sends b in the transaction, after the prelude.
func (c *txConn) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if err := c.flush(ctx); err != nil {
		return pgx.FailedBatchResults(b, err)
	}
	return c.tx.SendBatch(ctx, b)
}

// batchRow is the row of a QueryRow sent in a batch: scanning it also
// closes the batch.
type batchRow struct {
	row pgx.Row
	br  pgx.BatchResults
}

func (r batchRow) Scan(dest ...any) error {
	err := r.row.Scan(dest...)
	if cerr := r.br.Close(); err == nil {
		err = cerr
	}
	return err
}

// batchRows are the rows of a Query sent in a batch: read to their end or
// closed, they also close the batch, whose error they then report.
type batchRows struct {
	pgx.Rows
	br  pgx.BatchResults
	err error
}

// Next is the rows' Next; after the last row it closes the batch.
func (r *batchRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.Close()
	return false
}

// Close closes the rows, then the batch.
func (r *batchRows) Close() {
	r.Rows.Close()
	if r.br != nil {
		r.err = r.br.Close()
		r.br = nil
	}
}

// Err is the rows' error, else the batch's.
func (r *batchRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.err
}

// errRow is a row whose query failed before it was sent.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// errRows are the rows of a query that failed before it was sent.
type errRows struct{ err error }

func (r errRows) Close()                                       {}
func (r errRows) Err() error                                   { return r.err }
func (r errRows) CommandTag() pgconn.CommandTag                { return pgconn.CommandTag{} }
func (r errRows) FieldDescriptions() []pgconn.FieldDescription { return nil }
func (r errRows) Next() bool                                   { return false }
func (r errRows) Scan(...any) error                            { return r.err }
func (r errRows) Values() ([]any, error)                       { return nil, r.err }
func (r errRows) RawValues() [][]byte                          { return nil }
func (r errRows) Conn() *pgx.Conn                              { return nil }
func (r errRows) TypeMap() *pgtype.Map                         { return pgtype.NewMap() }

var _ querier = (*txConn)(nil)
