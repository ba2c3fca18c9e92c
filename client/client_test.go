package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/client"
	"github.com/aetheriot/aether-audit/internal/aethertest"
)

func TestMain(m *testing.M) { aethertest.MainWithExampleServer(m) }

// testBundle is a server of the test's own and a client of it.
type testBundle struct {
	srv    *aethertest.Server
	client *client.Client
	token  string
}

// setup starts a server with env and a client with a token of tenant t1 for
// every project with every permission.
func setup(t *testing.T, env ...string) *testBundle {
	t.Helper()
	srv := aethertest.Start(t, env...)
	tok := srv.Token(t, "t1", []string{"*"}, aethertest.AllPermissions, "producer", time.Hour)
	c, err := client.New(srv.URL, client.Options{Token: tok, MinBackoff: 20 * time.Millisecond, MaxBackoff: 500 * time.Millisecond})
	require.NoError(t, err)
	return &testBundle{srv: srv, client: c, token: tok}
}

// event is a valid event of project p.
func event(p, resource string) client.EventInput {
	return client.EventInput{
		ProjectID: p, Action: "device.firmware.updated", OccurredAt: time.Now().UTC(),
		Subject:  client.Subject{Type: client.SubjectService, ID: "device-service"},
		Resource: client.Resource{Type: "device", ID: resource}, Outcome: client.OutcomeSuccess,
		Details: json.RawMessage(`{"from":"1.0","to":"1.1"}`),
	}
}

func TestRecordGetIdempotent(t *testing.T) {
	b := setup(t)
	ctx := context.Background()

	in := event("plant-1", "dev-1")
	in.Governance = &client.Governance{Reason: "rollout", Risk: client.RiskMedium}
	in.Correlation = &client.Correlation{RequestID: "req-1"}
	in.EvidenceDigests = []client.EvidenceDigest{{Algorithm: "sha256", Value: "abc", Label: "image"}}
	ev, err := b.client.Record(ctx, in)
	require.NoError(t, err)
	require.NotEmpty(t, ev.ID, "an id is generated")
	require.Equal(t, uint64(1), ev.Sequence)
	require.Equal(t, "t1", ev.TenantID)
	require.Equal(t, "device.firmware.updated", ev.Action)
	require.Equal(t, client.RiskMedium, ev.Governance.Risk)
	require.Equal(t, "req-1", ev.Correlation.RequestID)
	require.JSONEq(t, `{"from":"1.0","to":"1.1"}`, string(ev.Details))
	require.Len(t, ev.ChainHash, 64)
	require.Equal(t, "producer", ev.RecordedBy.Subject)

	got, err := b.client.Get(ctx, "plant-1", ev.ID)
	require.NoError(t, err)
	require.Equal(t, ev, got)

	// The same id and content: the stored event, not a second one.
	in.ID = ev.ID
	again, err := b.client.Record(ctx, in)
	require.NoError(t, err)
	require.Equal(t, ev.Sequence, again.Sequence)
	require.Equal(t, ev.RecordedAt, again.RecordedAt)

	// The same id with other content fails closed.
	in.Resource.ID = "dev-2"
	_, err = b.client.Record(ctx, in)
	var ae *client.Error
	require.ErrorAs(t, err, &ae)
	require.Equal(t, client.CodeIdempotencyConflict, ae.Code)
	require.Equal(t, "id", ae.Field)

	_, err = b.client.Get(ctx, "plant-1", "0190a0b4-0000-7000-8000-000000000000")
	require.Equal(t, client.CodeNotFound, client.ErrorCode(err))
}

