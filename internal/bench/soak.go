package main

// The soak scenario (`make soak`): the real `aether serve` binary, run as a
// child process (serve_proc.go) on a database of its own (aether_soak,
// dropped and created afresh), holds -soak-subscribers GraphQL WebSocket
// subscriptions on one project (clients in the live-fanout client process,
// tracking sequences), while the bench records -soak-rate events/s through
// GraphQL over HTTP; each event is delivered as a webhook to the HTTPS
// receiver process of webhook-delivery, and an export of the project runs
// in the middle of the measured window.
//
// Phases: connect and prime the subscribers; warm up for -soak-warm-up at
// the rate (with an export after half of it, so that the warm-up takes
// every path the window takes); quiesce (every subscriber has the last event, every webhook is
// DELIVERED) and read the server's heap (after forced GCs), RSS and
// goroutines; run for -soak-duration at the rate, requesting the export
// after a third of it; quiesce again and read them again.
//
// Checks (the scenario fails, and the bench exits 1, when one fails):
//
//   - every subscription received every event of the project from its first
//     delivery (during priming) to the last event, in sequence order, with no
//     gap and no repeat, and none ended;
//   - every webhook delivery is DELIVERED in the database, one per bench
//     event, and the receiver saw every delivery's webhook-id;
//   - the export ends READY with as many rows as the project holds in its
//     range;
//   - the live heap at the end is within soakMaxHeapGrowth of the heap after
//     the warm-up (both after forced GCs, both quiesced);
//   - goroutines at the end are at most the count after the warm-up plus
//     -soak-goroutine-slack.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/auth"
	"github.com/aetheriot/aether-audit/domain"
)

const (
	// soakDatabase is the soak's own database, created afresh each run and
	// kept afterwards for inspection.
	soakDatabase = "aether_soak"
	// soakTenant and soakProject hold everything the soak writes.
	soakTenant  = "soak"
	soakProject = "soak"
	// soakMaxHeapGrowth bounds the live heap at the end against the heap
	// after the warm-up.
	soakMaxHeapGrowth = 0.10
	// soakQuiesce bounds each wait for the subscribers and webhooks to
	// catch up.
	soakQuiesce = 5 * time.Minute
	// soakExportTimeout bounds the wait for the export to end.
	soakExportTimeout = 5 * time.Minute
	// soakSubscription is what each subscriber selects (as live-fanout).
	soakSubscription = fanoutSubscription
)

// soakRecordMutation records one event and returns its sequence.
const soakRecordMutation = `mutation Record($in: RecordAuditEventInput!) {
  recordAuditEvent(input: $in) { event { sequence } }
}`

// runSoak runs the soak; see the file comment. It prints its figures itself
// and returns no comparison rows.
func runSoak(ctx context.Context, e *env, opts options) ([]result, error) {
	s, err := newSoak(ctx, e, opts)
	if err != nil {
		return nil, err
	}
	defer s.close()
	fig, err := s.run(ctx)
	if err != nil {
		return nil, err
	}
	failures := fig.check(opts)
	fig.print(os.Stdout, opts, failures)
	if opts.json {
		enc := json.NewEncoder(os.Stdout)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(fig.jsonObject(failures)); err != nil {
			return nil, err
		}
	}
	if len(failures) > 0 {
		return nil, fmt.Errorf("%d check(s) failed: %s", len(failures), strings.Join(failures, "; "))
	}
	return nil, nil
}

// soak is the scenario's world.
type soak struct {
	opts   options
	pool   *pgxpool.Pool // the soak database, for setup checks and the end's queries
	recv   *receiverProc
	srv    *serveProc
	client *fanoutProc
	dir    string
	secret []byte
	http   *http.Client
	// adminAuth is "Bearer <token>" of the recorder and administrator.
	adminAuth string
	drafts    []domain.AuditEventDraft
	details   []map[string]any
	next      atomic.Int64

	// inFlight counts the records in flight by send stamp (Unix
	// nanoseconds), so that the export's range can end where every
	// earlier event has committed.
	mu       sync.Mutex
	inFlight map[int64]int
}

