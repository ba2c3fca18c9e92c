package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/domain"
	"github.com/aetheriot/aether-audit/secrets"
	"github.com/aetheriot/aether-audit/webhook"
)

// TestDeliverWebhooks covers the delivery job (webhook_delivery_job.go) and
// the life of one attempt (webhook_attempt.go): the job is run as River's
// worker runs it, against a real receiver.
func TestDeliverWebhooks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	// testBundle has a destination at the receiver's /hook subscribed to
	// device.*.
	type testBundle struct {
		*webhookBundle
		dest app.WebhookDestinationWithSecret
	}
	setup := func(t *testing.T, o webhookOpts) *testBundle {
		t.Helper()
		b := &testBundle{webhookBundle: setupWebhooks(t, o)}
		b.dest = b.createDestination(t, "/hook")
		b.subscribe(t, b.dest.Destination.ID.String(), "device.*")
		return b
	}
	// only returns the only delivery of event.
	only := func(t *testing.T, b *testBundle, event domain.AuditEvent) domain.WebhookDelivery {
		t.Helper()
		ds := b.deliveries(t, app.WebhookDeliveriesInput{EventID: event.ID.String()})
		require.Len(t, ds, 1)
		return ds[0]
	}
	// hourly allows three attempts, an hour and two apart.
	hourly := domain.RetrySchedule{time.Hour, 2 * time.Hour}
	// attemptRows returns the outcomes of the attempt rows of delivery id,
	// by number: a succeeded attempt has none, its delivery's row keeps it.
	attemptRows := func(t *testing.T, b *testBundle, id uuid.UUID) []string {
		t.Helper()
		rows, err := b.pool.Query(ctx, `SELECT outcome FROM webhook_delivery_attempts WHERE delivery_id = $1 ORDER BY number`, id)
		require.NoError(t, err)
		out, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		return out
	}

	t.Run("CommitsDeliveringBeforeTheRequestThenTheOutcome", func(t *testing.T) {
		t.Parallel()
		b := setup(t, webhookOpts{})
		during := make(chan []domain.WebhookDelivery, 1)
		b.receiver.setRespond(func(n int, w http.ResponseWriter, r *http.Request) {
			// What anyone reading the delivery sees while its request is
			// under way.
			ds, _ := b.app.WebhookDeliveries(r.Context(), b.admin, app.WebhookDeliveriesInput{ProjectID: "p1"})
			during <- ds.Items
			status(http.StatusOK)(n, w, r)
		})
		e, _ := b.send(t, "device.firmware.updated")

		seen := <-during
		require.Len(t, seen, 1)
		require.Equal(t, domain.WebhookDeliveryDelivering, seen[0].State, "the attempt was committed before its request")
		require.Equal(t, 1, seen[0].AttemptCount)
		require.Equal(t, []domain.WebhookDeliveryAttempt{{Number: 1, Outcome: domain.WebhookAttemptDelivering, StartedAt: b.clock.Now()}}, seen[0].Attempts)

		d := only(t, b, e)
		require.Equal(t, domain.WebhookDeliveryDelivered, d.State)
		require.Equal(t, b.clock.Now(), *d.DeliveredAt)
		require.Empty(t, d.LastError)
		require.Nil(t, d.NextAttemptAt)
		require.Len(t, d.Attempts, 1)
		a := d.Attempts[0]
		require.Equal(t, domain.WebhookAttemptSucceeded, a.Outcome)
		require.Equal(t, 1, a.Number)
		require.Equal(t, b.clock.Now(), a.StartedAt)
		require.Equal(t, b.clock.Now(), *a.FinishedAt)
		require.Equal(t, 200, *a.StatusCode)
		require.Equal(t, "ok", a.ResponseBody)
		require.Empty(t, a.ErrorClass)
		require.Empty(t, a.Error)
		require.Positive(t, a.Latency)
		require.Empty(t, attemptRows(t, b, d.ID), "the succeeded attempt lives in its delivery's row alone")
		got, err := b.app.WebhookDelivery(ctx, b.admin, d.ID.String())
		require.NoError(t, err)
		require.Equal(t, d.Attempts, got.Attempts, "listed the same by id")

		reqs := b.receiver.requests()
		require.Len(t, reqs, 1)
		req := reqs[0]
		require.Equal(t, d.IdempotencyKey, req.Header.Get("webhook-id"))
		require.Equal(t, strconv.FormatInt(b.clock.Now().Unix(), 10), req.Header.Get("webhook-timestamp"), "the time of the attempt")
		require.Equal(t, []int{0}, signatures(t, b.dest.SigningSecret, req))
		require.Equal(t, "application/json", req.Header.Get("content-type"))
		require.Equal(t, webhook.DefaultUserAgent, req.Header.Get("user-agent"))
		var payload struct {
			Type      string          `json:"type"`
			Timestamp time.Time       `json:"timestamp"`
			Data      json.RawMessage `json:"data"`
		}
		require.NoError(t, json.Unmarshal(req.Body, &payload))
		require.Equal(t, e.Action, payload.Type)
		require.True(t, e.RecordedAt.Equal(payload.Timestamp))
		want, err := json.Marshal(e)
		require.NoError(t, err)
		require.JSONEq(t, string(want), string(payload.Data), "data is the event in the API's shape")
	})

	t.Run("ReceiverAnswers", func(t *testing.T) {
		t.Parallel()
		b := setup(t, webhookOpts{schedule: hourly})
		body := "a\x00b\xffc" + strings.Repeat("x", 5000)
		b.receiver.setRespond(func(n int, w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/hook":
				w.WriteHeader(http.StatusNoContent)
			case "/redirect":
				http.Redirect(w, r, "/hook", http.StatusFound)
			case "/missing":
				status(http.StatusNotFound)(n, w, r)
			case "/unavailable":
				status(http.StatusServiceUnavailable)(n, w, r)
			case "/big":
				_, _ = w.Write([]byte(body))
			}
		})
		paths := []string{"/redirect", "/missing", "/unavailable", "/big"}
		for _, path := range paths {
			b.subscribe(t, b.createDestination(t, path).Destination.ID.String(), "device.*")
		}
		b.record(t, "device.rebooted")
		require.Equal(t, 5, b.fanOut(t))
		require.Len(t, b.deliver(t), 5, "one job per destination")

		byPath := map[string]domain.WebhookDelivery{}
		dests, err := b.app.WebhookDestinations(ctx, b.admin, "p1")
		require.NoError(t, err)
		for _, d := range b.deliveries(t, app.WebhookDeliveriesInput{}) {
			for _, dest := range dests {
				if dest.ID == d.DestinationID {
					byPath[strings.TrimPrefix(dest.URL, b.receiver.srv.URL)] = d
				}
			}
		}
		require.Len(t, byPath, 5)
		ok := byPath["/hook"]
		require.Equal(t, domain.WebhookDeliveryDelivered, ok.State, "any 2xx is a success")
		require.Equal(t, 204, *ok.Attempts[0].StatusCode)

		for path, want := range map[string]struct {
			status int
			class  string
		}{
			"/redirect":    {302, "redirect"},
			"/missing":     {404, "http_status"},
			"/unavailable": {503, "http_status"},
		} {
			d := byPath[path]
			require.Equal(t, domain.WebhookDeliveryRetrying, d.State, path)
			require.Len(t, d.Attempts, 1)
			a := d.Attempts[0]
			require.Equal(t, domain.WebhookAttemptFailed, a.Outcome, path)
			require.Equal(t, want.status, *a.StatusCode, path)
			require.Equal(t, want.class, a.ErrorClass, path)
			require.Contains(t, a.Error, strconv.Itoa(want.status), path)
			require.Equal(t, a.Error, d.LastError, path)
		}
		var followed int
		for _, req := range b.receiver.requests() {
			if req.Path == "/hook" {
				followed++
			}
		}
		require.Equal(t, 1, followed, "a redirect is never followed")

		big := byPath["/big"].Attempts[0]
		require.Equal(t, domain.WebhookAttemptSucceeded, big.Outcome)
		require.Equal(t, "a\uFFFDb\uFFFDc"+strings.Repeat("x", 4096-5), big.ResponseBody,
			"the first 4 KiB are kept, as valid UTF-8 without NUL")
	})

	t.Run("TimeoutIsAFailure", func(t *testing.T) {
		t.Parallel()
		b := setup(t, webhookOpts{senderTimeout: time.Second})
		b.receiver.hold(t) // until the test ends
		e, _ := b.send(t, "device.rebooted")
		d := only(t, b, e)
		require.Len(t, b.receiver.requests(), 1)
		require.Equal(t, domain.WebhookDeliveryRetrying, d.State, "%+v", d.Attempts)
		require.Len(t, d.Attempts, 1)
		require.Equal(t, domain.WebhookAttemptFailed, d.Attempts[0].Outcome)
		require.Equal(t, "timeout", d.Attempts[0].ErrorClass)
		require.Nil(t, d.Attempts[0].StatusCode)
	})

	t.Run("RetriesFollowTheScheduleThenDeadLetter", func(t *testing.T) {
		t.Parallel()
		b := setup(t, webhookOpts{schedule: hourly})
		b.receiver.setRespond(status(http.StatusInternalServerError))
		e, _ := b.send(t, "device.rebooted")

		for attempt, delay := range hourly {
			d := only(t, b, e)
			require.Equal(t, domain.WebhookDeliveryRetrying, d.State)
			require.Equal(t, attempt+1, d.AttemptCount)
			require.Equal(t, 3, d.MaxAttempts, "a schedule of two delays allows three attempts")
			wait := d.NextAttemptAt.Sub(*d.Attempts[attempt].FinishedAt)
			require.GreaterOrEqual(t, wait, delay*8/10, "attempt %d", attempt+1)
			require.LessOrEqual(t, wait, delay*12/10, "attempt %d", attempt+1)

			jobs := b.deliveryJobs(t)
			require.Len(t, jobs, 1, "the retry's job")
			require.WithinDuration(t, *d.NextAttemptAt, jobs[0].ScheduledAt, time.Millisecond, "scheduled in River for its time")
			require.Equal(t, attempt+2, jobs[0].Args.Attempt(0))

			b.clock.Set(*d.NextAttemptAt)
			require.NoError(t, b.app.DeliverWebhooks(ctx, jobs[0].Args))
		}
		d := only(t, b, e)
		require.Equal(t, domain.WebhookDeliveryDeadLettered, d.State)
		require.Equal(t, b.clock.Now(), *d.DeadLetteredAt)
		require.Nil(t, d.NextAttemptAt)
		require.Contains(t, d.LastError, "500")
		require.Len(t, d.Attempts, 3)
		require.Empty(t, b.deliveryJobs(t), "nothing more happens until a redrive")

		reqs := b.receiver.requests()
		require.Len(t, reqs, 3)
		for i, req := range reqs {
			require.Equal(t, d.IdempotencyKey, req.Header.Get("webhook-id"), "one webhook-id across retries")
			require.Equal(t, strconv.FormatInt(d.Attempts[i].StartedAt.Unix(), 10), req.Header.Get("webhook-timestamp"),
				"each attempt carries its own time")
			require.Equal(t, []int{0}, signatures(t, b.dest.SigningSecret, req))
		}
	})

	t.Run("RetryAfterOutweighsTheSchedule", func(t *testing.T) {
		t.Parallel()
		b := setup(t, webhookOpts{schedule: domain.RetrySchedule{time.Minute}})
		b.receiver.setRespond(func(n int, w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "3600")
			status(http.StatusTooManyRequests)(n, w, r)
		})
		e, _ := b.send(t, "device.rebooted")
		d := only(t, b, e)
		require.Equal(t, domain.WebhookDeliveryRetrying, d.State)
		require.Equal(t, time.Hour, d.NextAttemptAt.Sub(*d.Attempts[0].FinishedAt))
	})

	t.Run("LostAttemptIsUnknownAndResentUnderTheSameWebhookID", func(t *testing.T) {
		t.Parallel()
		b := setup(t, webhookOpts{})
		e := b.record(t, "device.rebooted")
		b.fanOut(t)
		jobs := b.deliveryJobs(t)
		require.Len(t, jobs, 1)

		// A process sends the request, then stops for good before it
		// records the outcome.
		wake := make(chan struct{})
		crashed := b.otherApp(func(c *app.Config) {
			c.Webhooks.Sender = hangingSender{real: c.Webhooks.Sender, wake: wake}
		})
		stale := make(chan error, 1)
		go func() { stale <- crashed.DeliverWebhooks(ctx, jobs[0].Args) }()
		<-b.receiver.arrived
		require.Equal(t, domain.WebhookDeliveryDelivering, only(t, b, e).State)

		// River rescues the job and runs it again.
		b.clock.Add(time.Minute)
		require.NoError(t, b.app.DeliverWebhooks(ctx, jobs[0].Args))
		d := only(t, b, e)
		require.Equal(t, domain.WebhookDeliveryRetrying, d.State)
		require.Equal(t, b.clock.Now(), *d.NextAttemptAt, "resent at once")
		require.Len(t, d.Attempts, 1)
		lost := d.Attempts[0]
		require.Equal(t, domain.WebhookAttemptUnknown, lost.Outcome, "a leftover DELIVERING attempt has an unknown outcome")
		require.Equal(t, "unknown", lost.ErrorClass)
		require.Equal(t, b.clock.Now(), *lost.FinishedAt)
		require.Equal(t, time.Minute, lost.Latency, "the time until it was given up")

		resends := b.deliver(t)
		require.Len(t, resends, 1)
		require.Equal(t, 2, resends[0].Args.Attempt(0))
		d = only(t, b, e)
		require.Equal(t, domain.WebhookDeliveryDelivered, d.State)
		require.Len(t, d.Attempts, 2)
		require.Equal(t, lost, d.Attempts[0])
		require.Equal(t, 2, d.Attempts[1].Number)
		require.Equal(t, domain.WebhookAttemptSucceeded, d.Attempts[1].Outcome)
		require.Equal(t, []string{"UNKNOWN"}, attemptRows(t, b, d.ID), "the resend's success is kept in the delivery's row")
		reqs := b.receiver.requests()
		require.Len(t, reqs, 2, "the receiver got the lost attempt and the resend")
		require.Equal(t, d.IdempotencyKey, reqs[0].Header.Get("webhook-id"))
		require.Equal(t, d.IdempotencyKey, reqs[1].Header.Get("webhook-id"))

		close(wake)
		require.NoError(t, <-stale)
		require.Equal(t, d, only(t, b, e), "the stale worker's late outcome changed nothing")
		require.Equal(t, []string{"UNKNOWN"}, attemptRows(t, b, d.ID), "nor wrote a row")
	})

	t.Run("SuccessAfterFailuresIsTheLastAttempt", func(t *testing.T) {
		t.Parallel()
		b := setup(t, webhookOpts{schedule: hourly})
		b.receiver.setRespond(func(n int, w http.ResponseWriter, r *http.Request) {
			if n == 1 {
				status(http.StatusInternalServerError)(n, w, r)
				return
			}
			w.WriteHeader(http.StatusAccepted)
			_, _ = w.Write([]byte("queued"))
		})
		e, _ := b.send(t, "device.rebooted")
		d := only(t, b, e)
		require.Equal(t, domain.WebhookDeliveryRetrying, d.State)
		jobs := b.deliveryJobs(t)
		require.Len(t, jobs, 1)
		first := d.Attempts[0]
		b.clock.Set(*d.NextAttemptAt)
		require.NoError(t, b.app.DeliverWebhooks(ctx, jobs[0].Args))

		d = only(t, b, e)
		require.Equal(t, domain.WebhookDeliveryDelivered, d.State)
		require.Len(t, d.Attempts, 2)
		require.Equal(t, first, d.Attempts[0])
		require.Equal(t, domain.WebhookAttemptFailed, d.Attempts[0].Outcome)
		second := d.Attempts[1]
		require.Equal(t, 2, second.Number)
		require.Equal(t, domain.WebhookAttemptSucceeded, second.Outcome)
		require.Equal(t, b.clock.Now(), second.StartedAt)
		require.Equal(t, *d.DeliveredAt, *second.FinishedAt)
		require.Equal(t, 202, *second.StatusCode)
		require.Equal(t, "queued", second.ResponseBody)
		require.Empty(t, second.ErrorClass)
		require.Equal(t, []string{"FAILED"}, attemptRows(t, b, d.ID))

		// A delivery delivered before its row kept the succeeded attempt
		// has the attempt's row instead: listed once, from the row.
		_, err := b.pool.Exec(ctx, `WITH d AS (
				UPDATE webhook_deliveries SET attempt_started_at = NULL, attempt_status_code = NULL,
					attempt_latency_us = NULL, attempt_response_body = '' WHERE id = $1 RETURNING id)
			INSERT INTO webhook_delivery_attempts (delivery_id, number, outcome, started_at, finished_at, status_code,
				latency_us, response_body)
			SELECT id, 2, 'SUCCEEDED', $2, $3, 202, $4, 'queued' FROM d`,
			d.ID, second.StartedAt, *second.FinishedAt, second.Latency.Microseconds())
		require.NoError(t, err)
		require.Equal(t, d.Attempts, only(t, b, e).Attempts)
	})

	t.Run("AFinishedAttemptIsLeftAlone", func(t *testing.T) {
		t.Parallel()
		b := setup(t, webhookOpts{})
		e, jobs := b.send(t, "device.rebooted")
		d := only(t, b, e)
		require.Equal(t, domain.WebhookDeliveryDelivered, d.State)
		require.NoError(t, b.app.DeliverWebhooks(ctx, jobs[0].Args), "a rerun of the job")
		require.Equal(t, d, only(t, b, e))
		require.Len(t, b.receiver.requests(), 1)
	})

	t.Run("WithdrawnUnsentAttemptsUseNoAttempt", func(t *testing.T) {
		t.Parallel()
		b := setup(t, webhookOpts{perDestination: 1})
		release := b.receiver.hold(t)
		_, err := b.app.RecordAuditEvents(ctx, b.writer, app.RecordAuditEventsInput{Events: []domain.AuditEventDraft{
			draft("p1", "device.a"), draft("p1", "device.b"), draft("p1", "device.c"),
		}})
		require.NoError(t, err)
		require.Equal(t, 3, b.fanOut(t))
		jobs := b.deliveryJobs(t)
		require.Len(t, jobs, 1)
		require.Equal(t, 3, jobs[0].Args.Len())

		jobCtx, timeUp := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- b.app.DeliverWebhooks(jobCtx, jobs[0].Args) }()
		<-b.receiver.arrived // the first request holds the destination's only slot
		timeUp()
		require.NoError(t, <-done)

		states := map[domain.WebhookDeliveryState]int{}
		for _, d := range b.deliveries(t, app.WebhookDeliveriesInput{}) {
			states[d.State]++
			switch d.State {
			case domain.WebhookDeliveryPending:
				require.Zero(t, d.AttemptCount, "a withdrawn attempt uses none of the budget")
				require.Empty(t, d.Attempts)
			case domain.WebhookDeliveryRetrying:
				require.Equal(t, domain.WebhookAttemptUnknown, d.Attempts[0].Outcome, "the request under way may have arrived")
			}
		}
		require.Equal(t, map[domain.WebhookDeliveryState]int{domain.WebhookDeliveryPending: 2, domain.WebhookDeliveryRetrying: 1}, states)
		require.Len(t, b.receiver.requests(), 1, "the withdrawn attempts were never sent")

		next := b.deliveryJobs(t)
		require.Len(t, next, 2, "a job for the withdrawn deliveries, and the resend")
		release()
		for _, j := range next {
			require.NoError(t, b.app.DeliverWebhooks(ctx, j.Args))
		}
		attempts := 0
		for _, d := range b.deliveries(t, app.WebhookDeliveriesInput{}) {
			require.Equal(t, domain.WebhookDeliveryDelivered, d.State)
			attempts += len(d.Attempts)
		}
		require.Equal(t, 4, attempts, "one attempt each, and the resend of the interrupted one")
	})

	t.Run("BusyDestinationGivesTheWorkerBackWithoutAnAttempt", func(t *testing.T) {
		t.Parallel()
		b := setup(t, webhookOpts{perDestination: 1})
		release := b.receiver.hold(t)
		first := b.record(t, "device.a")
		second := b.record(t, "device.b")
		require.Equal(t, 2, b.fanOut(t))
		jobs := b.deliveryJobs(t)
		require.Len(t, jobs, 2, "one job per fan-out")

		done := make(chan error, 1)
		go func() { done <- b.app.DeliverWebhooks(ctx, jobs[0].Args) }()
		<-b.receiver.arrived
		err := b.app.DeliverWebhooks(ctx, jobs[1].Args)
		require.ErrorIs(t, err, app.ErrDestinationBusy)
		d := only(t, b, second)
		require.Equal(t, domain.WebhookDeliveryPending, d.State)
		require.Zero(t, d.AttemptCount, "waiting for the destination uses no attempt")

		release()
		require.NoError(t, <-done)
		require.NoError(t, b.app.DeliverWebhooks(ctx, jobs[1].Args), "River runs the job again")
		for _, e := range []domain.AuditEvent{first, second} {
			require.Equal(t, domain.WebhookDeliveryDelivered, only(t, b, e).State)
		}
	})

	t.Run("UnopenableSecretSendsNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t, webhookOpts{schedule: hourly})
		e := b.record(t, "device.rebooted")
		b.fanOut(t)
		box, err := secrets.NewBox(bytes.Repeat([]byte{2}, secrets.KeySize))
		require.NoError(t, err)
		b.app = b.otherApp(func(c *app.Config) { c.Webhooks.Box = box }) // the master key changed
		b.deliver(t)
		d := only(t, b, e)
		require.Equal(t, domain.WebhookDeliveryRetrying, d.State, "a visible failure, retried like any")
		require.Equal(t, domain.WebhookAttemptFailed, d.Attempts[0].Outcome)
		require.Equal(t, "secret_unavailable", d.Attempts[0].ErrorClass)
		require.Contains(t, d.LastError, "rotate")
		require.Empty(t, b.receiver.requests(), "nothing unsigned was sent")
	})

	t.Run("SSRFDefenceAtSendTime", func(t *testing.T) {
		t.Parallel()
		b := setup(t, webhookOpts{strictSender: true})
		e, _ := b.send(t, "device.rebooted")
		d := only(t, b, e)
		require.Equal(t, domain.WebhookDeliveryRetrying, d.State)
		// Told apart from a name that does not resolve only in the operator
		// log: the tenant's attempt would otherwise reveal internal names.
		require.Equal(t, "dns", d.Attempts[0].ErrorClass)
		require.Equal(t, "host name does not resolve to a public address", d.Attempts[0].Error)
		require.Nil(t, d.Attempts[0].StatusCode)
		require.Empty(t, b.receiver.requests(), "nothing reached the receiver")
	})
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