func TestRecordBatch(t *testing.T) {
	b := setup(t)
	ctx := context.Background()

	in := []client.EventInput{event("a", "1"), event("b", "2"), event("a", "3")}
	evs, err := b.client.RecordBatch(ctx, in)
	require.NoError(t, err)
	require.Len(t, evs, 3)
	require.Empty(t, in[0].ID, "the caller's slice is left as it was")
	require.Equal(t, []uint64{1, 1, 2}, []uint64{evs[0].Sequence, evs[1].Sequence, evs[2].Sequence})
	require.Equal(t, []string{"a", "b", "a"}, []string{evs[0].ProjectID, evs[1].ProjectID, evs[2].ProjectID})

	// One bad event refuses the batch, naming it.
	bad := []client.EventInput{event("a", "4"), event("a", "5")}
	bad[1].Action = "Not An Action"
	_, err = b.client.RecordBatch(ctx, bad)
	var ae *client.Error
	require.ErrorAs(t, err, &ae)
	require.Equal(t, client.CodeBadUserInput, ae.Code)
	require.Equal(t, "events[1].action", ae.Field)
	v, err := b.client.VerifyChain(ctx, "a", 0, 0)
	require.NoError(t, err)
	require.Equal(t, uint64(2), v.HeadSequence, "nothing of the refused batch is stored")

	_, err = b.client.RecordBatch(ctx, nil)
	require.Error(t, err)
}

func TestRecordRetriesRateLimited(t *testing.T) {
	// One command per second, no burst beyond one.
	b := setup(t, "AETHER_RATE_COMMANDS=1:1")
	ctx := context.Background()

	_, err := b.client.Record(ctx, event("p", "1"))
	require.NoError(t, err)
	start := time.Now()
	ev, err := b.client.Record(ctx, event("p", "2"))
	require.NoError(t, err, "the client waits retryAfterSeconds and tries again")
	require.Equal(t, uint64(2), ev.Sequence)
	require.GreaterOrEqual(t, time.Since(start), 900*time.Millisecond, "the retry honoured retryAfterSeconds")

	// Without retries the error carries the code and the wait.
	once, err := client.New(b.srv.URL, client.Options{Token: b.token, MaxAttempts: 1})
	require.NoError(t, err)
	_, err = once.Record(ctx, event("p", "3"))
	var ae *client.Error
	require.ErrorAs(t, err, &ae)
	require.Equal(t, client.CodeRateLimited, ae.Code)
	require.GreaterOrEqual(t, ae.RetryAfter, time.Second)
}

// flakyProxy forwards to the real server, but answers the first fail5xx
// requests with 503 itself, and then forwards the next request but drops
// its response (the server committed; the client never hears of it).
type flakyProxy struct {
	fail5xx  int32
	dropNext atomic.Bool
	requests atomic.Int32
}

func (f *flakyProxy) handler(target string) http.Handler {
	u, _ := url.Parse(target)
	proxy := httputil.NewSingleHostReverseProxy(u)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := f.requests.Add(1)
		if n <= f.fail5xx {
			http.Error(w, "upstream restarting", http.StatusServiceUnavailable)
			return
		}
		if f.dropNext.CompareAndSwap(true, false) {
			rec := httptest.NewRecorder()
			proxy.ServeHTTP(rec, r)
			panic(http.ErrAbortHandler) // the connection drops without an answer
		}
		proxy.ServeHTTP(w, r)
	})
}

func TestRecordRetriesNetworkErrorsAnd5xx(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	f := &flakyProxy{fail5xx: 2}
	f.dropNext.Store(true)
	proxy := httptest.NewServer(f.handler(b.srv.URL))
	defer proxy.Close()
	c, err := client.New(proxy.URL, client.Options{Token: b.token, MinBackoff: 10 * time.Millisecond})
	require.NoError(t, err)

	evs, err := c.RecordBatch(ctx, []client.EventInput{event("p", "1"), event("p", "2")})
	require.NoError(t, err)
	require.Equal(t, int32(4), f.requests.Load(), "two 503s, one lost answer, one success")
	require.Equal(t, []uint64{1, 2}, []uint64{evs[0].Sequence, evs[1].Sequence}, "the retry got the first commit's events")
	v, err := b.client.VerifyChain(ctx, "p", 0, 0)
	require.NoError(t, err)
	require.Equal(t, uint64(2), v.HeadSequence, "recorded once")

	// A server that is down: connection refused until it is back.
	b.srv.Kill(t)
	var attempts atomic.Int32
	counting, err := client.New(b.srv.URL, client.Options{Token: b.token, MinBackoff: 10 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
		MaxAttempts: 1000, HTTPClient: &http.Client{Transport: countingTransport{&attempts}}})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		_, err := counting.Record(ctx, event("p", "3"))
		done <- err
	}()
	aethertest.Await(t, 10*time.Second, "attempts fail while the server is down", func() bool { return attempts.Load() >= 3 })
	b.srv.Restart(t)
	require.NoError(t, <-done)

	// Commands that are not idempotent are not retried after a 5xx.
	f.fail5xx, f.requests = 1, atomic.Int32{}
	_, err = c.CreateWebhookDestination(ctx, client.CreateWebhookDestinationInput{ProjectID: "p", URL: "https://example.com/hook"})
	require.Error(t, err)
	require.Equal(t, int32(1), f.requests.Load())
}