// newSoak creates the soak database and starts the receiver, `aether
// serve` and the client process, and registers the webhook.
func newSoak(ctx context.Context, e *env, opts options) (_ *soak, err error) {
	s := &soak{opts: opts, inFlight: map[int64]int{}}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	if _, err := os.Stat(opts.soakBin); err != nil {
		return nil, fmt.Errorf("the aether binary %s: %w (build it with `make build`, or pass -soak-bin)", opts.soakBin, err)
	}
	if err := recreateDatabase(ctx, e.benchURL, soakDatabase); err != nil {
		return nil, err
	}
	dbURL := withDatabase(e.benchURL, soakDatabase)
	if s.pool, err = pgxpool.New(ctx, dbURL); err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", soakDatabase, err)
	}
	if s.dir, err = os.MkdirTemp("", "aether-soak-"); err != nil {
		return nil, err
	}
	if err := os.Chmod(s.dir, 0o755); err != nil {
		return nil, err
	}
	if s.recv, err = startReceiverProc(ctx); err != nil {
		return nil, fmt.Errorf("starting the receiver process: %w", err)
	}
	certFile := filepath.Join(s.dir, "receiver.pem")
	if err := os.WriteFile(certFile, pemOf(s.recv), 0o644); err != nil {
		return nil, err
	}
	secret := randomHex(32)
	s.secret = []byte(secret)
	// The server inherits the raised descriptor limit.
	raiseNofile()
	fmt.Fprintf(os.Stderr, "bench: soak: starting %s serve\n", opts.soakBin)
	s.srv, err = startServeProc(ctx, opts.soakBin, []string{
		"DATABASE_URL=" + dbURL,
		"AETHER_DATA_DIR=" + filepath.Join(s.dir, "data"),
		"AETHER_JWT_SECRET=" + secret,
		"AETHER_CHECKPOINT_KEY=" + randomHex(32),
		"AETHER_LOG_LEVEL=warn",
		// The receiver is on 127.0.0.1 with its own certificate, which
		// the server trusts through the system roots' SSL_CERT_FILE.
		"AETHER_WEBHOOK_ALLOW_CIDRS=127.0.0.0/8",
		"SSL_CERT_FILE=" + certFile,
		// The 2,000 subscribers (each with a token of its own, all of one
		// tenant) connect at once: the tenant's subscription-start limit
		// (200/s, bursts of 1,000) would spread that over seconds.
		"AETHER_RATE_TENANT_SUBSCRIPTIONS=0",
	})
	if err != nil {
		return nil, err
	}
	s.http = &http.Client{Transport: &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256, DisableCompression: true}}
	admin, err := s.token("soak-admin", app.PermissionAuditRead, app.PermissionAuditWrite, app.PermissionWebhooksRead,
		app.PermissionWebhooksWrite, app.PermissionExportsRead, app.PermissionExportsWrite)
	if err != nil {
		return nil, err
	}
	s.adminAuth = "Bearer " + admin
	if s.client, err = startFanoutProc(ctx); err != nil {
		return nil, fmt.Errorf("starting the client process: %w", err)
	}
	s.drafts = benchDrafts(17, soakProject)
	for i := range s.drafts {
		d := map[string]any{}
		if len(s.drafts[i].Details) > 0 {
			if err := json.Unmarshal(s.drafts[i].Details, &d); err != nil {
				return nil, err
			}
		}
		s.details = append(s.details, d)
	}
	if err := s.registerWebhook(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// pemOf returns the receiver's certificate as PEM.
func pemOf(r *receiverProc) []byte { return []byte(r.certPEM) }

// recreateDatabase drops database name (closing its connections) and
// creates it empty, on the server of url.
func recreateDatabase(ctx context.Context, url, name string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return fmt.Errorf("connecting to the database server: %w", err)
	}
	defer conn.Close(ctx)
	id := pgx.Identifier{name}.Sanitize()
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+id+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("dropping database %s: %w", name, err)
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+id); err != nil {
		return fmt.Errorf("creating database %s: %w", name, err)
	}
	return nil
}

// close stops the processes; the database stays for inspection.
func (s *soak) close() {
	if s.client != nil {
		s.client.stop()
	}
	if s.srv != nil {
		s.srv.stop()
	}
	if s.recv != nil {
		s.recv.stop()
	}
	if s.http != nil {
		s.http.CloseIdleConnections()
	}
	if s.pool != nil {
		s.pool.Close()
	}
	if s.dir != "" {
		_ = os.RemoveAll(s.dir)
	}
}

// token mints a token of the soak tenant's project for subject.
func (s *soak) token(subject string, perms ...app.Permission) (string, error) {
	return auth.MintHS256(s.secret, auth.TokenRequest{
		Subject:     subject,
		TenantID:    soakTenant,
		ProjectIDs:  []string{soakProject},
		Permissions: perms,
		TTL:         s.opts.soakWarmUp + s.opts.soakDuration + time.Hour,
	}, time.Now())
}

