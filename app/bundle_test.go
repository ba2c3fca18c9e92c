package app_test

// The worlds of the webhook and export use-case tests: the App over a fresh
// database (storetest), a clock the test moves, a real HTTPS receiver with
// the real webhook.Sender, and a real (in-memory) object bucket. Outbox work
// is read back from River's own table, where the use cases commit it, and
// run by calling the use case the worker would call, so a test decides when
// each job runs. Each test file builds its own small bundle on these.

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"gocloud.dev/blob"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/export"
	"github.com/aetheriot/aether-audit/jobargs"
	"github.com/aetheriot/aether-audit/secrets"
	"github.com/aetheriot/aether-audit/store"
	"github.com/aetheriot/aether-audit/store/storetest"
	"github.com/aetheriot/aether-audit/webhook"
)

// newTestClock is the App's clock (Config.Now): it stands still until the
// test moves it (manualClock of rate_limit_test.go). It starts at the wall
// clock's present, so that receivers and River see plausible times.
func newTestClock() *manualClock {
	return &manualClock{now: time.Now().UTC().Truncate(time.Microsecond)}
}

// Set moves the clock to t, unless t lies in its past.
func (c *manualClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.now) {
		c.now = t
	}
}

// riverJob is one job a use case committed to River's table.
type riverJob[T any] struct {
	ID          int64
	Args        T
	Queue       string
	ScheduledAt time.Time
	MaxAttempts int
}

// jobsAfter returns the jobs of T's kind with ids after afterID, oldest
// first.
func jobsAfter[T interface{ Kind() string }](t *testing.T, pool *pgxpool.Pool, afterID int64) []riverJob[T] {
	t.Helper()
	var zero T
	rows, err := pool.Query(context.Background(), `SELECT id, args, queue, scheduled_at, max_attempts
		FROM river_job WHERE kind = $1 AND id > $2 ORDER BY id`, zero.Kind(), afterID)
	require.NoError(t, err)
	defer rows.Close()
	var out []riverJob[T]
	for rows.Next() {
		var (
			j   riverJob[T]
			raw []byte
		)
		require.NoError(t, rows.Scan(&j.ID, &raw, &j.Queue, &j.ScheduledAt, &j.MaxAttempts))
		require.NoError(t, json.Unmarshal(raw, &j.Args))
		out = append(out, j)
	}
	require.NoError(t, rows.Err())
	return out
}

// auditEvents returns project's events whose action matches action
// ("prefix.*" allowed), oldest first.
func auditEvents(t *testing.T, a *app.App, id app.Identity, project, action string) []domain.AuditEvent {
	t.Helper()
	first := app.MaxPageSize
	page, err := a.SearchAuditEvents(context.Background(), id, app.SearchAuditEventsInput{ProjectID: project,
		Filter: app.AuditEventFilterInput{Action: action}, First: &first, Order: domain.OldestFirst})
	require.False(t, page.HasNextPage)
	require.NoError(t, err)
	out := make([]domain.AuditEvent, len(page.Edges))
	for i, e := range page.Edges {
		out[i] = e.Event
	}
	return out
}

// inTenant returns id acting in tenant instead.
func inTenant(id app.Identity, tenant string) app.Identity {
	id.TenantID = tenant
	return id
}

// withPermissions returns id holding only perms.
func withPermissions(id app.Identity, perms ...app.Permission) app.Identity {
	id.Permissions = perms
	return id
}

// requireHidden checks that call, made by id with a missing or a malformed
// record id, fails with notFound, and that it fails exactly so for
// identities that cannot see recordID: id in another tenant, and id
// without project p1.
func requireHidden(t *testing.T, id app.Identity, notFound error, recordID string, call func(app.Identity, string) error) {
	t.Helper()
	require.Equal(t, notFound, call(id, uuid.NewString()), "a missing id")
	require.Equal(t, notFound, call(id, "not-an-id"), "a malformed id")
	onlyP2 := id
	onlyP2.ProjectIDs = []string{"p2"}
	for _, other := range []app.Identity{inTenant(id, "t2"), onlyP2} {
		require.Equal(t, notFound, call(other, recordID), "another tenant's or project's record looks exactly like a missing one")
	}
}

// countRows counts the rows of a table of the test's database.
func countRows(t *testing.T, pool *pgxpool.Pool, table string) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n))
	return n
}

// receivedRequest is one request a receiver got.
type receivedRequest struct {
	Path   string
	Header http.Header
	Body   []byte
}

// receiver is a real HTTPS server on 127.0.0.1. It records each request and
// answers through respond, called with the request's 1-based number.
type receiver struct {
	srv *httptest.Server
	// arrived gets each request as it arrives, before it is answered.
	arrived chan receivedRequest

	mu      sync.Mutex
	got     []receivedRequest
	respond func(n int, w http.ResponseWriter, r *http.Request)
}

