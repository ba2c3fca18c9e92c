package jobs_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/jobargs"
	"github.com/aetheriot/aether-audit/jobs"
	"github.com/aetheriot/aether-audit/secrets"
	"github.com/aetheriot/aether-audit/store"
	"github.com/aetheriot/aether-audit/store/storetest"
	"github.com/aetheriot/aether-audit/webhook"
)

// received is one request a test receiver got.
type received struct {
	header http.Header
	body   []byte
}

// receiver is a real HTTPS server on 127.0.0.1 that records requests and
// answers with status(n) for the n-th request (1-based).
type receiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	got    []received
	status func(n int) int
	// hold, when set, is waited on before answering.
	hold chan struct{}
	// arrived gets a value per request as it arrives.
	arrived chan struct{}
}

func newReceiver(t *testing.T, status func(n int) int) *receiver {
	r := &receiver{status: status, arrived: make(chan struct{}, 1000)}
	r.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got = append(r.got, received{header: req.Header.Clone(), body: body})
		n := len(r.got)
		hold := r.hold
		r.mu.Unlock()
		r.arrived <- struct{}{}
		if hold != nil {
			select {
			case <-hold:
			case <-req.Context().Done():
				// Abandoned by the client: answer nothing at all (a
				// handler that returns would still send a 200 should
				// the connection be up).
				panic(http.ErrAbortHandler)
			}
		}
		code := r.status(n)
		if code == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "1")
		}
		w.WriteHeader(code)
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) requests() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

func always(code int) func(int) int { return func(int) int { return code } }

// bundle is a webhook test's world: the app with a real sender, a River
// client running every worker, and identities.
type bundle struct {
	app    *app.App
	pool   *pgxpool.Pool
	river  *river.Client[pgx.Tx]
	cfg    app.WebhookConfig
	admin  app.Identity
	writer app.Identity
}

type setupOpts struct {
	schedule string
	// noPrefixes leaves the sender's SSRF defence fully on (the registry
	// still accepts 127.0.0.1 URLs).
	noPrefixes bool
	// noWorkers leaves River stopped.
	noWorkers bool
	rootCAs   *receiver
	// workers and perDestination bound River's webhook workers and each
	// destination's requests in flight; zero for the defaults.
	workers, perDestination int
	// breaker is the circuit breaker's policy; zero fields take defaults.
	breaker domain.WebhookBreakerPolicy
}

func setupWebhooks(t *testing.T, o setupOpts) *bundle {
	t.Helper()
	pool := storetest.NewPool(t)
	box, err := secrets.NewBox(make([]byte, secrets.KeySize))
	require.NoError(t, err)
	schedule, err := domain.ParseRetrySchedule(o.schedule)
	require.NoError(t, err)
	loopback := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	senderCfg := webhook.SenderConfig{Timeout: 5 * time.Second, AllowPrefixes: loopback}
	if o.noPrefixes {
		senderCfg.AllowPrefixes = nil
	}
	if o.rootCAs != nil {
		senderCfg.RootCAs = o.rootCAs.srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	}
	cfg := app.WebhookConfig{
		Box: box, Sender: webhook.NewSender(senderCfg), RetrySchedule: schedule,
		URLPolicy: webhook.URLPolicy{AllowPrefixes: loopback}, MaxInFlightPerDestination: o.perDestination,
		Breaker: o.breaker,
	}
	b := &bundle{
		app: app.New(store.New(pool), app.Config{Webhooks: cfg}), pool: pool, cfg: cfg,
		admin: app.Identity{Subject: "ops", TenantID: "t1", ProjectIDs: []string{"p1"}, Permissions: []app.Permission{
			app.PermissionWebhooksRead, app.PermissionWebhooksWrite, app.PermissionDeliveriesRedrive, app.PermissionAuditRead}},
		writer: app.Identity{Subject: "svc", TenantID: "t1", ProjectIDs: []string{"p1"}, Permissions: []app.Permission{app.PermissionAuditWrite}},
	}
	if !o.noWorkers {
		b.startWorkers(t, o.workers)
	}
	return b
}

func (b *bundle) startWorkers(t *testing.T, workers int) {
	t.Helper()
	client, err := jobs.NewClient(b.pool, store.New(b.pool), jobs.ClientConfig{App: b.app, FetchCooldown: 10 * time.Millisecond, WebhookWorkers: workers})
	require.NoError(t, err)
	require.NoError(t, client.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = client.Stop(ctx)
	})
	b.river = client
}