// graphQL posts query with variables as the administrator and decodes the
// data into out; a GraphQL error fails.
func (s *soak) graphQL(ctx context.Context, query string, variables map[string]any, out any) error {
	body, err := graphQLBody(query, variables)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.srv.baseURL+"/graphql", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", s.adminAuth)
	resp, err := s.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	var r struct {
		Data   json.RawMessage   `json:"data"`
		Errors []json.RawMessage `json:"errors"`
	}
	if err := json.Unmarshal(raw, &r); err != nil || resp.StatusCode != http.StatusOK || len(r.Errors) > 0 {
		return fmt.Errorf("graphql: HTTP %d: %s", resp.StatusCode, truncate(raw, 300))
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(r.Data, out)
}

// registerWebhook registers a destination on the receiver and subscribes
// it to the bench's events.
func (s *soak) registerWebhook(ctx context.Context) error {
	var d struct {
		CreateWebhookDestination struct {
			Destination struct{ ID string }
		}
	}
	if err := s.graphQL(ctx, `mutation($in: CreateWebhookDestinationInput!) {
  createWebhookDestination(input: $in) { destination { id } signingSecret }
}`, map[string]any{"in": map[string]any{"projectId": soakProject, "url": s.recv.url + "/soak"}}, &d); err != nil {
		return fmt.Errorf("creating the webhook destination: %w", err)
	}
	if err := s.graphQL(ctx, `mutation($in: CreateWebhookSubscriptionInput!) {
  createWebhookSubscription(input: $in) { subscription { id } }
}`, map[string]any{"in": map[string]any{"projectId": soakProject, "destinationId": d.CreateWebhookDestination.Destination.ID,
		"eventTypes": []string{whEventTypes}}}, nil); err != nil {
		return fmt.Errorf("subscribing the webhook destination: %w", err)
	}
	return nil
}

// record records the next demo event over GraphQL, occurring and stamped
// at stamp.
func (s *soak) record(ctx context.Context, stamp time.Time) error {
	key := stamp.UnixNano()
	s.mu.Lock()
	s.inFlight[key]++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		if s.inFlight[key]--; s.inFlight[key] == 0 {
			delete(s.inFlight, key)
		}
		s.mu.Unlock()
	}()
	i := int(s.next.Add(1)-1) % len(s.drafts)
	d := s.drafts[i]
	details := maps.Clone(s.details[i])
	details["sentAtUnixNano"] = formatStamp(stamp)
	var err error
	if d.Details, err = json.Marshal(details); err != nil {
		return err
	}
	d.OccurredAt = stamp
	return s.graphQL(ctx, soakRecordMutation, map[string]any{"in": eventInput(&d)}, nil)
}

// awaitCommitted waits until no record sent before cutoff is in flight.
func (s *soak) awaitCommitted(ctx context.Context, cutoff time.Time) error {
	for {
		s.mu.Lock()
		pending := false
		for k := range s.inFlight {
			if k < cutoff.UnixNano() {
				pending = true
				break
			}
		}
		s.mu.Unlock()
		if !pending {
			return nil
		}
		if err := sleepCtx(ctx, 10*time.Millisecond); err != nil {
			return err
		}
	}
}

// soakFigures is what the soak measured.
type soakFigures struct {
	subscribers int
	// warmEvents and events are the events recorded in the warm-up and in
	// the measured window (of length window); sendLat the latter's record
	// times.
	warmEvents, events int64
	window             time.Duration
	sendLat            []time.Duration
	// deliveriesInWindow counts deliveries to subscribers received in the
	// window.
	deliveriesInWindow int64
	ended              int
	// primeHead is the project's last sequence after priming, head its
	// last at the end; track is the subscribers' sequence check.
	primeHead, head uint64
	track           trackReport
	// Webhooks: bench events, their deliveries in the database (all, and
	// DELIVERED), the receiver's distinct webhook-ids, repeats, requests
	// without a timestamp or signature, keys it never saw, and the lags of
	// the window's deliveries.
	whEvents, whDeliveries, whDelivered int64
	whReceived, whDups, whBad           int64
	whMissing                           int64
	whLagP50, whLagP99                  float64
	whStates                            string
	// The exports of the warm-up and of the window.
	warmExport, export soakExport
	// warm and end are the server's runtime after the warm-up and at the
	// end; serverCPU its CPU time over the window.
	warm, end serverRuntime
	serverCPU time.Duration
	loadAvg   string
}

// soakExport is the export's outcome.
type soakExport struct {
	state          string
	rows, expected int64
	bytes          int64
	duration       time.Duration
	failure        string
	err            error
}