func TestSearch(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	var in []client.EventInput
	for i := range 250 {
		e := event("p", fmt.Sprint(i))
		if i%5 == 0 {
			e.Action = "device.rebooted"
		}
		in = append(in, e)
	}
	_, err := b.client.RecordBatch(ctx, in)
	require.NoError(t, err)

	var seqs []uint64
	for ev, err := range b.client.Search(ctx, "p", client.SearchOptions{PageSize: 100}) {
		require.NoError(t, err)
		seqs = append(seqs, ev.Sequence)
	}
	require.Len(t, seqs, 250)
	for i, s := range seqs {
		require.Equal(t, uint64(i+1), s)
	}

	var reboots int
	var last uint64 = 1 << 63
	for ev, err := range b.client.Search(ctx, "p", client.SearchOptions{PageSize: 7, Order: client.NewestFirst,
		Filter: &client.Filter{Action: "device.rebooted"}}) {
		require.NoError(t, err)
		require.Equal(t, "device.rebooted", ev.Action)
		require.Less(t, ev.Sequence, last)
		last = ev.Sequence
		reboots++
	}
	require.Equal(t, 50, reboots)

	// Page by page.
	var sizes []int
	for page, err := range b.client.SearchPages(ctx, "p", client.SearchOptions{PageSize: 100}) {
		require.NoError(t, err)
		sizes = append(sizes, len(page.Events))
	}
	require.Equal(t, []int{100, 100, 50}, sizes)

	// Stopping early stops reading.
	n := 0
	for range b.client.Search(ctx, "p", client.SearchOptions{PageSize: 10}) {
		if n++; n == 3 {
			break
		}
	}
	require.Equal(t, 3, n)

	// A bad filter is the server's BAD_USER_INPUT, yielded once.
	for _, err := range b.client.Search(ctx, "p", client.SearchOptions{Filter: &client.Filter{Action: "*"}}) {
		require.Equal(t, client.CodeBadUserInput, client.ErrorCode(err))
	}
}

func TestVerifyChain(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	_, err := b.client.RecordBatch(ctx, []client.EventInput{event("p", "1"), event("p", "2"), event("p", "3")})
	require.NoError(t, err)
	v, err := b.client.VerifyChain(ctx, "p", 0, 0)
	require.NoError(t, err)
	require.True(t, v.Valid)
	require.Equal(t, uint64(3), v.CheckedCount)
	require.Equal(t, uint64(3), v.HeadSequence)
	require.Zero(t, v.FirstInvalidSequence)
	v, err = b.client.VerifyChain(ctx, "p", 2, 3)
	require.NoError(t, err)
	require.Equal(t, uint64(2), v.CheckedCount)
}