// subscribe registers the receiver's URL and subscribes it to eventTypes.
func (b *bundle) subscribe(t *testing.T, r *receiver, eventTypes ...string) (app.WebhookDestinationWithSecret, domain.WebhookSubscription) {
	t.Helper()
	ctx := context.Background()
	dest, err := b.app.CreateWebhookDestination(ctx, b.admin, app.CreateWebhookDestinationInput{ProjectID: "p1", URL: r.srv.URL + "/hook"})
	require.NoError(t, err)
	sub, err := b.app.CreateWebhookSubscription(ctx, b.admin, app.CreateWebhookSubscriptionInput{
		ProjectID: "p1", DestinationID: dest.Destination.ID.String(), EventTypes: eventTypes})
	require.NoError(t, err)
	return dest, sub
}

func (b *bundle) record(t *testing.T, action string) domain.AuditEvent {
	t.Helper()
	e, err := b.app.RecordAuditEvent(context.Background(), b.writer, domain.AuditEventDraft{
		ProjectID: "p1", Action: action, OccurredAt: time.Now().Add(-time.Second),
		Subject:  domain.Subject{Type: domain.SubjectUser, ID: "u1"},
		Resource: domain.Resource{Type: "device", ID: "d1"}, Outcome: domain.OutcomeSuccess,
		Details: json.RawMessage(`{"k":"v"}`),
	}, "")
	require.NoError(t, err)
	return e
}

// awaitDelivery waits until the only delivery of event reaches state.
func (b *bundle) awaitDelivery(t *testing.T, event domain.AuditEvent, state domain.WebhookDeliveryState) domain.WebhookDelivery {
	t.Helper()
	var last domain.WebhookDelivery
	require.Eventually(t, func() bool {
		page, err := b.app.WebhookDeliveries(context.Background(), b.admin, app.WebhookDeliveriesInput{ProjectID: "p1", EventID: event.ID.String()})
		require.NoError(t, err)
		if len(page.Items) != 1 {
			return false
		}
		last = page.Items[0]
		return last.State == state
	}, 30*time.Second, 20*time.Millisecond, "delivery of %s never reached %s (last %+v)", event.Action, state, last)
	return last
}

func verify(t *testing.T, secret string, got received) {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	require.NoError(t, err)
	require.NoError(t, wh.Verify(got.body, got.header), "signature verifies with an independent Standard Webhooks implementation")
}

func TestWebhookDeliveredSignedOnce(t *testing.T) {
	r := newReceiver(t, always(200))
	b := setupWebhooks(t, setupOpts{rootCAs: r})
	dest, _ := b.subscribe(t, r, "device.*")

	ignored := b.record(t, "user.login")
	e := b.record(t, "device.firmware.updated")
	d := b.awaitDelivery(t, e, domain.WebhookDeliveryDelivered)

	reqs := r.requests()
	require.Len(t, reqs, 1, "only the matching event is delivered")
	verify(t, dest.SigningSecret, reqs[0])
	require.Equal(t, d.IdempotencyKey, reqs[0].header.Get("webhook-id"))
	require.Equal(t, "application/json", reqs[0].header.Get("content-type"))
	require.NotEmpty(t, reqs[0].header.Get("user-agent"))

	var payload struct {
		Type      string          `json:"type"`
		Timestamp time.Time       `json:"timestamp"`
		Data      json.RawMessage `json:"data"`
	}
	require.NoError(t, json.Unmarshal(reqs[0].body, &payload))
	require.Equal(t, "device.firmware.updated", payload.Type)
	require.True(t, payload.Timestamp.Equal(e.RecordedAt))
	want, err := json.Marshal(e)
	require.NoError(t, err)
	require.JSONEq(t, string(want), string(payload.Data), "data is the event in its API shape")

	require.Len(t, d.Attempts, 1)
	require.Equal(t, domain.WebhookAttemptSucceeded, d.Attempts[0].Outcome)
	require.Equal(t, 200, *d.Attempts[0].StatusCode)
	require.Equal(t, `{"ok":true}`, d.Attempts[0].ResponseBody)
	require.NotNil(t, d.DeliveredAt)

	page, err := b.app.WebhookDeliveries(context.Background(), b.admin, app.WebhookDeliveriesInput{ProjectID: "p1", EventID: ignored.ID.String()})
	require.NoError(t, err)
	require.Empty(t, page.Items)
}