// ok reports whether the export ended READY with every expected row.
func (x soakExport) ok() bool { return x.err == nil && x.state == "READY" && x.rows == x.expected }

// run runs the phases and gathers the figures; an error means the soak
// could not run (a failed check is not an error here).
func (s *soak) run(ctx context.Context) (*soakFigures, error) {
	o := s.opts
	f := &soakFigures{subscribers: o.soakSubscribers}
	auths := make([]string, o.soakSubscribers)
	for i := range auths {
		t, err := s.token(fmt.Sprintf("soak-viewer-%d", i), app.PermissionAuditRead)
		if err != nil {
			return nil, err
		}
		auths[i] = "Bearer " + t
	}
	sub, err := json.Marshal(map[string]any{"query": soakSubscription, "variables": map[string]any{"p": soakProject}})
	if err != nil {
		return nil, err
	}
	wsURL := "ws" + strings.TrimPrefix(s.srv.baseURL, "http") + "/graphql"
	fmt.Fprintf(os.Stderr, "bench: soak: connecting %d subscribers\n", o.soakSubscribers)
	conn, err := s.client.call(ctx, fanoutCommand{Cmd: "connect", URL: wsURL, N: o.soakSubscribers, GraphQL: true,
		Auths: auths, Subscribe: sub, Track: true}, "connected", time.Minute+time.Duration(o.soakSubscribers)*20*time.Millisecond)
	if err != nil {
		return nil, err
	}
	if conn.N < o.soakSubscribers {
		return nil, fmt.Errorf("only %d of %d sockets opened (%d failed; first error: %s)", conn.N, o.soakSubscribers, conn.Failed, conn.Err)
	}
	if _, err := primeSubscribers(ctx, s.client, s.record); err != nil {
		return nil, err
	}
	if f.primeHead, err = s.head(ctx); err != nil {
		return nil, err
	}

	fmt.Fprintf(os.Stderr, "bench: soak: warming up for %s at %g events/s\n", o.soakWarmUp, o.soakRate)
	// The warm-up runs an export too, so that the memory reading after it
	// comes after every path the window takes.
	warmExport := make(chan soakExport, 1)
	go func() { warmExport <- s.runExport(ctx, o.soakWarmUp/2) }()
	warm, err := driveFanout(ctx, fanoutPlan{rate: o.soakRate, measure: o.soakWarmUp, send: s.record})
	if err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	f.warmExport = <-warmExport
	f.warmEvents = warm.events
	if _, err := s.quiesce(ctx, "after the warm-up"); err != nil {
		return nil, err
	}
	s.http.CloseIdleConnections()
	if f.warm, err = s.srv.settledRuntime(ctx); err != nil {
		return nil, err
	}
	if err := s.saveHeapProfile(ctx, "warm-up"); err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "bench: soak: after the warm-up: live heap %.1f MiB, RSS %.1f MiB, %d goroutines\n",
		mib(f.warm.heapAlloc), mib(f.warm.rss), f.warm.goroutines)

	fmt.Fprintf(os.Stderr, "bench: soak: measuring for %s at %g events/s, export after %s\n", o.soakDuration, o.soakRate, o.soakDuration/3)
	if _, err := s.client.call(ctx, fanoutCommand{Cmd: "start"}, "started", 30*time.Second); err != nil {
		return nil, err
	}
	st0, err := s.client.call(ctx, fanoutCommand{Cmd: "status"}, "status", 30*time.Second)
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	cpu0 := procCPU(s.srv.cmd.Process.Pid)
	exportDone := make(chan soakExport, 1)
	go func() { exportDone <- s.runExport(ctx, o.soakDuration/3) }()
	w, err := driveFanout(ctx, fanoutPlan{rate: o.soakRate, measure: o.soakDuration, send: s.record})
	if err != nil {
		return nil, fmt.Errorf("measured window: %w", err)
	}
	f.serverCPU = procCPU(s.srv.cmd.Process.Pid) - cpu0
	st1, err := s.client.call(ctx, fanoutCommand{Cmd: "status"}, "status", 30*time.Second)
	if err != nil {
		return nil, err
	}
	f.window = time.Since(t0)
	f.events, f.sendLat = w.events, w.sendLat
	f.deliveriesInWindow = st1.Total - st0.Total
	f.ended = st1.Ended
	f.export = <-exportDone

	tr, err := s.quiesce(ctx, "at the end")
	if err != nil {
		return nil, err
	}
	f.track = tr
	if f.head, err = s.head(ctx); err != nil {
		return nil, err
	}
	if st, err := s.client.call(ctx, fanoutCommand{Cmd: "status"}, "status", 30*time.Second); err == nil {
		f.ended = st.Ended
	}
	s.http.CloseIdleConnections()
	if f.end, err = s.srv.settledRuntime(ctx); err != nil {
		return nil, err
	}
	if err := s.saveHeapProfile(ctx, "end"); err != nil {
		return nil, err
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		f.loadAvg = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	if err := s.webhookFigures(ctx, f, t0); err != nil {
		return nil, err
	}
	return f, nil
}