func TestAuthErrorsAndTokenSource(t *testing.T) {
	b := setup(t)
	ctx := context.Background()

	reader := b.srv.Token(t, "t1", []string{"p"}, "audit:read", "reader", time.Hour)
	c, err := client.New(b.srv.URL, client.Options{Token: reader})
	require.NoError(t, err)
	_, err = c.Record(ctx, event("p", "1"))
	require.Equal(t, client.CodeForbidden, client.ErrorCode(err))
	_, err = c.VerifyChain(ctx, "other", 0, 0)
	require.Equal(t, client.CodeNotFound, client.ErrorCode(err), "a project outside the token")

	c, err = client.New(b.srv.URL, client.Options{Token: "not-a-token"})
	require.NoError(t, err)
	_, err = c.Record(ctx, event("p", "1"))
	var ae *client.Error
	require.ErrorAs(t, err, &ae)
	require.Equal(t, client.CodeUnauthenticated, ae.Code)
	require.Equal(t, http.StatusUnauthorized, ae.HTTPStatus)
	require.NotContains(t, err.Error(), "not-a-token")

	// Short-lived tokens: the source is asked again before one expires.
	var fetches atomic.Int32
	src := client.NewCachingTokenSource(func(context.Context) (string, time.Time, error) {
		fetches.Add(1)
		return b.srv.Token(t, "t1", []string{"p"}, "audit:write,audit:read", "rotating", 3*time.Second), time.Now().Add(3 * time.Second), nil
	}, 2500*time.Millisecond)
	c, err = client.New(b.srv.URL, client.Options{TokenSource: src})
	require.NoError(t, err)
	_, err = c.Record(ctx, event("p", "1"))
	require.NoError(t, err)
	_, err = c.Record(ctx, event("p", "2"))
	require.NoError(t, err)
	require.Equal(t, int32(1), fetches.Load(), "the token is cached")
	time.Sleep(600 * time.Millisecond) // past the refresh point of the 3 s token
	_, err = c.Record(ctx, event("p", "3"))
	require.NoError(t, err)
	require.Equal(t, int32(2), fetches.Load(), "a fresh token before the old one expires")

	failing := client.TokenSourceFunc(func(context.Context) (string, error) { return "", errors.New("idp down") })
	c, err = client.New(b.srv.URL, client.Options{TokenSource: failing})
	require.NoError(t, err)
	_, err = c.Record(ctx, event("p", "4"))
	require.ErrorContains(t, err, "idp down")

	_, err = client.New("ftp://x", client.Options{Token: "t"})
	require.Error(t, err)
	_, err = client.New(b.srv.URL, client.Options{})
	require.Error(t, err)
}

// countingTransport counts the requests it sends.
type countingTransport struct{ n *atomic.Int32 }

func (c countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return http.DefaultTransport.RoundTrip(r)
}

// TestRecordRetriesUnavailable: while another session holds the project's
// head, an append fails with UNAVAILABLE past the server's bound
// (AETHER_APPEND_TIMEOUT), with a retry hint and nothing recorded; the
// client waits the hint and records the event once the head is free.
func TestRecordRetriesUnavailable(t *testing.T) {
	b := setup(t, "AETHER_APPEND_TIMEOUT=1s")
	ctx := context.Background()
	_, err := b.client.Record(ctx, event("p", "1"))
	require.NoError(t, err)

	conn, err := pgx.Connect(ctx, b.srv.DatabaseURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	blocker, err := conn.Begin(ctx)
	require.NoError(t, err)
	_, err = blocker.Exec(ctx, "SELECT 1 FROM audit_project_heads WHERE project_id = 'p' FOR UPDATE")
	require.NoError(t, err)

	once, err := client.New(b.srv.URL, client.Options{Token: b.token, MaxAttempts: 1})
	require.NoError(t, err)
	_, err = once.Record(ctx, event("p", "2"))
	var ae *client.Error
	require.ErrorAs(t, err, &ae)
	require.Equal(t, client.CodeUnavailable, ae.Code)
	require.Equal(t, time.Second, ae.RetryAfter)

	// The retrying client's first attempt waits for the head, gives up;
	// the head is released; its retry records the event.
	waiting := func() bool {
		var n int
		require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n))
		return n > 0
	}
	done := make(chan error, 1)
	go func() {
		_, err := b.client.Record(ctx, event("p", "3"))
		done <- err
	}()
	require.Eventually(t, waiting, 10*time.Second, 5*time.Millisecond, "the first attempt waits for the head")
	require.Eventually(t, func() bool { return !waiting() }, 10*time.Second, 5*time.Millisecond, "and gives up")
	require.NoError(t, blocker.Rollback(ctx))
	require.NoError(t, <-done)

	page, err := b.client.SearchPage(ctx, "p", client.SearchOptions{})
	require.NoError(t, err)
	require.Len(t, page.Events, 2, "the refused append recorded nothing, the retried one once")
}