func TestWebhookRetriesDeadLetterAndRedrive(t *testing.T) {
	failing := true
	var mu sync.Mutex
	r := newReceiver(t, func(int) int {
		mu.Lock()
		defer mu.Unlock()
		if failing {
			return 503
		}
		return 204
	})
	b := setupWebhooks(t, setupOpts{rootCAs: r, schedule: "50ms,100ms"})
	dest, _ := b.subscribe(t, r, "device.*")
	e := b.record(t, "device.rebooted")

	d := b.awaitDelivery(t, e, domain.WebhookDeliveryDeadLettered)
	require.Equal(t, 3, d.AttemptCount, "a schedule of 2 delays allows 3 attempts")
	require.Len(t, d.Attempts, 3)
	for _, a := range d.Attempts {
		require.Equal(t, domain.WebhookAttemptFailed, a.Outcome)
		require.Equal(t, 503, *a.StatusCode)
		require.Equal(t, "http_status", a.ErrorClass)
	}
	require.NotEmpty(t, d.LastError)
	require.NotNil(t, d.DeadLetteredAt)

	dead, err := b.app.WebhookDeliveries(context.Background(), b.admin, app.WebhookDeliveriesInput{ProjectID: "p1", State: domain.WebhookDeliveryDeadLettered})
	require.NoError(t, err)
	require.Len(t, dead.Items, 1, "dead letters are visible by filter")

	ctx := context.Background()
	_, err = b.app.RedriveWebhookDelivery(ctx, b.admin, d.ID.String(), false)
	require.Equal(t, app.CodeConfirmationRequired, app.ErrorOf(err).Code)
	noRedrive := b.admin
	noRedrive.Permissions = []app.Permission{app.PermissionWebhooksRead}
	_, err = b.app.RedriveWebhookDelivery(ctx, noRedrive, d.ID.String(), true)
	require.Equal(t, app.CodeForbidden, app.ErrorOf(err).Code)

	mu.Lock()
	failing = false
	mu.Unlock()
	redriven, err := b.app.RedriveWebhookDelivery(ctx, b.admin, d.ID.String(), true)
	require.NoError(t, err)
	require.Contains(t, []domain.WebhookDeliveryState{domain.WebhookDeliveryPending, domain.WebhookDeliveryDelivering, domain.WebhookDeliveryDelivered}, redriven.State)
	d = b.awaitDelivery(t, e, domain.WebhookDeliveryDelivered)
	require.Equal(t, 4, d.AttemptCount)

	reqs := r.requests()
	require.Len(t, reqs, 4)
	for _, req := range reqs {
		require.Equal(t, d.IdempotencyKey, req.header.Get("webhook-id"), "one webhook-id across retries and the redrive")
		verify(t, dest.SigningSecret, req)
	}

	_, err = b.app.RedriveWebhookDelivery(ctx, b.admin, d.ID.String(), true)
	require.Equal(t, app.CodeInvalidState, app.ErrorOf(err).Code, "only a dead letter can be redriven")

	events, err := b.app.SearchAuditEvents(ctx, b.admin, app.SearchAuditEventsInput{ProjectID: "p1",
		Filter: app.AuditEventFilterInput{Action: "webhook.delivery.redriven"}})
	require.NoError(t, err)
	require.Len(t, events.Edges, 1, "the redrive is audited")
}

func TestWebhookRetryAfterIsHonoured(t *testing.T) {
	r := newReceiver(t, func(n int) int {
		if n == 1 {
			return 429
		}
		return 200
	})
	b := setupWebhooks(t, setupOpts{rootCAs: r, schedule: "10ms"})
	b.subscribe(t, r, "device.*")
	e := b.record(t, "device.rebooted")
	d := b.awaitDelivery(t, e, domain.WebhookDeliveryDelivered)
	require.Len(t, d.Attempts, 2)
	require.Equal(t, 429, *d.Attempts[0].StatusCode)
	gap := d.Attempts[1].StartedAt.Sub(*d.Attempts[0].FinishedAt)
	require.GreaterOrEqual(t, gap, 900*time.Millisecond, "Retry-After: 1 outweighs a 10ms schedule")
}