func newReceiver(t *testing.T) *receiver {
	t.Helper()
	rc := &receiver{arrived: make(chan receivedRequest, 100), respond: status(http.StatusOK)}
	rc.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got := receivedRequest{Path: r.URL.Path, Header: r.Header.Clone(), Body: body}
		rc.mu.Lock()
		rc.got = append(rc.got, got)
		n, respond := len(rc.got), rc.respond
		rc.mu.Unlock()
		rc.arrived <- got
		respond(n, w, r)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

// setRespond makes respond answer the requests from now on.
func (rc *receiver) setRespond(respond func(n int, w http.ResponseWriter, r *http.Request)) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.respond = respond
}

func (rc *receiver) requests() []receivedRequest {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]receivedRequest(nil), rc.got...)
}

// hold makes the receiver hold every request from now on until release is
// called (at the latest when the test ends), then answer 200.
func (rc *receiver) hold(t *testing.T) (release func()) {
	held := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(held) }) }
	t.Cleanup(release)
	rc.setRespond(func(n int, w http.ResponseWriter, r *http.Request) {
		<-held
		status(http.StatusOK)(n, w, r)
	})
	return release
}

// status answers every request with code and the body "ok".
func status(code int) func(int, http.ResponseWriter, *http.Request) {
	return func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(code)
		_, _ = io.WriteString(w, "ok")
	}
}

// signatures returns the v1 entries of a request's webhook-signature header
// that verify with secret ("whsec_..."), by their position: computed here
// from the Standard Webhooks rules, not with the service's signer.
func signatures(t *testing.T, secret string, req receivedRequest) (valid []int) {
	t.Helper()
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	require.NoError(t, err)
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(req.Header.Get("webhook-id") + "." + req.Header.Get("webhook-timestamp") + "."))
	mac.Write(req.Body)
	want := mac.Sum(nil)
	for i, entry := range strings.Fields(req.Header.Get("webhook-signature")) {
		sig, ok := strings.CutPrefix(entry, "v1,")
		if !ok {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(sig)
		if err == nil && hmac.Equal(got, want) {
			valid = append(valid, i)
		}
	}
	return valid
}

var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}

// webhookBundle is the world of a webhook use-case test: the App (master
// key, real sender trusting the receiver's certificate, the registry and
// sender relaxed to reach 127.0.0.1 only), its pool and clock, and a
// receiver. admin reads and writes webhooks and reads audit events of p1
// and p2; writer records events.
type webhookBundle struct {
	app      *app.App
	pool     *pgxpool.Pool
	clock    *manualClock
	cfg      app.Config
	receiver *receiver
	admin    app.Identity
	writer   app.Identity

	lastFanout, lastDelivery int64
}

// webhookOpts adjust setupWebhooks.
type webhookOpts struct {
	// schedule is the retry schedule; nil for the default.
	schedule domain.RetrySchedule
	// senderTimeout bounds each request; default 5 s.
	senderTimeout time.Duration
	// perDestination is the in-flight limit per destination; 0 for the
	// default.
	perDestination int
	// strictSender leaves the sender's SSRF defence fully on, while the
	// registry still accepts 127.0.0.1 URLs.
	strictSender bool
	// breaker is the circuit breaker's policy; zero fields take defaults.
	breaker domain.WebhookBreakerPolicy
	// pool is the database; nil for a new one.
	pool *pgxpool.Pool
}

func setupWebhooks(t *testing.T, o webhookOpts) *webhookBundle {
	t.Helper()
	pool := o.pool
	if pool == nil {
		pool = storetest.NewPool(t)
	}
	rc := newReceiver(t)
	box, err := secrets.NewBox(bytes.Repeat([]byte{1}, secrets.KeySize))
	require.NoError(t, err)
	senderCfg := webhook.SenderConfig{Timeout: o.senderTimeout, AllowPrefixes: loopback,
		RootCAs: rc.srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs}
	if senderCfg.Timeout == 0 {
		senderCfg.Timeout = 5 * time.Second
	}
	if o.strictSender {
		senderCfg.AllowPrefixes = nil
	}
	sender := webhook.NewSender(senderCfg)
	t.Cleanup(sender.CloseIdleConnections)
	clock := newTestClock()
	cfg := app.Config{Now: clock.Now, Logger: slog.New(slog.DiscardHandler), Webhooks: app.WebhookConfig{
		Box: box, Sender: sender, RetrySchedule: o.schedule, URLPolicy: webhook.URLPolicy{AllowPrefixes: loopback},
		MaxInFlightPerDestination: o.perDestination, Breaker: o.breaker,
	}}
	return &webhookBundle{
		app: app.New(store.New(pool), cfg), pool: pool, clock: clock, cfg: cfg, receiver: rc,
		admin: app.Identity{Subject: "ops", TenantID: "t1", ProjectIDs: []string{"p1", "p2"}, Permissions: []app.Permission{
			app.PermissionWebhooksRead, app.PermissionWebhooksWrite, app.PermissionDeliveriesRedrive, app.PermissionAuditRead}},
		writer: app.Identity{Subject: "svc", TenantID: "t1", ProjectIDs: []string{"p1", "p2"},
			Permissions: []app.Permission{app.PermissionAuditWrite}},
	}
}

