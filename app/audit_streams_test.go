package app_test

// The world of the audit stream tests: the App over a fresh database with
// the real clock, the real webhook.Sender (relaxed to reach 127.0.0.1
// only), a real HTTPS receiver that reads the NDJSON batches, and the
// stream worker running in the background as a server runs it.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/metrics"
	"github.com/aetheriot/aether-audit/secrets"
	"github.com/aetheriot/aether-audit/store"
	"github.com/aetheriot/aether-audit/store/storetest"
	"github.com/aetheriot/aether-audit/streamsink"
	"github.com/aetheriot/aether-audit/webhook"
)

// streamReceiver is an HTTPS receiver of stream batches. Per path it keeps
// every event line it acknowledged, in arrival order, and checks each
// request's headers against its lines.
type streamReceiver struct {
	srv *httptest.Server

	mu sync.Mutex
	// byPath holds the acknowledged requests of each path.
	byPath map[string][]streamRequest
	// fail answers the next requests of a path with 503 while it returns
	// true.
	fail func(path string) bool
	// failedAt holds when each request of a path that got a 503 arrived.
	failedAt map[string][]time.Time
}

// streamRequest is one acknowledged batch.
type streamRequest struct {
	Header http.Header
	Body   []byte
	Events []streamsink.EventRef
}

func newStreamReceiver(t *testing.T) *streamReceiver {
	t.Helper()
	rc := &streamReceiver{byPath: map[string][]streamRequest{}, fail: func(string) bool { return false }, failedAt: map[string][]time.Time{}}
	rc.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		fail := rc.fail(r.URL.Path)
		if fail {
			rc.failedAt[r.URL.Path] = append(rc.failedAt[r.URL.Path], time.Now())
		}
		rc.mu.Unlock()
		if fail {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		req := streamRequest{Header: r.Header.Clone(), Body: body}
		sc := bufio.NewScanner(bytes.NewReader(body))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var e streamsink.EventRef
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				w.WriteHeader(http.StatusBadRequest)
				return
			}
			req.Events = append(req.Events, e)
		}
		rc.mu.Lock()
		rc.byPath[r.URL.Path] = append(rc.byPath[r.URL.Path], req)
		rc.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

// requests returns the acknowledged requests of path.
func (rc *streamReceiver) requests(path string) []streamRequest {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]streamRequest(nil), rc.byPath[path]...)
}

// sequences returns, per project, the sequences path received, in arrival
// order (duplicates included).
func (rc *streamReceiver) sequences(path string) map[string][]uint64 {
	out := map[string][]uint64{}
	for _, r := range rc.requests(path) {
		for _, e := range r.Events {
			out[e.ProjectID] = append(out[e.ProjectID], e.Sequence)
		}
	}
	return out
}

// streamBundle is the world of a stream test. admin may read and write
// streams of p1, p2 and p3 and read their events; writer records events.
type streamBundle struct {
	app      *app.App
	pool     *pgxpool.Pool
	receiver *streamReceiver
	admin    app.Identity
	writer   app.Identity
}

// streamOpts adjust setupStreams.
type streamOpts struct {
	streams app.StreamConfig
	// allowHTTP lets sinks use http:// (the development relaxation).
	allowHTTP bool
	// breaker is the webhooks' (and streams') circuit breaker policy.
	breaker domain.WebhookBreakerPolicy
	// claims, when set, counts the worker's ClaimAuditStreamCursors calls.
	claims *atomic.Int64
}