// TestWebhookCrashBetweenDeliveringAndOutcome stops a worker after its
// DELIVERING intent committed and its request reached the receiver, before
// the outcome is recorded: the worker hangs for good, as a killed process
// would, and never writes again. A rerun of the same job, as River's rescue
// does, records the attempt as UNKNOWN, and the resend carries the same
// webhook-id. When the stale worker finally wakes, its late outcome is
// refused (the delivery moved on).
//
// The attempt under way lives in the delivery's row; the second case adds
// the row an earlier version wrote at an attempt's start, as a process of
// that version would leave it, which must be shown once and closed in place.
func TestWebhookCrashBetweenDeliveringAndOutcome(t *testing.T) {
	t.Run("attempt in the delivery row", func(t *testing.T) { crashBetweenDeliveringAndOutcome(t, false) })
	t.Run("attempt row of an earlier version", func(t *testing.T) { crashBetweenDeliveringAndOutcome(t, true) })
}

func crashBetweenDeliveringAndOutcome(t *testing.T, legacyRow bool) {
	r := newReceiver(t, always(200))
	b := setupWebhooks(t, setupOpts{rootCAs: r, noWorkers: true})
	b.subscribe(t, r, "device.*")
	e := b.record(t, "device.rebooted")
	ctx := context.Background()

	// The fan-out job was committed with the event; run it by hand.
	fanout := lastJobArgs[jobargs.WebhookFanoutArgs](t, b.pool, "webhook_fanout")
	n, err := b.app.FanOutWebhookDeliveries(ctx, fanout)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	n, err = b.app.FanOutWebhookDeliveries(ctx, fanout)
	require.NoError(t, err)
	require.Zero(t, n, "a second run of the fan-out creates nothing")
	var deliveries, deliveryJobs int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM webhook_deliveries`).Scan(&deliveries))
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = 'webhook_delivery'`).Scan(&deliveryJobs))
	require.Equal(t, 1, deliveries)
	require.Equal(t, 1, deliveryJobs, "and enqueues nothing")

	args := lastJobArgs[jobargs.WebhookDeliveryArgs](t, b.pool, "webhook_delivery")
	deliveryIDs, _, err := args.IDs()
	require.NoError(t, err)
	require.Len(t, deliveryIDs, 1)
	wake := make(chan struct{})
	stale := make(chan error, 1)
	cfg := b.cfg
	cfg.Sender = hangingSender{real: b.cfg.Sender, wake: wake}
	crashed := app.New(store.New(b.pool), app.Config{Webhooks: cfg})
	go func() { stale <- crashed.DeliverWebhooks(ctx, args) }()
	<-r.arrived // the request reached the receiver; the worker is gone

	d, err := b.app.WebhookDelivery(ctx, b.admin, deliveryIDs[0].String())
	require.NoError(t, err)
	require.Equal(t, domain.WebhookDeliveryDelivering, d.State, "the intent was committed before the request")
	require.Len(t, d.Attempts, 1)
	require.Equal(t, domain.WebhookAttemptDelivering, d.Attempts[0].Outcome)
	require.Equal(t, 1, d.Attempts[0].Number)
	require.Equal(t, d.UpdatedAt, d.Attempts[0].StartedAt)
	if legacyRow {
		_, err := b.pool.Exec(ctx, `INSERT INTO webhook_delivery_attempts (delivery_id, number, outcome, started_at)
			VALUES ($1, 1, 'DELIVERING', $2)`, d.ID, d.UpdatedAt)
		require.NoError(t, err)
		again, err := b.app.WebhookDelivery(ctx, b.admin, d.ID.String())
		require.NoError(t, err)
		require.Equal(t, d.Attempts, again.Attempts, "the row and the delivery's attempt under way are one attempt")
	}

	// River rescues the job and runs it again.
	require.NoError(t, b.app.DeliverWebhooks(ctx, args))
	d, err = b.app.WebhookDelivery(ctx, b.admin, deliveryIDs[0].String())
	require.NoError(t, err)
	require.Len(t, d.Attempts, 1)
	require.Equal(t, domain.WebhookAttemptUnknown, d.Attempts[0].Outcome, "a leftover DELIVERING attempt has an unknown outcome")
	var rows int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM webhook_delivery_attempts WHERE delivery_id = $1`, d.ID).Scan(&rows))
	require.Equal(t, 1, rows, "one row for the lost attempt")
	require.Equal(t, domain.WebhookDeliveryRetrying, d.State)

	b.startWorkers(t, 0)
	d = b.awaitDelivery(t, e, domain.WebhookDeliveryDelivered)
	require.Len(t, d.Attempts, 2)
	require.Equal(t, domain.WebhookAttemptSucceeded, d.Attempts[1].Outcome)
	require.Equal(t, 200, *d.Attempts[1].StatusCode)
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM webhook_delivery_attempts WHERE delivery_id = $1`, d.ID).Scan(&rows))
	require.Equal(t, 1, rows, "the resend's success is kept in the delivery's row, the lost attempt in its own")
	reqs := r.requests()
	require.Len(t, reqs, 2, "the receiver saw the lost attempt and the resend")
	require.Equal(t, reqs[0].header.Get("webhook-id"), reqs[1].header.Get("webhook-id"))
	require.Equal(t, d.IdempotencyKey, reqs[1].header.Get("webhook-id"))

	close(wake)
	require.NoError(t, <-stale)
	after, err := b.app.WebhookDelivery(ctx, b.admin, d.ID.String())
	require.NoError(t, err)
	require.Equal(t, d.State, after.State, "the stale worker's late outcome changed nothing")
	require.Equal(t, d.Attempts, after.Attempts)
}

