package main

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
)

const (
	// batchSize is the number of events per request and per baseline
	// transaction.
	batchSize = 500
	// batchClients is the number of concurrent batch writers on each side:
	// one ingest stream into one project.
	batchClients = 1
	// batchBodies is how many distinct request bodies our side cycles
	// through.
	batchBodies = 8
)

// recordBatchMutation records a batch and selects what an ingesting client
// needs back.
const recordBatchMutation = `mutation Record($input: RecordAuditEventsInput!) {
  recordAuditEvents(input: $input) { events { id sequence } }
}`

// runIngestBatch compares events/s of recordAuditEvents over HTTP (batches
// of batchSize) with pgx CopyFrom of the same rows, batchSize per
// transaction.
func runIngestBatch(ctx context.Context, e *env, opts options) ([]result, error) {
	oursProject := "ingest-batch-" + e.runID
	baseProject := oursProject + "-base"

	// Request bodies are encoded up front, so the client spends nothing
	// on encoding while measured; without ids, each send records new
	// events.
	bodies := make([][]byte, batchBodies)
	for i := range bodies {
		drafts := demoDrafts(uint64(i+1), oursProject, batchSize)
		inputs := make([]map[string]any, len(drafts))
		for j := range drafts {
			inputs[j] = eventInput(&drafts[j])
		}
		body, err := graphQLBody(recordBatchMutation, map[string]any{"input": map[string]any{"events": inputs}})
		if err != nil {
			return nil, err
		}
		bodies[i] = body
	}
	ours := newSide("ours", batchClients, func(ctx context.Context, w *worker) (int, error) {
		if _, err := e.graphQL(ctx, bodies[w.n%len(bodies)], &w.buf); err != nil {
			return 0, err
		}
		return batchSize, nil
	})

	// The baseline appends sealed copies of the same demo events to its
	// own project, each batch taking the next sequence range.
	templates, err := sealedEvents(1, baseProject, batchSize)
	if err != nil {
		return nil, err
	}
	pool, err := e.baselinePool(ctx, batchClients)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	// A later run in the same process (the scale scenario's) continues
	// the baseline project after its last event.
	var lastSeq atomic.Uint64
	var have int64
	if err := pool.QueryRow(ctx, `SELECT COALESCE(max(sequence), 0) FROM audit_events WHERE tenant_id = $1 AND project_id = $2`,
		benchTenant, baseProject).Scan(&have); err != nil {
		return nil, err
	}
	lastSeq.Store(uint64(have))
	base := newSide("baseline", batchClients, func(ctx context.Context, _ *worker) (int, error) {
		first := lastSeq.Add(batchSize) - batchSize + 1
		rows := make([][]any, batchSize)
		for i := range rows {
			ev := restamp(&templates[i], baseProject, first+uint64(i))
			rows[i] = rowValues(&ev)
		}
		tx, err := pool.Begin(ctx)
		if err != nil {
			return 0, err
		}
		defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // no-op after commit
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"audit_events"}, eventColumns, pgx.CopyFromRows(rows)); err != nil {
			return 0, err
		}
		return batchSize, tx.Commit(ctx)
	})

	o, b, err := compare(ctx, "ingest-batch", opts.duration, ours, base)
	if err != nil {
		return nil, err
	}
	note := fmt.Sprintf("%d client, %d events/request into one project; ours: GraphQL recordAuditEvents over HTTP (server-assigned ids); "+
		"baseline: BEGIN; COPY %d rows; COMMIT with pgx", batchClients, batchSize, batchSize)
	return []result{newResult("ingest-batch", o, b, note,
		throughput("events/s", o, b, 0.5),
		latency("p50 batch ms", 0.50, o, b, 0),
		latency("p99 batch ms", 0.99, o, b, 0),
	)}, nil
}