func setupStreams(t *testing.T, o streamOpts) *streamBundle {
	t.Helper()
	pool := storetest.NewPool(t)
	rc := newStreamReceiver(t)
	box, err := secrets.NewBox(bytes.Repeat([]byte{2}, secrets.KeySize))
	require.NoError(t, err)
	sender := webhook.NewSender(webhook.SenderConfig{Timeout: 5 * time.Second, AllowPrefixes: loopback,
		RootCAs: rc.srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs})
	t.Cleanup(sender.CloseIdleConnections)
	cfg := o.streams
	if cfg.Poll == 0 {
		cfg.Poll = 20 * time.Millisecond
	}
	if cfg.MaxBackoff == 0 {
		cfg.MaxBackoff = 100 * time.Millisecond
	}
	var st app.Store[*store.Tx] = store.New(pool)
	if o.claims != nil {
		st = claimCounter{Store: store.New(pool), claims: o.claims}
	}
	a := app.New(st, app.Config{Logger: slog.New(slog.DiscardHandler), Webhooks: app.WebhookConfig{
		Box: box, Sender: sender, URLPolicy: webhook.URLPolicy{AllowPrefixes: loopback, AllowHTTP: o.allowHTTP}, Breaker: o.breaker,
	}, Streams: cfg})
	b := &streamBundle{app: a, pool: pool, receiver: rc,
		admin: app.Identity{Subject: "ops", TenantID: "t1", ProjectIDs: []string{"p1", "p2", "p3"}, Permissions: []app.Permission{
			app.PermissionStreamsRead, app.PermissionStreamsWrite, app.PermissionAuditRead}},
		writer: app.Identity{Subject: "svc", TenantID: "t1", ProjectIDs: []string{"*"}, Permissions: []app.Permission{app.PermissionAuditWrite}},
	}
	return b
}

// run starts the stream worker until the test ends.
func (b *streamBundle) run(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = b.app.RunAuditStreams(ctx, nil) }()
	t.Cleanup(func() { cancel(); <-done })
}

// record records n events of project with action, in batches.
func (b *streamBundle) record(t *testing.T, project, action string, n int) {
	t.Helper()
	for n > 0 {
		k := min(n, 500)
		drafts := make([]domain.AuditEventDraft, k)
		for i := range drafts {
			drafts[i] = domain.AuditEventDraft{ProjectID: project, Action: action, OccurredAt: time.Now(),
				Subject: domain.Subject{Type: domain.SubjectUser, ID: "u1"}, Resource: domain.Resource{Type: "door", ID: "d" + strconv.Itoa(i)},
				Outcome: domain.OutcomeSuccess}
		}
		_, err := b.app.RecordAuditEvents(context.Background(), b.writer, app.RecordAuditEventsInput{Events: drafts})
		require.NoError(t, err)
		n -= k
	}
}

// head is project's newest sequence.
func (b *streamBundle) head(t *testing.T, project string) uint64 {
	t.Helper()
	var h uint64
	err := b.pool.QueryRow(context.Background(), `SELECT last_sequence FROM audit_project_heads WHERE tenant_id = 't1' AND project_id = $1`, project).Scan(&h)
	require.NoError(t, err)
	return h
}

// createHTTPS creates an HTTPS stream to the receiver's path.
func (b *streamBundle) createHTTPS(t *testing.T, path string, in app.CreateAuditStreamInput) app.CreatedAuditStream {
	t.Helper()
	in.Sink = app.AuditStreamSinkInput{Type: domain.AuditStreamHTTPS, URL: b.receiver.srv.URL + path}
	out, err := b.app.CreateAuditStream(context.Background(), b.admin, in)
	require.NoError(t, err)
	return out
}

// awaitCaughtUp waits until every project of the stream has its cursor at
// its head (and the head at least min), and returns the stream.
func (b *streamBundle) awaitCaughtUp(t *testing.T, streamID string, projects map[string]uint64) app.AuditStreamView {
	t.Helper()
	var v app.AuditStreamView
	require.Eventually(t, func() bool {
		var err error
		v, err = b.app.AuditStream(context.Background(), b.admin, streamID)
		require.NoError(t, err)
		got := map[string]uint64{}
		for _, p := range v.Projects {
			if p.Acked != p.Head {
				return false
			}
			got[p.ProjectID] = p.Acked
		}
		for p, want := range projects {
			if got[p] < want {
				return false
			}
		}
		return true
	}, 60*time.Second, 10*time.Millisecond, "stream %s did not catch up", streamID)
	return v
}

