package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/store"
)

const (
	// queryProject is the project of tenant bench that holds seedTarget
	// events; it is seeded once and reused by later runs.
	// (bench-1m-v2: its events carry recordedBy, which the filtered row
	// selects on; the earlier bench-1m predates it.)
	queryProject = "bench-1m-v2"
	// seedTarget is the number of events queryProject must hold.
	seedTarget = 1_000_000
	// seedBatch is the number of events per seeding transaction.
	seedBatch = app.MaxRecordBatch
	// seedWorkers is the number of concurrent seeding goroutines.
	seedWorkers = 3
	// queryClients is the number of concurrent readers on each side.
	queryClients = 8
	// pageSize is the number of events per page.
	pageSize = 100
)

// pageQuery reads one page with every field of the event.
const pageQuery = `query Page($projectId: ID!, $after: String) {
  auditEvents(projectId: $projectId, first: 100, after: $after) {
    edges {
      cursor
      node {
        id tenantId projectId sequence action occurredAt recordedAt
        subject { type id displayName }
        resource { type id }
        outcome
        governance { reason ticket risk confirmedBy }
        correlation { traceId requestId causationId }
        evidenceDigests { algorithm value label }
        details
        chainHash
        chainVersion
        recordedBy { issuer subject tokenId clientId }
      }
    }
    pageInfo { hasNextPage endCursor }
  }
}`

// filteredPageQuery is pageQuery filtered by who recorded the events.
var filteredPageQuery = strings.Replace(pageQuery,
	"auditEvents(projectId: $projectId, first: 100, after: $after)",
	`auditEvents(projectId: $projectId, first: 100, after: $after, filter: {recordedBySubject: "`+seedSubject+`"})`, 1)

// seedSubject is the token subject that records the seeded events.
const seedSubject = "bench-seed"

// pageSQL is the baseline's page: the same keyset query our store runs for
// an unfiltered oldest-first page (one extra row tells whether a next page
// exists).
var pageSQL = "SELECT " + eventColumnList + ` FROM audit_events
	WHERE tenant_id = $1 AND project_id = $2 AND sequence > $3 ORDER BY sequence LIMIT ` + strconv.Itoa(pageSize+1)

// filteredPageSQL is the store's query for the filtered page.
var filteredPageSQL = "SELECT " + eventColumnList + ` FROM audit_events
	WHERE tenant_id = $1 AND project_id = $2 AND recorded_by_subject = $4 AND sequence > $3 ORDER BY sequence LIMIT ` + strconv.Itoa(pageSize+1)