// saveHeapProfile writes the server's heap profile (just after the GCs of
// a runtime reading) to soak-heap-<name>.pb.gz in -soak-heap-profiles, if
// set: `go tool pprof -base soak-heap-warm-up.pb.gz soak-heap-end.pb.gz`
// shows what grew.
func (s *soak) saveHeapProfile(ctx context.Context, name string) error {
	if s.opts.soakHeapProfiles == "" {
		return nil
	}
	body, err := s.srv.debugGet(ctx, "/debug/pprof/heap")
	if err != nil {
		return err
	}
	path := filepath.Join(s.opts.soakHeapProfiles, "soak-heap-"+name+".pb.gz")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "bench: soak: wrote %s\n", path)
	return nil
}

// head returns the project's last sequence.
func (s *soak) head(ctx context.Context) (uint64, error) {
	var h int64
	err := s.pool.QueryRow(ctx, `SELECT coalesce(max(sequence), 0) FROM audit_events WHERE tenant_id = $1 AND project_id = $2`,
		soakTenant, soakProject).Scan(&h)
	return uint64(h), err
}

// quiesce waits (up to soakQuiesce) until every subscriber has the
// project's last event and every bench event's webhook is finished, and
// returns the subscribers' sequence check.
func (s *soak) quiesce(ctx context.Context, when string) (trackReport, error) {
	began := time.Now()
	head, err := s.head(ctx)
	if err != nil {
		return trackReport{}, err
	}
	tr, err := s.client.call(ctx, fanoutCommand{Cmd: "track", Expect: int64(head), WaitMs: soakQuiesce.Milliseconds()},
		"track", soakQuiesce+time.Minute)
	if err != nil {
		return trackReport{}, err
	}
	if tr.Tracking.Behind > 0 {
		fmt.Fprintf(os.Stderr, "bench: soak: %s: %d subscribers still behind sequence %d after %s\n", when, tr.Tracking.Behind, head, soakQuiesce)
	}
	deadline := time.Now().Add(soakQuiesce)
	for {
		var unfinished, events, deliveries int64
		if err := s.pool.QueryRow(ctx, `SELECT
				(SELECT count(*) FROM webhook_deliveries WHERE tenant_id = $1 AND project_id = $2 AND state IN ('PENDING', 'DELIVERING', 'RETRYING')),
				(SELECT count(*) FROM audit_events WHERE tenant_id = $1 AND project_id = $2 AND action LIKE 'bench.%'),
				(SELECT count(*) FROM webhook_deliveries WHERE tenant_id = $1 AND project_id = $2)`,
			soakTenant, soakProject).Scan(&unfinished, &events, &deliveries); err != nil {
			return trackReport{}, err
		}
		if unfinished == 0 && deliveries >= events {
			break
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(os.Stderr, "bench: soak: %s: webhooks unfinished after %s (%d unfinished, %d deliveries for %d events)\n",
				when, soakQuiesce, unfinished, deliveries, events)
			break
		}
		if err := sleepCtx(ctx, 250*time.Millisecond); err != nil {
			return trackReport{}, err
		}
	}
	fmt.Fprintf(os.Stderr, "bench: soak: quiesced %s in %s\n", when, time.Since(began).Round(100*time.Millisecond))
	return *tr.Tracking, nil
}