// requireComplete checks what path received of project: every sequence
// from first to last, in order; a repeat only of a sequence already seen.
func requireComplete(t *testing.T, got []uint64, first, last uint64) {
	t.Helper()
	next := first
	for i, s := range got {
		if s < next {
			continue // a duplicate of a batch redelivered: already seen
		}
		require.Equal(t, next, s, "sequence %d of %d: a gap or a reorder", i, len(got))
		next++
	}
	require.Equal(t, last+1, next, "not every sequence up to %d arrived", last)
}

func TestAuditStreamHTTPSDeliversEveryProjectCompleteAndSigned(t *testing.T) {
	t.Parallel()
	b := setupStreams(t, streamOpts{streams: app.StreamConfig{BatchEvents: 100}})
	b.record(t, "p1", "door.opened", 150)
	created := b.createHTTPS(t, "/s", app.CreateAuditStreamInput{ProjectIDs: []string{"p2", "p1", "p1"}})
	require.NotNil(t, created.SigningSecret)
	require.Equal(t, []string{"p1", "p2"}, created.Stream.Stream.ProjectIDs, "sorted, without repeats")
	b.run(t)
	b.record(t, "p1", "door.opened", 120)
	b.record(t, "p2", "door.closed", 80)
	heads := map[string]uint64{"p1": b.head(t, "p1"), "p2": b.head(t, "p2")}
	v := b.awaitCaughtUp(t, created.Stream.Stream.ID.String(), heads)
	require.Equal(t, domain.AuditStreamRunning, v.State)
	for _, p := range v.Projects {
		require.Empty(t, p.LastError)
		require.NotNil(t, p.LastDeliveryAt)
		require.Zero(t, p.LagEvents())
	}

	seqs := b.receiver.sequences("/s")
	for p, head := range heads {
		// Each project's history from its first event, its creation
		// event included.
		requireComplete(t, seqs[p], 1, head)
	}
	for _, req := range b.receiver.requests("/s") {
		require.LessOrEqual(t, len(req.Events), 100, "BatchEvents bounds a request")
		first, last := req.Events[0], req.Events[len(req.Events)-1]
		require.Equal(t, created.Stream.Stream.ID.String(), req.Header.Get("Aether-Stream-Id"))
		require.Equal(t, first.ProjectID, req.Header.Get("Aether-Project-Id"))
		require.Equal(t, strconv.FormatUint(first.Sequence, 10), req.Header.Get("Aether-First-Sequence"))
		require.Equal(t, strconv.FormatUint(last.Sequence, 10), req.Header.Get("Aether-Last-Sequence"))
		require.Equal(t, "application/x-ndjson", req.Header.Get("Content-Type"))
		for _, e := range req.Events {
			require.Equal(t, first.ProjectID, e.ProjectID, "one project per request")
			require.Equal(t, "t1", e.TenantID)
		}
		require.Equal(t, []int{0}, signatures(t, *created.SigningSecret, receivedRequest{Header: req.Header, Body: req.Body}),
			"signed like a webhook with the stream's secret")
	}

	// Audited in both projects.
	for _, p := range []string{"p1", "p2"} {
		ev := auditEvents(t, b.app, b.admin, p, "audit.stream.created")
		require.Len(t, ev, 1)
		require.Equal(t, "audit_stream", ev[0].Resource.Type)
		require.NotContains(t, string(ev[0].Details), "whsec_", "the secret is never in the evidence")
	}
}