// hangingSender sends for real, then hangs until wake: a worker that
// stopped between its request and its outcome.
type hangingSender struct {
	real app.WebhookSender
	wake chan struct{}
}

func (s hangingSender) Send(ctx context.Context, req webhook.Request) webhook.Result {
	res := s.real.Send(ctx, req)
	<-s.wake
	return res
}

func lastJobArgs[T any](t *testing.T, pool *pgxpool.Pool, kind string) T {
	t.Helper()
	var raw []byte
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT args FROM river_job WHERE kind = $1 ORDER BY id DESC LIMIT 1`, kind).Scan(&raw))
	var args T
	require.NoError(t, json.Unmarshal(raw, &args))
	return args
}

func TestWebhookSSRFAtSendTime(t *testing.T) {
	r := newReceiver(t, always(200))
	// The registry accepts 127.0.0.1 here, but the sender's dial-time check
	// has no exception: the request must never leave.
	b := setupWebhooks(t, setupOpts{rootCAs: r, noPrefixes: true, schedule: "10ms"})
	b.subscribe(t, r, "device.*")
	e := b.record(t, "device.rebooted")
	d := b.awaitDelivery(t, e, domain.WebhookDeliveryDeadLettered)
	for _, a := range d.Attempts {
		require.Equal(t, "dns", a.ErrorClass, "to the tenant, as a name that does not resolve")
		require.Nil(t, a.StatusCode)
	}
	require.Empty(t, r.requests(), "nothing reached the receiver")
}

func TestWebhookDestinationURLRules(t *testing.T) {
	b := setupWebhooks(t, setupOpts{noWorkers: true})
	b.app = app.New(store.New(b.pool), app.Config{Webhooks: app.WebhookConfig{Box: mustBox(t)}})
	for _, url := range []string{
		"http://example.com/hook", "https://localhost/hook", "https://127.0.0.1/hook", "https://10.0.0.8/hook",
		"https://169.254.169.254/latest", "https://[::1]/hook", "https://[::ffff:127.0.0.1]/hook",
		"https://[64:ff9b::a00:1]/hook", "https://100.64.0.1/", "https://user:pw@example.com/", "not a url",
	} {
		_, err := b.app.CreateWebhookDestination(context.Background(), b.admin, app.CreateWebhookDestinationInput{ProjectID: "p1", URL: url})
		appErr := app.ErrorOf(err)
		require.Equal(t, app.CodeBadUserInput, appErr.Code, url)
		require.Equal(t, "url", appErr.Field, url)
		require.NotEmpty(t, appErr.Message, url)
	}
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM webhook_destinations`).Scan(&n))
	require.Zero(t, n)
	out, err := b.app.CreateWebhookDestination(context.Background(), b.admin, app.CreateWebhookDestinationInput{ProjectID: "p1", URL: "https://hooks.example.com/aether?x=1"})
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(out.SigningSecret, "whsec_"))
	_, err = webhook.ParseSecret(out.SigningSecret)
	require.NoError(t, err)
}

func mustBox(t *testing.T) *secrets.Box {
	box, err := secrets.NewBox(make([]byte, secrets.KeySize))
	require.NoError(t, err)
	return box
}