// runQueryPage compares pages/s and p99 latency of 100-event pages read at
// random positions of a million-event project: through GraphQL auditEvents
// over HTTP, and through pgx with the rows encoded to JSON. The second row
// does the same with the recordedBySubject filter.
func runQueryPage(ctx context.Context, e *env, opts options) ([]result, error) {
	total, err := ensureSeeded(ctx, e)
	if err != nil {
		return nil, err
	}
	pool, err := e.baselinePool(ctx, queryClients)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	var out []result
	for _, row := range []struct {
		name, query, sql, what string
		args                   []any
		targets                pageTargets
	}{
		// Issue 17: query-page at 0.8 of its baseline, p99 at most 1.5×.
		{"query-page", pageQuery, pageSQL, "", nil, pageTargets{0.8, 1.5}},
		{"query-page-filtered", filteredPageQuery, filteredPageSQL,
			" filtered by recordedBySubject (every event matches, so pages stay full: the filter's index path)", []any{seedSubject},
			pageTargets{0.5, 2}},
	} {
		r, err := queryPageRow(ctx, e, opts, pool, pageTarget{project: queryProject, total: total}, row.name, row.query, row.sql, row.what, row.args, row.targets)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// pageTarget is the project a query-page row reads, with its event count;
// newest reads its newest page (no cursor) instead of random ones.
type pageTarget struct {
	project string
	total   uint64
	newest  bool
}

// queryPageRow measures one row of runQueryPage (and of the scale
// scenario's pages): query and sql read a page after a random sequence
// ($3), or, for a newest target, the newest page with no cursor (sql then
// has no $3).
func queryPageRow(ctx context.Context, e *env, opts options, pool *pgxpool.Pool, target pageTarget, name, query, sql, what string, extra []any, targets pageTargets) (result, error) {
	total := target.total
	// A random start leaves a full page after it.
	randomAfter := func(w *worker) uint64 { return w.rng.Uint64N(total - pageSize + 1) }

	prefix, err := json.Marshal(query)
	if err != nil {
		return result{}, err
	}
	ours := newSide("ours", queryClients, func(ctx context.Context, w *worker) (int, error) {
		body := make([]byte, 0, len(prefix)+128)
		body = append(body, `{"query":`...)
		body = append(body, prefix...)
		if target.newest {
			body = append(body, `,"variables":{"projectId":"`+target.project+`"}}`...)
		} else {
			cursor := app.EncodeCursor(domain.OldestFirst, randomAfter(w))
			body = append(body, `,"variables":{"projectId":"`+target.project+`","after":"`+cursor+`"}}`...)
		}
		if _, err := e.graphQL(ctx, body, &w.buf); err != nil {
			return 0, err
		}
		return 1, nil
	})
	if !target.newest {
		if err := checkOursPage(ctx, e, target.project, min(12345, total-pageSize), prefix); err != nil {
			return result{}, err
		}
	}

	base := newSide("baseline", queryClients, func(ctx context.Context, w *worker) (int, error) {
		args := []any{benchTenant, target.project}
		if !target.newest {
			args = append(args, int64(randomAfter(w)))
		}
		args = append(args, extra...)
		rows, err := pool.Query(ctx, sql, args...)
		if err != nil {
			return 0, err
		}
		defer rows.Close()
		page := make([]pageRow, 0, pageSize+1)
		for rows.Next() {
			var (
				r                      pageRow
				risk                   *string
				g                      governanceRow
				c                      correlationRow
				rec                    recorderRow
				version                int16
				fingerprint, chainHash []byte
			)
			err := rows.Scan(&r.TenantID, &r.ProjectID, &r.Sequence, &r.ID, &r.Action, &r.OccurredAt, &r.RecordedAt,
				&r.Subject.Type, &r.Subject.ID, &r.Subject.DisplayName, &r.Resource.Type, &r.Resource.ID, &r.Outcome,
				&risk, &g.Reason, &g.Ticket, &g.ConfirmedBy, &c.TraceID, &c.RequestID, &c.CausationID,
				&r.EvidenceDigests, &r.Details, &fingerprint, &chainHash,
				&version, &rec.Issuer, &rec.Subject, &rec.TokenID, &rec.ClientID)
			if err != nil {
				return 0, err
			}
			if risk != nil {
				g.Risk = *risk
				r.Governance = &g
			}
			if c != (correlationRow{}) {
				r.Correlation = &c
			}
			r.ChainVersion = int(version)
			if version >= domain.ChainVersionRecordedBy {
				r.RecordedBy = &rec
			}
			r.ChainHash = hex.EncodeToString(chainHash)
			page = append(page, r)
		}
		if err := rows.Err(); err != nil {
			return 0, err
		}
		if len(page) < pageSize {
			return 0, fmt.Errorf("baseline page has %d rows, want at least %d", len(page), pageSize)
		}
		w.buf.Reset()
		return 1, json.NewEncoder(&w.buf).Encode(page[:pageSize])
	})

	o, b, err := compare(ctx, name, opts.duration, ours, base)
	if err != nil {
		return result{}, err
	}
	note := fmt.Sprintf("%d clients, random %d-event pages of %d events%s; ours: GraphQL auditEvents over HTTP, every event field; "+
		"baseline: the same keyset SELECT (LIMIT %d) with pgx, all columns scanned into typed Go values "+
		"(jsonb as raw bytes), the page encoded to JSON with encoding/json, no HTTP",
		queryClients, pageSize, total, what, pageSize+1)
	return newResult(name, o, b, note,
		throughput("pages/s", o, b, targets.pagesRatio),
		latency("p50 ms", 0.50, o, b, 0),
		latency("p99 ms", 0.99, o, b, targets.p99Ratio),
	), nil
}

// pageTargets are a page row's targets: the least pages/s ratio and the
// largest p99 ratio, ours over the baseline.
type pageTargets struct{ pagesRatio, p99Ratio float64 }

// pageRow is one event as the baseline scans and encodes it.
type pageRow struct {
	ID         uuid.UUID `json:"id"`
	TenantID   string    `json:"tenantId"`
	ProjectID  string    `json:"projectId"`
	Sequence   int64     `json:"sequence,string"`
	Action     string    `json:"action"`
	OccurredAt time.Time `json:"occurredAt"`
	RecordedAt time.Time `json:"recordedAt"`
	Subject    struct {
		Type        string `json:"type"`
		ID          string `json:"id"`
		DisplayName string `json:"displayName"`
	} `json:"subject"`
	Resource struct {
		Type string `json:"type"`
		ID   string `json:"id"`
	} `json:"resource"`
	Outcome         string          `json:"outcome"`
	Governance      *governanceRow  `json:"governance"`
	Correlation     *correlationRow `json:"correlation"`
	EvidenceDigests json.RawMessage `json:"evidenceDigests"`
	Details         json.RawMessage `json:"details"`
	ChainHash       string          `json:"chainHash"`
	ChainVersion    int             `json:"chainVersion"`
	RecordedBy      *recorderRow    `json:"recordedBy"`
}

// recorderRow is the baseline's recordedBy.
type recorderRow struct {
	Issuer   string `json:"issuer"`
	Subject  string `json:"subject"`
	TokenID  string `json:"tokenId"`
	ClientID string `json:"clientId"`
}

// governanceRow and correlationRow are the baseline's typed nested objects.
type governanceRow struct {
	Reason      string `json:"reason"`
	Ticket      string `json:"ticket"`
	Risk        string `json:"risk"`
	ConfirmedBy string `json:"confirmedBy"`
}

type correlationRow struct {
	TraceID     string `json:"traceId"`
	RequestID   string `json:"requestId"`
	CausationID string `json:"causationId"`
}

// checkOursPage reads one page through our server and checks it holds
// pageSize consecutive events after the cursor, so that the measured
// requests do real work.
func checkOursPage(ctx context.Context, e *env, project string, after uint64, query []byte) error {
	body := fmt.Sprintf(`{"query":%s,"variables":{"projectId":%q,"after":%q}}`,
		query, project, app.EncodeCursor(domain.OldestFirst, after))
	var buf bytes.Buffer
	out, err := e.graphQL(ctx, []byte(body), &buf)
	if err != nil {
		return err
	}
	var resp struct {
		Data struct {
			AuditEvents struct {
				Edges []struct {
					Node struct {
						Sequence string `json:"sequence"`
					} `json:"node"`
				} `json:"edges"`
			} `json:"auditEvents"`
		} `json:"data"`
	}
	if err := json.Unmarshal(out, &resp); err != nil {
		return fmt.Errorf("decoding a page: %w", err)
	}
	edges := resp.Data.AuditEvents.Edges
	if len(edges) != pageSize || edges[0].Node.Sequence != strconv.FormatUint(after+1, 10) {
		return fmt.Errorf("page after %d: got %d events, want %d from sequence %d", after, len(edges), pageSize, after+1)
	}
	return nil
}

// ensureSeeded fills bench/bench-1m up to seedTarget events through the
// RecordAuditEvents use case (seedBatch events per call, seedWorkers at
// once), printing progress to stderr, and returns its event count. A
// project seeded by an earlier run is reused as is.
func ensureSeeded(ctx context.Context, e *env) (uint64, error) {
	st := store.New(e.pool)
	head, err := st.AuditHead(ctx, benchTenant, queryProject)
	if err != nil {
		return 0, err
	}
	if head.Sequence >= seedTarget {
		return head.Sequence, nil
	}
	fmt.Fprintf(os.Stderr, "bench: seeding %s/%s from %d to %d events (once; kept in %s for later runs)\n",
		benchTenant, queryProject, head.Sequence, seedTarget, benchDatabase)

	id := app.Identity{Subject: seedSubject, TenantID: benchTenant, ProjectIDs: []string{queryProject},
		Permissions: []app.Permission{app.PermissionAuditWrite}}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var claimed, done atomic.Int64
	claimed.Store(int64(head.Sequence))
	done.Store(int64(head.Sequence))
	start := time.Now()
	var wg sync.WaitGroup
	for i := range seedWorkers {
		wg.Go(func() {
			gen := uint64(time.Now().UnixNano()) + uint64(i)
			for ctx.Err() == nil {
				from := claimed.Add(seedBatch) - seedBatch
				if from >= seedTarget {
					return
				}
				n := int(min(seedBatch, seedTarget-from))
				drafts := demoDrafts(gen+uint64(from), queryProject, n)
				if _, err := e.app.RecordAuditEvents(ctx, id, app.RecordAuditEventsInput{Events: drafts}); err != nil {
					cancel(fmt.Errorf("seeding: %w", err))
					return
				}
				done.Add(int64(n))
			}
		})
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	for waiting := true; waiting; {
		select {
		case <-finished:
			waiting = false
		case <-tick.C:
			n := done.Load()
			fmt.Fprintf(os.Stderr, "bench: seeded %d/%d events (%.0f events/s)\n",
				n, seedTarget, float64(n-int64(head.Sequence))/time.Since(start).Seconds())
		}
	}
	if err := context.Cause(ctx); err != nil {
		return 0, err
	}
	fmt.Fprintf(os.Stderr, "bench: seeded %d events in %s; vacuuming\n", done.Load()-int64(head.Sequence), time.Since(start).Round(time.Second))
	// Settle the table (visibility map, statistics) so the first
	// measured run does not pay for it.
	if _, err := e.pool.Exec(ctx, "VACUUM (ANALYZE) audit_events"); err != nil {
		return 0, err
	}
	head, err = st.AuditHead(ctx, benchTenant, queryProject)
	if err != nil {
		return 0, err
	}
	return head.Sequence, nil
}