func TestAuditStreamFilterFromSequenceAndAllProjects(t *testing.T) {
	t.Parallel()
	b := setupStreams(t, streamOpts{})
	b.record(t, "p1", "door.opened", 10)
	b.record(t, "p1", "badge.scanned", 10)
	b.record(t, "p3", "door.opened", 5)
	all := b.admin
	all.ProjectIDs = []string{"*"}
	filtered, err := b.app.CreateAuditStream(context.Background(), all, app.CreateAuditStreamInput{
		AllProjects: true, Filter: &app.AuditEventFilterInput{Action: "door.*"}, FromSequence: ptr(uint64(5)),
		Sink: app.AuditStreamSinkInput{Type: domain.AuditStreamHTTPS, URL: b.receiver.srv.URL + "/f"}})
	require.NoError(t, err)
	b.run(t)
	b.record(t, "p2", "door.opened", 7) // a project that appears after the stream
	heads := map[string]uint64{"p1": b.head(t, "p1"), "p2": b.head(t, "p2"), "p3": b.head(t, "p3")}
	b.admin = all
	v := b.awaitCaughtUp(t, filtered.Stream.Stream.ID.String(), heads)
	require.Len(t, v.Projects, 3)

	got := b.receiver.sequences("/f")
	want := map[string][]uint64{}
	for p := range heads {
		for _, e := range auditEvents(t, b.app, all, p, "door.*") {
			if e.Sequence >= 5 {
				want[p] = append(want[p], e.Sequence)
			}
		}
	}
	require.Equal(t, want, got, "exactly the events the filter keeps, from sequence 5, in every project")
	require.Len(t, got["p2"], 3, "p2's door events 5..7")
}

func TestAuditStreamPauseHoldsAndDeleteStops(t *testing.T) {
	t.Parallel()
	b := setupStreams(t, streamOpts{})
	b.record(t, "p1", "door.opened", 5)
	s := b.createHTTPS(t, "/paused", app.CreateAuditStreamInput{ProjectIDs: []string{"p1"}})
	id := s.Stream.Stream.ID.String()
	b.run(t)
	b.awaitCaughtUp(t, id, map[string]uint64{"p1": b.head(t, "p1")})

	paused, err := b.app.PauseAuditStream(context.Background(), b.admin, id)
	require.NoError(t, err)
	require.Equal(t, domain.AuditStreamPaused, paused.State)
	held := paused.Projects[0].Acked
	b.record(t, "p1", "door.opened", 20)
	// A second stream of p1 catches up: by then the worker has had every
	// chance to deliver the paused one.
	probe := b.createHTTPS(t, "/probe", app.CreateAuditStreamInput{ProjectIDs: []string{"p1"}})
	b.awaitCaughtUp(t, probe.Stream.Stream.ID.String(), map[string]uint64{"p1": b.head(t, "p1")})
	v, err := b.app.AuditStream(context.Background(), b.admin, id)
	require.NoError(t, err)
	require.Equal(t, domain.AuditStreamPaused, v.State)
	require.Equal(t, held, v.Projects[0].Acked, "a paused stream holds its cursor")
	require.Equal(t, domain.AuditStreamPaused, v.Projects[0].State(v.Stream.Paused))
	require.Greater(t, v.Projects[0].LagEvents(), uint64(19))
	requireComplete(t, b.receiver.sequences("/paused")["p1"], 1, held)

	_, err = b.app.ResumeAuditStream(context.Background(), b.admin, id)
	require.NoError(t, err)
	b.awaitCaughtUp(t, id, map[string]uint64{"p1": b.head(t, "p1")})
	requireComplete(t, b.receiver.sequences("/paused")["p1"], 1, b.head(t, "p1"))

	_, err = b.app.DeleteAuditStream(context.Background(), b.admin, id, false)
	requireCode(t, err, app.CodeConfirmationRequired)
	deleted, err := b.app.DeleteAuditStream(context.Background(), b.admin, id, true)
	require.NoError(t, err)
	require.Equal(t, s.Stream.Stream.ID, deleted)
	before := len(b.receiver.sequences("/paused")["p1"])
	b.record(t, "p1", "door.opened", 10)
	b.awaitCaughtUp(t, probe.Stream.Stream.ID.String(), map[string]uint64{"p1": b.head(t, "p1")})
	require.Len(t, b.receiver.sequences("/paused")["p1"], before, "a deleted stream delivers nothing more")
	_, err = b.app.AuditStream(context.Background(), b.admin, id)
	require.Equal(t, app.ErrAuditStreamNotFound, err)
	require.Zero(t, countRowsWhere(t, b.pool, "audit_stream_cursors", "stream_id = '"+id+"'"))
	for _, action := range []string{"audit.stream.paused", "audit.stream.resumed", "audit.stream.deleted"} {
		require.Len(t, auditEvents(t, b.app, b.admin, "p1", action), 1, action)
	}
}