func TestWebhookDisabledSubscriptionGetsNoNewDeliveries(t *testing.T) {
	r := newReceiver(t, always(200))
	b := setupWebhooks(t, setupOpts{rootCAs: r})
	_, sub := b.subscribe(t, r, "device.*")
	ctx := context.Background()
	first := b.record(t, "device.rebooted")
	b.awaitDelivery(t, first, domain.WebhookDeliveryDelivered)

	disabled, err := b.app.DisableWebhookSubscription(ctx, b.admin, sub.ID.String())
	require.NoError(t, err)
	require.Equal(t, domain.WebhookSubscriptionDisabled, disabled.State)
	again, err := b.app.DisableWebhookSubscription(ctx, b.admin, sub.ID.String())
	require.NoError(t, err, "disabling twice is a no-op success")
	require.Equal(t, disabled.DisabledAt.UnixMicro(), again.DisabledAt.UnixMicro())

	// A second, active subscription shows when the fan-out of the later
	// event has run.
	_, other := b.subscribe(t, r, "device.*")
	second := b.record(t, "device.rebooted")
	require.Eventually(t, func() bool {
		page, err := b.app.WebhookDeliveries(ctx, b.admin, app.WebhookDeliveriesInput{ProjectID: "p1", EventID: second.ID.String()})
		require.NoError(t, err)
		return len(page.Items) == 1 && page.Items[0].SubscriptionID == other.ID
	}, 30*time.Second, 20*time.Millisecond)
	page, err := b.app.WebhookDeliveries(ctx, b.admin, app.WebhookDeliveriesInput{ProjectID: "p1", SubscriptionID: sub.ID.String()})
	require.NoError(t, err)
	require.Len(t, page.Items, 1, "the disabled subscription kept only its earlier delivery")

	events, err := b.app.SearchAuditEvents(ctx, b.admin, app.SearchAuditEventsInput{ProjectID: "p1",
		Filter: app.AuditEventFilterInput{Action: "webhook.subscription.disabled"}})
	require.NoError(t, err)
	require.Len(t, events.Edges, 1, "disabled once, audited once")
}