// otherApp is another process on the same database, its configuration
// changed by change.
func (b *webhookBundle) otherApp(change func(*app.Config)) *app.App {
	return otherApp(b.pool, b.cfg, change)
}

// otherApp is an App on pool with cfg changed by change.
func otherApp(pool *pgxpool.Pool, cfg app.Config, change func(*app.Config)) *app.App {
	change(&cfg)
	return app.New(store.New(pool), cfg)
}

// createDestination registers the receiver's URL plus path in p1.
func (b *webhookBundle) createDestination(t *testing.T, path string) app.WebhookDestinationWithSecret {
	t.Helper()
	d, err := b.app.CreateWebhookDestination(context.Background(), b.admin, app.CreateWebhookDestinationInput{
		ProjectID: "p1", URL: b.receiver.srv.URL + path})
	require.NoError(t, err)
	return d
}

// subscribe subscribes a destination of p1 to eventTypes.
func (b *webhookBundle) subscribe(t *testing.T, destinationID string, eventTypes ...string) domain.WebhookSubscription {
	t.Helper()
	sub, err := b.app.CreateWebhookSubscription(context.Background(), b.admin, app.CreateWebhookSubscriptionInput{
		ProjectID: "p1", DestinationID: destinationID, EventTypes: eventTypes})
	require.NoError(t, err)
	return sub
}

// record records an event of p1 with action.
func (b *webhookBundle) record(t *testing.T, action string) domain.AuditEvent {
	t.Helper()
	e, err := b.app.RecordAuditEvent(context.Background(), b.writer, draft("p1", action), "")
	require.NoError(t, err)
	return e
}

// fanOut runs the fan-out jobs committed since the last call, as River's
// worker would, and returns how many deliveries they created.
func (b *webhookBundle) fanOut(t *testing.T) int {
	t.Helper()
	n := 0
	for _, j := range jobsAfter[jobargs.WebhookFanoutArgs](t, b.pool, b.lastFanout) {
		created, err := b.app.FanOutWebhookDeliveries(context.Background(), j.Args)
		require.NoError(t, err)
		n += created
		b.lastFanout = j.ID
	}
	return n
}

// send records an event of p1 with action and runs its fan-out and then
// the delivery jobs committed since the last call; it returns the event and
// the jobs it ran.
func (b *webhookBundle) send(t *testing.T, action string) (domain.AuditEvent, []riverJob[jobargs.WebhookDeliveryArgs]) {
	t.Helper()
	e := b.record(t, action)
	b.fanOut(t)
	return e, b.deliver(t)
}

// deliveryJobs returns the delivery jobs committed since the last call
// (without running them).
func (b *webhookBundle) deliveryJobs(t *testing.T) []riverJob[jobargs.WebhookDeliveryArgs] {
	t.Helper()
	jobs := jobsAfter[jobargs.WebhookDeliveryArgs](t, b.pool, b.lastDelivery)
	if len(jobs) > 0 {
		b.lastDelivery = jobs[len(jobs)-1].ID
	}
	return jobs
}

// deliver runs the delivery jobs committed since the last call, as River's
// worker would, and returns them. A test moves the clock to a retry's time
// before it runs the retry's job.
func (b *webhookBundle) deliver(t *testing.T) []riverJob[jobargs.WebhookDeliveryArgs] {
	t.Helper()
	jobs := b.deliveryJobs(t)
	for _, j := range jobs {
		require.NoError(t, b.app.DeliverWebhooks(context.Background(), j.Args))
	}
	return jobs
}

// delivery reads one delivery with its attempts.
func (b *webhookBundle) delivery(t *testing.T, id string) domain.WebhookDelivery {
	t.Helper()
	d, err := b.app.WebhookDelivery(context.Background(), b.admin, id)
	require.NoError(t, err)
	return d
}

// deliveries lists p1's deliveries matching in (ProjectID set to p1).
func (b *webhookBundle) deliveries(t *testing.T, in app.WebhookDeliveriesInput) []domain.WebhookDelivery {
	t.Helper()
	in.ProjectID = "p1"
	page, err := b.app.WebhookDeliveries(context.Background(), b.admin, in)
	require.NoError(t, err)
	return page.Items
}