func TestAuditStreamFailingReceiverKeepsCursorThenCompletes(t *testing.T) {
	t.Parallel()
	b := setupStreams(t, streamOpts{streams: app.StreamConfig{BatchEvents: 50}})
	down := true
	b.receiver.mu.Lock()
	b.receiver.fail = func(string) bool { return down }
	b.receiver.mu.Unlock()
	b.record(t, "p1", "door.opened", 120)
	s := b.createHTTPS(t, "/down", app.CreateAuditStreamInput{ProjectIDs: []string{"p1"}})
	id := s.Stream.Stream.ID.String()
	b.run(t)
	var v app.AuditStreamView
	require.Eventually(t, func() bool {
		var err error
		v, err = b.app.AuditStream(context.Background(), b.admin, id)
		require.NoError(t, err)
		return v.State == domain.AuditStreamFailing && v.Projects[0].Failures >= 2
	}, 30*time.Second, 10*time.Millisecond)
	require.Contains(t, v.Projects[0].LastError, "503")
	require.NotNil(t, v.Projects[0].LastErrorAt)
	require.Zero(t, v.Projects[0].Acked, "nothing acknowledged, the cursor holds")

	b.receiver.mu.Lock()
	down = false
	b.receiver.mu.Unlock()
	v = b.awaitCaughtUp(t, id, map[string]uint64{"p1": b.head(t, "p1")})
	require.Empty(t, v.Projects[0].LastError, "a success clears the error")
	require.Equal(t, domain.AuditStreamRunning, v.State)
	requireComplete(t, b.receiver.sequences("/down")["p1"], 1, b.head(t, "p1"))
}

// TestAuditStreamCircuitOpensThenOneProbeAfterAGrowingBackoffCloses: the
// webhooks' breaker policy applies to each cursor: after Failures failed
// deliveries in a row it opens (no request until the backoff passed), a
// failed probe doubles the backoff (up to MaxBackoff), and a successful
// one closes it.
func TestAuditStreamCircuitOpensThenOneProbeAfterAGrowingBackoffCloses(t *testing.T) {
	t.Parallel()
	policy := domain.WebhookBreakerPolicy{Failures: 3, Backoff: time.Second, MaxBackoff: 2 * time.Second}
	b := setupStreams(t, streamOpts{breaker: policy})
	down := true
	b.receiver.mu.Lock()
	b.receiver.fail = func(string) bool { return down }
	b.receiver.mu.Unlock()
	failedAt := func() []time.Time {
		b.receiver.mu.Lock()
		defer b.receiver.mu.Unlock()
		return append([]time.Time(nil), b.receiver.failedAt["/breaker"]...)
	}
	b.record(t, "p1", "door.opened", 10)
	s := b.createHTTPS(t, "/breaker", app.CreateAuditStreamInput{ProjectIDs: []string{"p1"}})
	id := s.Stream.Stream.ID.String()
	b.run(t)
	awaitFailures := func(n int) domain.AuditStreamHealth {
		var v app.AuditStreamView
		require.Eventually(t, func() bool {
			var err error
			v, err = b.app.AuditStream(context.Background(), b.admin, id)
			require.NoError(t, err)
			return v.Projects[0].Failures >= n
		}, 30*time.Second, 10*time.Millisecond)
		require.Equal(t, n, v.Projects[0].Failures)
		return v.Projects[0]
	}

	third := awaitFailures(3)
	require.Equal(t, domain.WebhookCircuitOpen, third.Circuit(time.Now(), policy))
	require.GreaterOrEqual(t, third.RetryAt.Sub(*third.LastErrorAt), time.Second, "open for the breaker's backoff")
	fourth := awaitFailures(4)
	at := failedAt()
	require.Len(t, at, 4, "no request while open, then one probe")
	require.False(t, at[3].Before(*third.RetryAt), "the probe went out once the backoff passed")
	require.GreaterOrEqual(t, fourth.RetryAt.Sub(*fourth.LastErrorAt), 2*time.Second, "a failed probe doubles the backoff")

	b.receiver.mu.Lock()
	down = false
	b.receiver.mu.Unlock()
	v := b.awaitCaughtUp(t, id, map[string]uint64{"p1": b.head(t, "p1")})
	require.Zero(t, v.Projects[0].Failures)
	require.Equal(t, domain.WebhookCircuitClosed, v.Projects[0].Circuit(time.Now(), v.Breaker), "the probe's success closes it")
	require.Len(t, failedAt(), 4)
}

