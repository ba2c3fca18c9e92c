package store

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Statements run through queries.genericPlans use a generic plan from their
// first execution on a connection (plan_cache_mode = force_generic_plan for
// them alone). PostgreSQL's default (auto) plans a prepared statement's
// first five executions on a connection with custom plans, then compares a
// generic plan's estimated cost with theirs and keeps whichever is cheaper:
// a choice made on estimates, which the partitions' statistics move (a
// generic plan is costed over every partition, a custom one over the
// partitions it kept). The delivery job's statements are lookups by key
// whose plan is the same whatever their arguments: a primary-key lookup
// per id, in the partitions of the ids, which a generic plan finds when it
// starts ("Subplans Removed": FindAuditEventsByID by its recording bounds,
// the deliveries' statements by the ids' bounds, idBounds). So they take
// that plan at once, planned once per connection and after each
// invalidation of the cached plan (an ANALYZE of a table it reads), never
// per call (docs/benchmarks.md, "Plans of the delivery job (eighth
// session, branch plans)"). The pool's other statements (searches with
// optional filters, AuditEventRefs) keep the default and their custom
// plans.
//
// The setting is local to a transaction, never the connection's:
//
//   - On the pool, the statements go in one batch after
//     genericPlansForBatch: the batch is one implicit transaction, whose
//     end (its Sync) ends the setting. No extra round trip.
//   - In a transaction (txConn), genericPlansOn is queued before the first
//     such statement and genericPlansOff before the next other statement
//     (or River's use of the transaction); each travels with the
//     statement it precedes, in the same round trip.
const (
	genericPlansForBatch = `SELECT set_config('plan_cache_mode', 'force_generic_plan', true)`
	genericPlansOn       = `SET LOCAL plan_cache_mode = force_generic_plan`
	genericPlansOff      = `SET LOCAL plan_cache_mode TO DEFAULT`
)

// genericPlans returns q's statements running with generic plans (see
// genericPlansForBatch).
func (q *queries) genericPlans() queries {
	if c, ok := q.db.(*txConn); ok {
		return newQueries(genericTx{c})
	}
	return newQueries(genericPool{q.db})
}

// plans makes the statements sent from now on in the transaction run with
// generic plans (generic) or under the connection's plan_cache_mode,
// queuing the change when it is one.
func (c *txConn) plans(generic bool) {
	if c.generic == generic {
		return
	}
	c.generic = generic
	what, sql := "forcing generic plans", genericPlansOn
	if !generic {
		what, sql = "restoring the plan cache mode", genericPlansOff
	}
	c.queued = append(c.queued, queuedStatement{what: what, sql: sql})
}

// genericTx runs statements in a txConn's transaction with generic plans.
type genericTx struct{ c *txConn }

// Exec is txConn.Exec with generic plans.
func (g genericTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	g.c.plans(true)
	return g.c.exec(ctx, sql, args...)
}

// Query is txConn.Query with generic plans.
func (g genericTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	g.c.plans(true)
	return g.c.query(ctx, sql, args...)
}

// QueryRow is txConn.QueryRow with generic plans.
func (g genericTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	g.c.plans(true)
	return g.c.queryRow(ctx, sql, args...)
}

// SendBatch is txConn.SendBatch with generic plans.
func (g genericTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	g.c.plans(true)
	return g.c.sendBatch(ctx, b)
}

// CopyFrom is txConn.CopyFrom: a copy has no plan.
func (g genericTx) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	return g.c.CopyFrom(ctx, table, columns, src)
}

// genericPool runs statements on the pool (or any querier outside a
// transaction) with generic plans: each statement or batch is sent in one
// batch after genericPlansForBatch.
type genericPool struct{ db querier }

// send sends genericPlansForBatch then b's statements, and returns the
// results positioned at b's first statement.
func (g genericPool) send(ctx context.Context, b *pgx.Batch) (pgx.BatchResults, error) {
	gb := &pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, len(b.QueuedQueries)+1)}
	gb.Queue(genericPlansForBatch)
	gb.QueuedQueries = append(gb.QueuedQueries, b.QueuedQueries...)
	br := g.db.SendBatch(ctx, gb)
	if _, err := br.Exec(); err != nil {
		br.Close() //nolint:errcheck // err is the first error
		return nil, err
	}
	return br, nil
}

// one is a batch of sql alone.
func one(sql string, args []any) *pgx.Batch {
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	return b
}

// Exec runs sql with a generic plan.
func (g genericPool) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	br, err := g.send(ctx, one(sql, args))
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

// Query runs sql with a generic plan.
func (g genericPool) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	br, err := g.send(ctx, one(sql, args))
	if err != nil {
		return errRows{err}, err
	}
	rows, err := br.Query()
	return &batchRows{Rows: rows, br: br}, err
}

// QueryRow runs sql with a generic plan. The row must be scanned.
func (g genericPool) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	br, err := g.send(ctx, one(sql, args))
	if err != nil {
		return errRow{err}
	}
	return batchRow{row: br.QueryRow(), br: br}
}

// SendBatch sends b with generic plans.
func (g genericPool) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	br, err := g.send(ctx, b)
	if err != nil {
		return pgx.FailedBatchResults(b, err)
	}
	return br
}

// CopyFrom copies as the pool does: a copy has no plan.
func (g genericPool) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	return g.db.CopyFrom(ctx, table, columns, src)
}

var (
	_ querier = genericTx{}
	_ querier = genericPool{}
)