// exportBundle is the world of an export use-case test: the App over an
// in-memory bucket with a download key, its pool and clock. user reads,
// requests, expires and downloads exports and reads audit events of p1 and
// p2; svc records events and appends history.
type exportBundle struct {
	app    *app.App
	pool   *pgxpool.Pool
	clock  *manualClock
	cfg    app.Config
	bucket *blob.Bucket
	user   app.Identity
	svc    app.Identity
}

func setupExports(t *testing.T, cfg app.ExportConfig) *exportBundle {
	t.Helper()
	pool := storetest.NewPool(t)
	bucket, err := export.OpenBucket(context.Background(), "mem://")
	require.NoError(t, err)
	t.Cleanup(func() { _ = bucket.Close() })
	cfg.Bucket = bucket
	cfg.DownloadKey = bytes.Repeat([]byte{7}, 32)
	clock := newTestClock()
	// Failures the tests provoke are logged: keep them out of the output.
	appCfg := app.Config{Now: clock.Now, Exports: cfg, Logger: slog.New(slog.DiscardHandler)}
	return &exportBundle{
		app: app.New(store.New(pool), appCfg), pool: pool, clock: clock, cfg: appCfg, bucket: bucket,
		user: app.Identity{Subject: "auditor", TenantID: "t1", ProjectIDs: []string{"p1", "p2"}, Permissions: []app.Permission{
			app.PermissionExportsRead, app.PermissionExportsWrite, app.PermissionExportsDownload, app.PermissionAuditRead}},
		svc: app.Identity{Subject: "svc", TenantID: "t1", ProjectIDs: []string{"p1", "p2"}, Permissions: []app.Permission{
			app.PermissionAuditWrite, app.PermissionHistoryWrite}},
	}
}

// exportInput is a valid request of an AUDIT export of p1 around the time
// of draft's events (occurred), changed by change.
func exportInput(change func(*app.RequestDataExportInput)) app.RequestDataExportInput {
	in := app.RequestDataExportInput{ProjectID: "p1", Kind: domain.DataExportAudit,
		From: occurred.Add(-time.Hour), To: occurred.Add(time.Hour),
		Format: domain.DataExportNDJSON, Compression: domain.DataExportUncompressed, Confirm: true}
	if change != nil {
		change(&in)
	}
	return in
}

// otherApp is another process on the same database, its configuration
// changed by change.
func (b *exportBundle) otherApp(change func(*app.Config)) *app.App {
	return otherApp(b.pool, b.cfg, change)
}

// brokenStorage is another process whose object storage fails every call
// (its bucket is closed).
func (b *exportBundle) brokenStorage(t *testing.T) *app.App {
	t.Helper()
	bucket, err := export.OpenBucket(context.Background(), "mem://")
	require.NoError(t, err)
	require.NoError(t, bucket.Close())
	return b.otherApp(func(c *app.Config) { c.Exports.Bucket = bucket })
}

func (b *exportBundle) request(t *testing.T, change func(*app.RequestDataExportInput)) domain.DataExport {
	t.Helper()
	e, err := b.app.RequestDataExport(context.Background(), b.user, exportInput(change))
	require.NoError(t, err)
	return e
}

// runExport runs attempt of e's job on a as River's worker would, with
// complete as the job's completion in the export's final transaction (nil:
// none).
func runExport(ctx context.Context, a *app.App, e domain.DataExport, attempt int, complete func(context.Context, app.Tx) error) error {
	return a.RunDataExport(ctx, app.DataExportRun{
		Args: jobargs.DataExportJobArgs{TenantID: e.TenantID, ExportID: e.ID}, Attempt: attempt, Complete: complete,
	})
}

// counting is a job completion that counts its calls in n.
func counting(n *int) func(context.Context, app.Tx) error {
	return func(context.Context, app.Tx) error {
		*n++
		return nil
	}
}

// ready requests an export changed by change and runs it to READY.
func (b *exportBundle) ready(t *testing.T, change func(*app.RequestDataExportInput)) domain.DataExport {
	t.Helper()
	e := b.request(t, change)
	require.NoError(t, runExport(context.Background(), b.app, e, 1, nil))
	return b.get(t, e)
}

// get reads e again.
func (b *exportBundle) get(t *testing.T, e domain.DataExport) domain.DataExport {
	t.Helper()
	cur, err := b.app.DataExport(context.Background(), b.user, e.ID.String())
	require.NoError(t, err)
	return cur
}

// objects lists the bucket's keys.
func (b *exportBundle) objects(t *testing.T) []string {
	t.Helper()
	var keys []string
	it := b.bucket.List(nil)
	for {
		obj, err := it.Next(context.Background())
		if err == io.EOF {
			return keys
		}
		require.NoError(t, err)
		keys = append(keys, obj.Key)
	}
}