func TestAuditStreamAccess(t *testing.T) {
	t.Parallel()
	b := setupStreams(t, streamOpts{})
	ctx := context.Background()
	s := b.createHTTPS(t, "/x", app.CreateAuditStreamInput{ProjectIDs: []string{"p1", "p2"}})
	id := s.Stream.Stream.ID.String()

	requireHiddenStream := func(who app.Identity) {
		t.Helper()
		_, err := b.app.AuditStream(ctx, who, id)
		require.Equal(t, app.ErrAuditStreamNotFound, err)
		_, err = b.app.PauseAuditStream(ctx, who, id)
		require.Equal(t, app.ErrAuditStreamNotFound, err)
		_, err = b.app.DeleteAuditStream(ctx, who, id, true)
		require.Equal(t, app.ErrAuditStreamNotFound, err)
		page, err := b.app.AuditStreams(ctx, who, nil, "")
		require.NoError(t, err)
		require.Empty(t, page.Items)
	}
	requireHiddenStream(inTenant(b.admin, "t2"))
	onlyP1 := b.admin
	onlyP1.ProjectIDs = []string{"p1"}
	requireHiddenStream(onlyP1)
	_, err := b.app.AuditStream(ctx, b.admin, "not-an-id")
	require.Equal(t, app.ErrAuditStreamNotFound, err)

	_, err = b.app.AuditStream(ctx, withPermissions(b.admin, app.PermissionStreamsWrite), id)
	requireCode(t, err, app.CodeForbidden)
	_, err = b.app.PauseAuditStream(ctx, withPermissions(b.admin, app.PermissionStreamsRead), id)
	requireCode(t, err, app.CodeForbidden)
	_, err = b.app.CreateAuditStream(ctx, onlyP1, app.CreateAuditStreamInput{ProjectIDs: []string{"p2"},
		Sink: app.AuditStreamSinkInput{Type: domain.AuditStreamHTTPS, URL: b.receiver.srv.URL}})
	require.Equal(t, app.ErrProjectNotFound, err)
	_, err = b.app.CreateAuditStream(ctx, b.admin, app.CreateAuditStreamInput{AllProjects: true,
		Sink: app.AuditStreamSinkInput{Type: domain.AuditStreamHTTPS, URL: b.receiver.srv.URL}})
	requireCode(t, err, app.CodeForbidden)

	page, err := b.app.AuditStreams(ctx, b.admin, nil, "")
	require.NoError(t, err)
	require.Len(t, page.Items, 1)
	require.Equal(t, s.Stream.Stream.ID, page.Items[0].Stream.ID)
}