// runExport waits for after, then exports the project's events up to now
// (once every event sent before has committed) and waits until the export
// ends.
func (s *soak) runExport(ctx context.Context, after time.Duration) (x soakExport) {
	if x.err = sleepCtx(ctx, after); x.err != nil {
		return x
	}
	to := time.Now()
	from := to.Add(-24 * time.Hour)
	if x.err = s.awaitCommitted(ctx, to); x.err != nil {
		return x
	}
	var req struct {
		RequestDataExport struct {
			Export struct{ ID string }
		}
	}
	if x.err = s.graphQL(ctx, `mutation($in: RequestDataExportInput!) {
  requestDataExport(input: $in) { export { id } }
}`, map[string]any{"in": map[string]any{"projectId": soakProject, "kind": "AUDIT", "from": from.Format(time.RFC3339Nano),
		"to": to.Format(time.RFC3339Nano), "format": "NDJSON", "compression": "NONE", "confirm": true}}, &req); x.err != nil {
		x.err = fmt.Errorf("requesting the export: %w", x.err)
		return x
	}
	if x.err = s.pool.QueryRow(ctx, `SELECT count(*) FROM audit_events WHERE tenant_id = $1 AND project_id = $2
		AND occurred_at >= $3 AND occurred_at < $4`, soakTenant, soakProject, from, to).Scan(&x.expected); x.err != nil {
		return x
	}
	deadline := time.Now().Add(soakExportTimeout)
	for {
		var q struct {
			DataExport struct {
				State         string
				RowCount      *string
				ByteLength    *string
				RequestedAt   time.Time
				ReadyAt       *time.Time
				FailedAt      *time.Time
				FailureReason *string
			}
		}
		if x.err = s.graphQL(ctx, `query($id: ID!) {
  dataExport(id: $id) { state rowCount byteLength requestedAt readyAt failedAt failureReason }
}`, map[string]any{"id": req.RequestDataExport.Export.ID}, &q); x.err != nil {
			return x
		}
		d := q.DataExport
		x.state = d.State
		switch d.State {
		case "READY":
			x.rows, _ = strconv.ParseInt(deref(d.RowCount), 10, 64)
			x.bytes, _ = strconv.ParseInt(deref(d.ByteLength), 10, 64)
			x.duration = d.ReadyAt.Sub(d.RequestedAt)
			return x
		case "FAILED", "EXPIRED":
			x.failure = deref(d.FailureReason)
			return x
		}
		if time.Now().After(deadline) {
			x.err = fmt.Errorf("the export is still %s after %s", d.State, soakExportTimeout)
			return x
		}
		if x.err = sleepCtx(ctx, 250*time.Millisecond); x.err != nil {
			return x
		}
	}
}