func TestWebhookSecretRotationSignsWithBoth(t *testing.T) {
	r := newReceiver(t, always(200))
	b := setupWebhooks(t, setupOpts{rootCAs: r})
	dest, _ := b.subscribe(t, r, "device.*")
	ctx := context.Background()
	grace := time.Hour
	rotated, err := b.app.RotateWebhookDestinationSecret(ctx, b.admin, app.RotateWebhookDestinationSecretInput{
		DestinationID: dest.Destination.ID.String(), GracePeriod: &grace})
	require.NoError(t, err)
	require.NotEqual(t, dest.SigningSecret, rotated.SigningSecret)
	require.Equal(t, 2, rotated.Destination.ActiveSecrets)

	e := b.record(t, "device.rebooted")
	b.awaitDelivery(t, e, domain.WebhookDeliveryDelivered)
	reqs := r.requests()
	require.Len(t, reqs, 1)
	require.Len(t, strings.Fields(reqs[0].header.Get("webhook-signature")), 2)
	verify(t, dest.SigningSecret, reqs[0])
	verify(t, rotated.SigningSecret, reqs[0])

	tooLong := 8 * 24 * time.Hour
	_, err = b.app.RotateWebhookDestinationSecret(ctx, b.admin, app.RotateWebhookDestinationSecretInput{
		DestinationID: dest.Destination.ID.String(), GracePeriod: &tooLong})
	require.Equal(t, app.CodeBadUserInput, app.ErrorOf(err).Code)

	var sealed []byte
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT sealed FROM webhook_destination_secrets ORDER BY created_at DESC LIMIT 1`).Scan(&sealed))
	require.NotContains(t, string(sealed), rotated.SigningSecret, "secrets are encrypted at rest")
	require.NotContains(t, string(sealed), strings.TrimPrefix(rotated.SigningSecret, "whsec_"))
}

// TestWebhookSlowDestinationDoesNotStarveOthers holds every request to one
// receiver; with 4 workers and at most 2 requests in flight per
// destination, deliveries to another receiver still go through.
func TestWebhookSlowDestinationDoesNotStarveOthers(t *testing.T) {
	slow := newReceiver(t, always(200))
	hold := make(chan struct{})
	slow.hold = hold
	fast := newReceiver(t, always(200))
	b := setupWebhooks(t, setupOpts{rootCAs: slow, workers: 4, perDestination: 2})
	// Both httptest servers share one CA, so one pool trusts both.
	b.subscribe(t, slow, "slow.*")
	b.subscribe(t, fast, "fast.*")
	for range 6 {
		b.record(t, "slow.event")
	}
	for range 2 {
		<-slow.arrived // two slow requests hold their slots
	}
	e := b.record(t, "fast.event")
	b.awaitDelivery(t, e, domain.WebhookDeliveryDelivered)
	require.Len(t, slow.requests(), 2, "the slow destination never had more than its limit in flight")
	close(hold)
	require.Eventually(t, func() bool { return len(slow.requests()) == 6 }, 30*time.Second, 20*time.Millisecond)
}

// TestWebhookRedriveRestartsTheSchedule: after a redrive the retries follow
// the schedule from its first delay again, not its last.
func TestWebhookRedriveRestartsTheSchedule(t *testing.T) {
	r := newReceiver(t, always(500))
	b := setupWebhooks(t, setupOpts{rootCAs: r, schedule: "10ms,3s"})
	b.subscribe(t, r, "device.*")
	e := b.record(t, "device.rebooted")
	d := b.awaitDelivery(t, e, domain.WebhookDeliveryDeadLettered)
	require.Equal(t, 3, d.AttemptCount)

	_, err := b.app.RedriveWebhookDelivery(context.Background(), b.admin, d.ID.String(), true)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		d, err = b.app.WebhookDelivery(context.Background(), b.admin, d.ID.String())
		require.NoError(t, err)
		return len(d.Attempts) >= 5
	}, 30*time.Second, 20*time.Millisecond)
	gap := d.Attempts[4].StartedAt.Sub(*d.Attempts[3].FinishedAt)
	require.Less(t, gap, 2*time.Second, "the first retry after a redrive waits the first delay (10ms), not the last (3s)")
}

// TestWebhookUnopenableSecretIsAVisibleFailure: a delivery whose secret
// does not open under the master key (the key was changed) fails its
// attempts without sending anything and ends dead-lettered, visible with a
// reason, rather than stuck.
func TestWebhookUnopenableSecretIsAVisibleFailure(t *testing.T) {
	r := newReceiver(t, always(200))
	b := setupWebhooks(t, setupOpts{rootCAs: r, schedule: "10ms", noWorkers: true})
	b.subscribe(t, r, "device.*")
	e := b.record(t, "device.rebooted")

	other := make([]byte, secrets.KeySize)
	other[0] = 1
	box, err := secrets.NewBox(other)
	require.NoError(t, err)
	cfg := b.cfg
	cfg.Box = box
	b.app = app.New(store.New(b.pool), app.Config{Webhooks: cfg})
	b.startWorkers(t, 0)

	d := b.awaitDelivery(t, e, domain.WebhookDeliveryDeadLettered)
	require.Len(t, d.Attempts, 2)
	for _, a := range d.Attempts {
		require.Equal(t, domain.WebhookAttemptFailed, a.Outcome)
		require.Equal(t, "secret_unavailable", a.ErrorClass)
	}
	require.Contains(t, d.LastError, "rotate")
	require.Empty(t, r.requests(), "nothing unsigned was sent")
}

// TestWebhookEventsBeforeTheDisableAreStillDelivered: the fan-out of an
// event recorded while the subscription was active runs after the disable;
// the event is still delivered, while later events are not.
func TestWebhookEventsBeforeTheDisableAreStillDelivered(t *testing.T) {
	r := newReceiver(t, always(200))
	b := setupWebhooks(t, setupOpts{rootCAs: r, noWorkers: true})
	_, sub := b.subscribe(t, r, "device.*")
	ctx := context.Background()
	before := b.record(t, "device.rebooted")
	fanout := lastJobArgs[jobargs.WebhookFanoutArgs](t, b.pool, "webhook_fanout")
	_, err := b.app.DisableWebhookSubscription(ctx, b.admin, sub.ID.String())
	require.NoError(t, err)
	after := b.record(t, "device.rebooted")

	n, err := b.app.FanOutWebhookDeliveries(ctx, fanout)
	require.NoError(t, err)
	require.Equal(t, 1, n, "the event recorded before the disable gets its delivery")
	n, err = b.app.FanOutWebhookDeliveries(ctx, jobargs.WebhookFanoutArgs{TenantID: "t1", ProjectID: "p1",
		FromSequence: 1, ToSequence: after.Sequence})
	require.NoError(t, err)
	require.Zero(t, n, "nothing for the events from the disable on")

	b.startWorkers(t, 0)
	b.awaitDelivery(t, before, domain.WebhookDeliveryDelivered)
	page, err := b.app.WebhookDeliveries(ctx, b.admin, app.WebhookDeliveriesInput{ProjectID: "p1", EventID: after.ID.String()})
	require.NoError(t, err)
	require.Empty(t, page.Items)
}

// TestWebhookUnsentAttemptsAreWithdrawn runs a job of three deliveries to a
// destination that takes one request at a time and holds it: the job's
// context ends while the second and third wait for the slot. Those two were
// never sent, so they go back to PENDING with no attempt used, under a new
// job; the first, whose request was under way, is UNKNOWN and resent. All
// three are then delivered.
func TestWebhookUnsentAttemptsAreWithdrawn(t *testing.T) {
	r := newReceiver(t, always(200))
	hold := make(chan struct{})
	r.hold = hold
	b := setupWebhooks(t, setupOpts{rootCAs: r, noWorkers: true, perDestination: 1})
	b.subscribe(t, r, "device.*")
	ctx := context.Background()
	draft := domain.AuditEventDraft{
		ProjectID: "p1", Action: "device.rebooted", OccurredAt: time.Now().Add(-time.Second),
		Subject:  domain.Subject{Type: domain.SubjectUser, ID: "u1"},
		Resource: domain.Resource{Type: "device", ID: "d1"}, Outcome: domain.OutcomeSuccess,
	}
	_, err := b.app.RecordAuditEvents(ctx, b.writer, app.RecordAuditEventsInput{Events: []domain.AuditEventDraft{draft, draft, draft}})
	require.NoError(t, err)
	n, err := b.app.FanOutWebhookDeliveries(ctx, lastJobArgs[jobargs.WebhookFanoutArgs](t, b.pool, "webhook_fanout"))
	require.NoError(t, err)
	require.Equal(t, 3, n)
	args := lastJobArgs[jobargs.WebhookDeliveryArgs](t, b.pool, "webhook_delivery")
	require.Equal(t, 3, args.Len())

	jobCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- b.app.DeliverWebhooks(jobCtx, args) }()
	<-r.arrived // the first request holds the only slot
	cancel()    // the job's time is up
	require.NoError(t, <-done)

	page, err := b.app.WebhookDeliveries(ctx, b.admin, app.WebhookDeliveriesInput{ProjectID: "p1"})
	require.NoError(t, err)
	require.Len(t, page.Items, 3)
	states := map[domain.WebhookDeliveryState]int{}
	for _, d := range page.Items {
		states[d.State]++
		switch d.State {
		case domain.WebhookDeliveryPending:
			require.Zero(t, d.AttemptCount, "a withdrawn attempt uses none of the budget")
			require.Empty(t, d.Attempts)
		case domain.WebhookDeliveryRetrying:
			require.Len(t, d.Attempts, 1)
			require.Equal(t, domain.WebhookAttemptUnknown, d.Attempts[0].Outcome, "the request under way may have arrived")
		}
	}
	require.Equal(t, map[domain.WebhookDeliveryState]int{domain.WebhookDeliveryPending: 2, domain.WebhookDeliveryRetrying: 1}, states)
	require.Len(t, r.requests(), 1, "the withdrawn attempts were never sent")

	close(hold)
	b.startWorkers(t, 0)
	require.Eventually(t, func() bool {
		page, err := b.app.WebhookDeliveries(ctx, b.admin, app.WebhookDeliveriesInput{ProjectID: "p1"})
		require.NoError(t, err)
		for _, d := range page.Items {
			if d.State != domain.WebhookDeliveryDelivered {
				return false
			}
		}
		return true
	}, 30*time.Second, 20*time.Millisecond, "the withdrawn deliveries are sent by their new job")
	page, err = b.app.WebhookDeliveries(ctx, b.admin, app.WebhookDeliveriesInput{ProjectID: "p1"})
	require.NoError(t, err)
	attempts := 0
	for _, d := range page.Items {
		attempts += len(d.Attempts)
	}
	require.Equal(t, 4, attempts, "one attempt each, and the resend of the one interrupted")
}