func TestAuditStreamBadInput(t *testing.T) {
	t.Parallel()
	b := setupStreams(t, streamOpts{})
	ctx := context.Background()
	https := app.AuditStreamSinkInput{Type: domain.AuditStreamHTTPS, URL: b.receiver.srv.URL}
	for name, tc := range map[string]struct {
		in    app.CreateAuditStreamInput
		field string
	}{
		"no projects":       {app.CreateAuditStreamInput{Sink: https}, "projectIds"},
		"both":              {app.CreateAuditStreamInput{ProjectIDs: []string{"p1"}, AllProjects: true, Sink: https}, "projectIds"},
		"sink type":         {app.CreateAuditStreamInput{ProjectIDs: []string{"p1"}, Sink: app.AuditStreamSinkInput{Type: "FTP", URL: "x"}}, "sink.type"},
		"http url":          {app.CreateAuditStreamInput{ProjectIDs: []string{"p1"}, Sink: app.AuditStreamSinkInput{Type: domain.AuditStreamHTTPS, URL: "http://example.com/x"}}, "sink.url"},
		"private url":       {app.CreateAuditStreamInput{ProjectIDs: []string{"p1"}, Sink: app.AuditStreamSinkInput{Type: domain.AuditStreamHTTPS, URL: "https://10.0.0.1/x"}}, "sink.url"},
		"splunk no token":   {app.CreateAuditStreamInput{ProjectIDs: []string{"p1"}, Sink: app.AuditStreamSinkInput{Type: domain.AuditStreamSplunkHEC, URL: b.receiver.srv.URL}}, "sink.token"},
		"datadog no key":    {app.CreateAuditStreamInput{ProjectIDs: []string{"p1"}, Sink: app.AuditStreamSinkInput{Type: domain.AuditStreamDatadogLogs, URL: b.receiver.srv.URL}}, "sink.apiKey"},
		"token for https":   {app.CreateAuditStreamInput{ProjectIDs: []string{"p1"}, Sink: app.AuditStreamSinkInput{Type: domain.AuditStreamHTTPS, URL: b.receiver.srv.URL, Token: ptr("t")}}, "sink.token"},
		"s3 without opener": {app.CreateAuditStreamInput{ProjectIDs: []string{"p1"}, Sink: app.AuditStreamSinkInput{Type: domain.AuditStreamS3, URL: "s3://b"}}, ""},
		"from zero":         {app.CreateAuditStreamInput{ProjectIDs: []string{"p1"}, Sink: https, FromSequence: ptr(uint64(0))}, "fromSequence"},
	} {
		_, err := b.app.CreateAuditStream(ctx, b.admin, tc.in)
		var aerr *app.Error
		require.ErrorAs(t, err, &aerr, name)
		if tc.field == "" {
			require.Equal(t, app.CodeInvalidState, aerr.Code, name)
			continue
		}
		require.Equal(t, app.CodeBadUserInput, aerr.Code, name)
		require.Equal(t, tc.field, aerr.Field, name)
	}
	require.Zero(t, countRows(t, b.pool, "audit_streams"))
}

// countRowsWhere counts the rows of table matching cond.
func countRowsWhere(t *testing.T, pool *pgxpool.Pool, table, cond string) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), fmt.Sprintf("SELECT count(*) FROM %s WHERE %s", table, cond)).Scan(&n))
	return n
}

func TestAuditStreamLagInMetrics(t *testing.T) {
	t.Parallel()
	b := setupStreams(t, streamOpts{})
	b.record(t, "p1", "door.opened", 30)
	s := b.createHTTPS(t, "/lag", app.CreateAuditStreamInput{ProjectIDs: []string{"p1"}})
	// No worker runs: the whole project is pending.
	m := metrics.New(slog.New(slog.DiscardHandler))
	m.ObserveStreams(store.New(b.pool).AllAuditStreamLag, 5*time.Second)
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	labels := `{project="p1",stream="` + s.Stream.Stream.ID.String() + `",tenant="t1"}`
	require.Contains(t, rec.Body.String(), "aether_stream_lag_events"+labels+" "+strconv.FormatUint(b.head(t, "p1"), 10))
	require.Regexp(t, `aether_stream_lag_seconds`+regexp.QuoteMeta(labels)+` [0-9.e+-]+\n`, rec.Body.String())
	require.NotContains(t, rec.Body.String(), "aether_stream_lag_seconds"+labels+" 0\n", "events are pending: their age counts")

	b.run(t)
	b.awaitCaughtUp(t, s.Stream.Stream.ID.String(), map[string]uint64{"p1": b.head(t, "p1")})
	rec = httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	require.Contains(t, rec.Body.String(), "aether_stream_lag_events"+labels+" 0\n")
	require.Contains(t, rec.Body.String(), "aether_stream_lag_seconds"+labels+" 0\n")
}