// deref returns *p, or "" for nil.
func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// webhookFigures fills in the webhooks' figures: the database's deliveries
// against the bench events, the receiver's webhook-ids against the
// deliveries' keys, and the lags of deliveries of events recorded since
// t0.
func (s *soak) webhookFigures(ctx context.Context, f *soakFigures, t0 time.Time) error {
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM audit_events WHERE tenant_id = $1 AND project_id = $2 AND action LIKE 'bench.%'`,
		soakTenant, soakProject).Scan(&f.whEvents); err != nil {
		return err
	}
	rows, err := s.pool.Query(ctx, `SELECT idempotency_key, state FROM webhook_deliveries WHERE tenant_id = $1 AND project_id = $2`,
		soakTenant, soakProject)
	if err != nil {
		return err
	}
	type keyState struct{ key, state string }
	all, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (keyState, error) {
		var k keyState
		err := r.Scan(&k.key, &k.state)
		return k, err
	})
	if err != nil {
		return err
	}
	states := map[string]int{}
	for _, k := range all {
		states[k.state]++
	}
	f.whDeliveries, f.whDelivered = int64(len(all)), int64(states["DELIVERED"])
	var parts []string
	for _, st := range slices.Sorted(maps.Keys(states)) {
		parts = append(parts, fmt.Sprintf("%s %d", st, states[st]))
	}
	f.whStates = strings.Join(parts, ", ")

	ids, err := s.recv.ids(ctx)
	if err != nil {
		return err
	}
	seen := make(map[string]struct{}, len(ids))
	for _, id := range ids {
		seen[id] = struct{}{}
	}
	for _, k := range all {
		if _, ok := seen[k.key]; !ok {
			f.whMissing++
		}
	}
	lat, rep, err := s.recv.report(ctx, receiverCommand{From: t0.UnixNano(), To: math.MaxInt64, Lags: true})
	if err != nil {
		return err
	}
	f.whReceived, f.whDups, f.whBad = int64(len(ids)), rep.Dups, rep.Bad
	slices.Sort(lat)
	f.whLagP50, f.whLagP99 = quantileMs(lat, 0.5), quantileMs(lat, 0.99)
	return nil
}

// quantileMs returns the q-quantile (nearest rank) of sorted microsecond
// values in milliseconds, 0 for none.
func quantileMs(sortedUs []int64, q float64) float64 {
	if len(sortedUs) == 0 {
		return 0
	}
	i := max(int(math.Ceil(q*float64(len(sortedUs))))-1, 0)
	return float64(sortedUs[i]) / 1000
}

// mib returns b in MiB.
func mib(b int64) float64 { return float64(b) / (1 << 20) }

// heapRatio is the end's live heap over the warm-up's.
func (f *soakFigures) heapRatio() float64 {
	return ratio(float64(f.end.heapAlloc), float64(f.warm.heapAlloc))
}

// check returns a description of each failed check.
func (f *soakFigures) check(opts options) []string {
	var fails []string
	t := f.track
	want := int64(0) // deliveries: each subscription from its first to the head
	if t.Subscriptions > 0 && f.head >= t.MaxFirst {
		// A lower bound that is exact when every subscription's first is
		// the same; the per-subscription checks below catch the rest.
		want = int64(t.Subscriptions) * int64(f.head-t.MaxFirst+1)
	}
	if t.Subscriptions != f.subscribers || t.Gaps > 0 || t.Repeats > 0 || t.Behind > 0 || t.MaxLast != f.head ||
		t.MaxFirst > f.primeHead || f.ended > 0 || t.Deliveries < want {
		fails = append(fails, fmt.Sprintf("live: %d of %d subscriptions, %d gaps, %d repeats, %d behind the last sequence %d, "+
			"first sequences %d-%d (all must be <= %d, the last after priming), %d ended",
			t.Subscriptions, f.subscribers, t.Gaps, t.Repeats, t.Behind, f.head, t.MinFirst, t.MaxFirst, f.primeHead, f.ended))
	}
	if f.whDelivered != f.whEvents || f.whDeliveries != f.whEvents || f.whMissing > 0 {
		fails = append(fails, fmt.Sprintf("webhooks: %d bench events, %d deliveries (%s), %d never seen by the receiver",
			f.whEvents, f.whDeliveries, f.whStates, f.whMissing))
	}
	for _, x := range []soakExport{f.warmExport, f.export} {
		if !x.ok() {
			fails = append(fails, fmt.Sprintf("export: state %q, %d rows of %d expected, reason %q, error %v", x.state, x.rows, x.expected, x.failure, x.err))
		}
	}
	if f.heapRatio() > 1+soakMaxHeapGrowth {
		fails = append(fails, fmt.Sprintf("memory: live heap %.1f MiB at the end, %.1f MiB after the warm-up (ratio %.3f > %.2f)",
			mib(f.end.heapAlloc), mib(f.warm.heapAlloc), f.heapRatio(), 1+soakMaxHeapGrowth))
	}
	if f.end.goroutines > f.warm.goroutines+opts.soakGoroutineSlack {
		fails = append(fails, fmt.Sprintf("goroutines: %d at the end, %d after the warm-up (slack %d)",
			f.end.goroutines, f.warm.goroutines, opts.soakGoroutineSlack))
	}
	return fails
}

// rate is the events recorded per second in the window.
func (f *soakFigures) rate() float64 { return perSec(float64(f.events), f.window) }

// print writes the figures as a table, then the checks' verdict.
func (f *soakFigures) print(out io.Writer, opts options, failures []string) {
	pass := func(ok bool) string { return map[bool]string{true: "yes", false: "NO"}[ok] }
	t := f.track
	rows := [][3]string{
		{"subscribers (WebSocket, one project)", strconv.Itoa(f.subscribers), ""},
		{"events recorded (warm-up + window)", fmt.Sprintf("%d + %d", f.warmEvents, f.events), ""},
		{"rate achieved, events/s", fmt.Sprintf("%.1f of %g", f.rate(), opts.soakRate), ""},
		{"record p50 ms (GraphQL, incl. commit)", fmt.Sprintf("%.1f", float64(median(f.sendLat).Microseconds())/1000), ""},
		{"deliveries to subscribers/s", fmt.Sprintf("%.0f of %.0f", perSec(float64(f.deliveriesInWindow), f.window), f.rate()*float64(f.subscribers)), ""},
		{"live latency p50 / p99 / max ms", fmt.Sprintf("%.1f / %.1f / %.1f", float64(t.P50Us)/1000, float64(t.P99Us)/1000, float64(t.MaxUs)/1000), ""},
		{"deliveries to subscribers (total)", strconv.FormatInt(t.Deliveries, 10), ""},
		{"in order, no gap or repeat, none behind", fmt.Sprintf("%d gaps, %d repeats, %d behind, last %d-%d of %d", t.Gaps, t.Repeats, t.Behind, t.MinLast, t.MaxLast, f.head),
			pass(t.Gaps == 0 && t.Repeats == 0 && t.Behind == 0 && t.MaxLast == f.head && f.ended == 0)},
		{"webhooks DELIVERED / bench events", fmt.Sprintf("%d / %d (%s)", f.whDelivered, f.whEvents, f.whStates), pass(f.whDelivered == f.whEvents && f.whDeliveries == f.whEvents)},
		{"receiver: distinct webhook-ids, repeats, unseen keys", fmt.Sprintf("%d, %d, %d", f.whReceived, f.whDups, f.whMissing), pass(f.whMissing == 0)},
		{"webhook lag p50 / p99 ms (window)", fmt.Sprintf("%.1f / %.1f", f.whLagP50, f.whLagP99), ""},
		{"warm-up export state, rows / expected", fmt.Sprintf("%s, %d / %d", f.warmExport.state, f.warmExport.rows, f.warmExport.expected),
			pass(f.warmExport.ok())},
		{"export state, rows / expected", fmt.Sprintf("%s, %d / %d", f.export.state, f.export.rows, f.export.expected),
			pass(f.export.ok())},
		{"export duration s (requested -> ready), bytes", fmt.Sprintf("%.2f, %d", f.export.duration.Seconds(), f.export.bytes), ""},
		{"live heap MiB warm-up -> end (ratio)", fmt.Sprintf("%.1f -> %.1f (%.3f)", mib(f.warm.heapAlloc), mib(f.end.heapAlloc), f.heapRatio()),
			pass(f.heapRatio() <= 1+soakMaxHeapGrowth)},
		{"heap in use MiB warm-up -> end (ratio)", fmt.Sprintf("%.1f -> %.1f (%.3f)", mib(f.warm.heapInuse), mib(f.end.heapInuse),
			ratio(float64(f.end.heapInuse), float64(f.warm.heapInuse))), ""},
		{"RSS MiB warm-up -> end (ratio)", fmt.Sprintf("%.1f -> %.1f (%.3f)", mib(f.warm.rss), mib(f.end.rss), ratio(float64(f.end.rss), float64(f.warm.rss))), ""},
		{"goroutines warm-up -> end", fmt.Sprintf("%d -> %d (slack %d)", f.warm.goroutines, f.end.goroutines, opts.soakGoroutineSlack),
			pass(f.end.goroutines <= f.warm.goroutines+opts.soakGoroutineSlack)},
		{"server CPU in the window, cores", fmt.Sprintf("%.2f", perSec(f.serverCPU.Seconds(), f.window)), ""},
		{"machine load average (1, 5, 15 min)", f.loadAvg, ""},
	}
	w := 0
	for _, r := range rows {
		w = max(w, len(r[0]))
	}
	fmt.Fprintf(out, "soak: aether serve (child process), %s warm-up + %s measured\n", opts.soakWarmUp, f.window.Round(100*time.Millisecond))
	for _, r := range rows {
		line := fmt.Sprintf("  %-*s  %s", w, r[0], r[1])
		if r[2] != "" {
			line += "  [" + r[2] + "]"
		}
		fmt.Fprintln(out, line)
	}
	if len(failures) == 0 {
		fmt.Fprintln(out, "soak: every check passed")
		return
	}
	for _, fl := range failures {
		fmt.Fprintln(out, "soak: FAILED:", fl)
	}
}

// jsonObject returns the figures as one JSON object.
func (f *soakFigures) jsonObject(failures []string) map[string]any {
	t := f.track
	return map[string]any{
		"scenario": "soak", "subscribers": f.subscribers, "warm_events": f.warmEvents, "events": f.events,
		"window_s": round(f.window.Seconds(), 1), "rate": round(f.rate(), 1),
		"deliveries_per_s": round(perSec(float64(f.deliveriesInWindow), f.window), 0),
		"live_p50_ms":      float64(t.P50Us) / 1000, "live_p99_ms": float64(t.P99Us) / 1000,
		"deliveries": t.Deliveries, "gaps": t.Gaps, "repeats": t.Repeats, "behind": t.Behind,
		"webhooks_delivered": f.whDelivered, "webhook_events": f.whEvents, "webhook_unseen": f.whMissing,
		"webhook_lag_p50_ms": f.whLagP50, "webhook_lag_p99_ms": f.whLagP99,
		"export_state": f.export.state, "export_rows": f.export.rows, "export_expected": f.export.expected,
		"export_s":      round(f.export.duration.Seconds(), 2),
		"heap_warm_mib": round(mib(f.warm.heapAlloc), 1), "heap_end_mib": round(mib(f.end.heapAlloc), 1), "heap_ratio": round(f.heapRatio(), 3),
		"rss_warm_mib": round(mib(f.warm.rss), 1), "rss_end_mib": round(mib(f.end.rss), 1),
		"goroutines_warm": f.warm.goroutines, "goroutines_end": f.end.goroutines,
		"failures": failures,
	}
}
