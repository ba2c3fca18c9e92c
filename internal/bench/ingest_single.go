package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
)

const (
	// singleClients is the number of concurrent clients on each side.
	singleClients = 8
	// singleBodies is how many distinct request bodies each project's
	// clients cycle through.
	singleBodies = 64
)

// recordOneMutation records one event and selects what a client needs back.
const recordOneMutation = `mutation Record($input: RecordAuditEventInput!) {
  recordAuditEvent(input: $input) { event { id sequence } }
}`

// insertOneSQL inserts one audit_events row.
var insertOneSQL = func() string {
	params := make([]string, len(eventColumns))
	for i := range params {
		params[i] = "$" + strconv.Itoa(i+1)
	}
	return "INSERT INTO audit_events (" + eventColumnList + ") VALUES (" + strings.Join(params, ", ") + ")"
}()

// singleTarget is each row's least events/s ratio (issue 17: 0.75 for
// ingest-single; none for the 8-project row).
var singleTarget = map[string]float64{"ingest-single": 0.75}

// runIngestSingle compares events/s of recordAuditEvent (one event per
// request) from singleClients clients writing to one project, the hot path
// of a busy project.
func runIngestSingle(ctx context.Context, e *env, opts options) ([]result, error) {
	return ingestSingle(ctx, e, opts, "ingest-single", 1)
}

// runIngestSingle8Proj is runIngestSingle with each client writing to a
// project of its own, so that no two requests wait on the same chain head.
func runIngestSingle8Proj(ctx context.Context, e *env, opts options) ([]result, error) {
	return ingestSingle(ctx, e, opts, "ingest-single-8proj", singleClients)
}

// ingestSingle runs the single-event ingest comparison with the clients
// spread over the given number of projects: ours posts recordAuditEvent
// over HTTP; the baseline runs BEGIN; INSERT one row; COMMIT per event on
// singleClients pgx connections.
func ingestSingle(ctx context.Context, e *env, opts options, name string, projects int) ([]result, error) {
	bodies := make([][][]byte, projects)
	for p := range projects {
		project := fmt.Sprintf("%s-%s-%d", name, e.runID, p)
		drafts := demoDrafts(uint64(p+1), project, singleBodies)
		for i := range drafts {
			body, err := graphQLBody(recordOneMutation, map[string]any{"input": eventInput(&drafts[i])})
			if err != nil {
				return nil, err
			}
			bodies[p] = append(bodies[p], body)
		}
	}
	ours := newSide("ours", singleClients, func(ctx context.Context, w *worker) (int, error) {
		mine := bodies[w.id%projects]
		if _, err := e.graphQL(ctx, mine[w.n%len(mine)], &w.buf); err != nil {
			return 0, err
		}
		return 1, nil
	})

	templates, err := sealedEvents(2, "template", singleBodies)
	if err != nil {
		return nil, err
	}
	baseProjects := make([]string, projects)
	nextSeq := make([]atomic.Uint64, projects)
	for p := range baseProjects {
		baseProjects[p] = fmt.Sprintf("%s-%s-%d-base", name, e.runID, p)
	}
	pool, err := e.baselinePool(ctx, singleClients)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	base := newSide("baseline", singleClients, func(ctx context.Context, w *worker) (int, error) {
		p := w.id % projects
		ev := restamp(&templates[w.n%len(templates)], baseProjects[p], nextSeq[p].Add(1))
		tx, err := pool.Begin(ctx)
		if err != nil {
			return 0, err
		}
		defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // no-op after commit
		if _, err := tx.Exec(ctx, insertOneSQL, rowValues(&ev)...); err != nil {
			return 0, err
		}
		return 1, tx.Commit(ctx)
	})

	o, b, err := compare(ctx, name, opts.duration, ours, base)
	if err != nil {
		return nil, err
	}
	note := fmt.Sprintf("%d clients on %d project(s); ours: GraphQL recordAuditEvent over HTTP, one event per request; "+
		"baseline: BEGIN; INSERT 1 row; COMMIT with pgx on %d connections", singleClients, projects, singleClients)
	return []result{newResult(name, o, b, note,
		throughput("events/s", o, b, singleTarget[name]),
		latency("p50 ms", 0.50, o, b, 0),
		latency("p99 ms", 0.99, o, b, 0),
	)}, nil
}
