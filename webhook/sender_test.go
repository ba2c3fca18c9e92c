package webhook

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"
)

func TestSendDeliversSignedRequest(t *testing.T) {
	t.Parallel()
	type seen struct {
		method string
		header http.Header
		body   []byte
	}
	got := make(chan seen, 1)
	srv := newTLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- seen{r.Method, r.Header.Clone(), body}
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	s := newTestSender(t, srv, nil)
	_, oldKey, err := NewSecret()
	require.NoError(t, err)
	req, newKey := testRequest(t, srv.URL+"/hooks/in?tenant=t1")
	req.Keys = [][]byte{oldKey, newKey}

	res := s.Send(context.Background(), req)
	require.True(t, res.Delivered, res.Error)
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Empty(t, res.ErrorClass)
	require.Empty(t, res.Error)
	require.Equal(t, `{"ok":true}`, string(res.Body))
	require.False(t, res.MayHaveReached, "the outcome is known")
	require.Positive(t, res.Latency)
	require.Zero(t, res.RetryAfter)

	r := <-got
	require.Equal(t, http.MethodPost, r.method)
	require.Equal(t, req.Body, r.body, "body is sent verbatim")
	require.Equal(t, "application/json", r.header.Get("content-type"))
	require.Equal(t, req.ID, r.header.Get("webhook-id"))
	require.Equal(t, strconv.FormatInt(req.Timestamp.Unix(), 10), r.header.Get("webhook-timestamp"))
	require.Equal(t, Sign(req.ID, req.Timestamp, req.Body, req.Keys), r.header.Get("webhook-signature"))
	require.Equal(t, DefaultUserAgent, r.header.Get("user-agent"))
	require.Empty(t, r.header.Get("authorization"))
	require.Empty(t, r.header.Get("cookie"))

	// An independent implementation verifies with either key.
	for _, key := range [][]byte{oldKey, newKey} {
		wh, err := standardwebhooks.NewWebhookRaw(key)
		require.NoError(t, err)
		require.NoError(t, wh.Verify(r.body, r.header))
	}
}

func TestSendCustomUserAgentAndZeroTimestamp(t *testing.T) {
	t.Parallel()
	got := make(chan http.Header, 1)
	srv := newTLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
	}))
	s := newTestSender(t, srv, func(c *SenderConfig) { c.UserAgent = "Test/2" })
	req, key := testRequest(t, srv.URL)
	req.Timestamp = time.Time{}

	before := time.Now().Unix()
	res := s.Send(context.Background(), req)
	require.True(t, res.Delivered, res.Error)
	h := <-got
	require.Equal(t, "Test/2", h.Get("user-agent"))
	ts, err := strconv.ParseInt(h.Get("webhook-timestamp"), 10, 64)
	require.NoError(t, err)
	require.GreaterOrEqual(t, ts, before, "zero timestamp means now")
	wh, err := standardwebhooks.NewWebhookRaw(key)
	require.NoError(t, err)
	require.NoError(t, wh.Verify(req.Body, h))
}

func TestSendHTTPStatusTruncatesBody(t *testing.T) {
	t.Parallel()
	big := bytes.Repeat([]byte("0123456789"), 1000)
	srv := newTLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write(big)
	}))
	s := newTestSender(t, srv, func(c *SenderConfig) { c.MaxResponseBytes = 100 })
	req, _ := testRequest(t, srv.URL)

	res := s.Send(context.Background(), req)
	require.False(t, res.Delivered)
	require.Equal(t, http.StatusInternalServerError, res.StatusCode)
	require.Equal(t, ErrorClassHTTPStatus, res.ErrorClass)
	require.Equal(t, "receiver responded with HTTP 500 Internal Server Error", res.Error)
	require.Equal(t, big[:100], res.Body)
	require.False(t, res.MayHaveReached)
	require.Zero(t, res.RetryAfter, "Retry-After applies to 429 and 503 only")
}

func TestSendDefaultMaxResponseBytes(t *testing.T) {
	t.Parallel()
	srv := newTLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write(bytes.Repeat([]byte("x"), 1<<20))
	}))
	s := newTestSender(t, srv, nil)
	req, _ := testRequest(t, srv.URL)
	res := s.Send(context.Background(), req)
	require.Equal(t, ErrorClassHTTPStatus, res.ErrorClass)
	require.Len(t, res.Body, DefaultMaxResponseBytes)
}

// TestSendKeepsBodyBeyondItsBuffer: a kept part larger than readBody's
// buffer is read in chunks, whole; a remainder within drainBytes is read
// and dropped, so that the next request reuses the connection.
func TestSendKeepsBodyBeyondItsBuffer(t *testing.T) {
	t.Parallel()
	body := make([]byte, 10_000+drainBytes/2)
	for i := range body {
		body[i] = byte('a' + i%26)
	}
	srv := newTLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write(body)
	}))
	s := newTestSender(t, srv, func(c *SenderConfig) { c.MaxResponseBytes = 10_000 })
	for range 3 {
		req, _ := testRequest(t, srv.URL)
		res := s.Send(context.Background(), req)
		require.True(t, res.Delivered)
		require.Equal(t, body[:10_000], res.Body)
	}
	require.Equal(t, int64(1), srv.ln.accepted.Load(), "the drained connection is reused")
}

func TestSendNeverFollowsRedirects(t *testing.T) {
	t.Parallel()
	var targetHits atomic.Int64
	target := newTLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		targetHits.Add(1)
	}))
	for _, location := range []string{"http://169.254.169.254/latest/meta-data/", target.URL + "/next"} {
		t.Run(location, func(t *testing.T) {
			srv := newTLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, location, http.StatusFound)
			}))
			s := newTestSender(t, srv, func(c *SenderConfig) { c.AllowHTTP = true })
			req, _ := testRequest(t, srv.URL)

			res := s.Send(context.Background(), req)
			require.False(t, res.Delivered)
			require.Equal(t, http.StatusFound, res.StatusCode)
			require.Equal(t, ErrorClassRedirect, res.ErrorClass)
			require.Contains(t, res.Error, "redirects are not followed")
			require.False(t, res.MayHaveReached)
		})
	}
	require.Zero(t, targetHits.Load(), "the redirect target must never be contacted")
	target.requireNoConnection(t)
}

func TestSendRetryAfter(t *testing.T) {
	t.Parallel()
	date := time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)
	tests := []struct {
		name   string
		status int
		header string
		min    time.Duration
		max    time.Duration
	}{
		{"429 seconds", http.StatusTooManyRequests, "7", 7 * time.Second, 7 * time.Second},
		{"503 http-date", http.StatusServiceUnavailable, date, 80 * time.Second, 90 * time.Second},
		{"429 malformed", http.StatusTooManyRequests, "soon", 0, 0},
		{"429 negative", http.StatusTooManyRequests, "-5", 0, 0},
		{"500 ignored", http.StatusInternalServerError, "7", 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := newTLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Retry-After", tt.header)
				w.WriteHeader(tt.status)
			}))
			s := newTestSender(t, srv, nil)
			req, _ := testRequest(t, srv.URL)
			res := s.Send(context.Background(), req)
			require.Equal(t, tt.status, res.StatusCode)
			require.Equal(t, ErrorClassHTTPStatus, res.ErrorClass)
			require.GreaterOrEqual(t, res.RetryAfter, tt.min)
			require.LessOrEqual(t, res.RetryAfter, tt.max)
		})
	}
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	require.Equal(t, 7*time.Second, parseRetryAfter(" 7 ", now))
	require.Equal(t, time.Duration(0), parseRetryAfter("0", now))
	require.Equal(t, time.Minute, parseRetryAfter(now.Add(time.Minute).Format(http.TimeFormat), now))
	require.Equal(t, time.Duration(0), parseRetryAfter(now.Add(-time.Minute).Format(http.TimeFormat), now))
	require.Equal(t, time.Duration(1<<63-1), parseRetryAfter("99999999999999999999999", now))
	require.Equal(t, time.Duration(0), parseRetryAfter("1.5", now))
	require.Equal(t, time.Duration(0), parseRetryAfter("", now))
}

// The receivers of the timeout and cancellation tests below answer only
// once the test is over (release, closed before the server's own
// cleanup). A receiver that answered when it saw the client go could still
// win the race: its answer can reach the client between the cancellation
// and the close of the connection, and the transport then returns it.

func TestSendTimeoutAfterRequestWritten(t *testing.T) {
	t.Parallel()
	var received atomic.Int64
	release := make(chan struct{})
	srv := newTLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		received.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		<-release
	}))
	t.Cleanup(func() { close(release) }) // runs before the server's own cleanup
	s := newTestSender(t, srv, func(c *SenderConfig) { c.Timeout = 300 * time.Millisecond })
	req, _ := testRequest(t, srv.URL)

	start := time.Now()
	res := s.Send(context.Background(), req)
	require.Less(t, time.Since(start), 5*time.Second)
	require.Equal(t, ErrorClassTimeout, res.ErrorClass, res.Error)
	require.Zero(t, res.StatusCode)
	require.False(t, res.Delivered)
	require.True(t, res.MayHaveReached)
	require.EqualValues(t, 1, received.Load(), "the receiver did get the request")
	requireNoLeak(t, res, req)
}

// TestSendCallerDeadlineIsATimeout: a caller's deadline (a job's timeout)
// that passes while the receiver holds the request is a timeout, as the
// sender's own is, not a cancellation or a connection failure.
func TestSendCallerDeadlineIsATimeout(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := newTLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		<-release
	}))
	t.Cleanup(func() { close(release) }) // runs before the server's own cleanup
	// The sender's own timeout is far away: the caller's deadline must end
	// the attempt.
	s := newTestSender(t, srv, func(c *SenderConfig) { c.Timeout = 20 * time.Second })
	req, _ := testRequest(t, srv.URL)

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	res := s.Send(ctx, req)
	require.Less(t, time.Since(start), 10*time.Second, "the caller's deadline ended the attempt")
	require.Equal(t, ErrorClassTimeout, res.ErrorClass, res.Error)
	require.True(t, res.MayHaveReached)
}

func TestSendCanceledByCaller(t *testing.T) {
	t.Parallel()
	arrived := make(chan struct{})
	release := make(chan struct{})
	srv := newTLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		close(arrived)
		<-release
	}))
	t.Cleanup(func() { close(release) }) // runs before the server's own cleanup
	// The sender's own timeout is far away: the cancellation must end the
	// attempt.
	s := newTestSender(t, srv, func(c *SenderConfig) { c.Timeout = 20 * time.Second })
	req, _ := testRequest(t, srv.URL)

	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-arrived
		cancel()
	}()
	start := time.Now()
	res := s.Send(ctx, req)
	require.Less(t, time.Since(start), 10*time.Second, "the cancellation ended the attempt")
	require.Equal(t, ErrorClassCanceled, res.ErrorClass, res.Error)
	require.True(t, res.MayHaveReached)

	res = s.Send(ctx, req)
	require.Equal(t, ErrorClassCanceled, res.ErrorClass, "already canceled")
	require.False(t, res.MayHaveReached)
}

func TestSendConnectRefused(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())

	s := newTestSender(t, nil, nil)
	req, _ := testRequest(t, "https://"+addr+"/")
	res := s.Send(context.Background(), req)
	require.Equal(t, ErrorClassConnect, res.ErrorClass, res.Error)
	require.Equal(t, "connection refused", res.Error)
	require.False(t, res.MayHaveReached)
	require.Zero(t, res.StatusCode)
}

func TestSendUntrustedCertificate(t *testing.T) {
	t.Parallel()
	var received atomic.Int64
	srv := newTLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		received.Add(1)
	}))
	s := NewSender(SenderConfig{AllowPrefixes: loopbackPrefixes}) // system roots
	t.Cleanup(s.CloseIdleConnections)
	req, _ := testRequest(t, srv.URL)
	res := s.Send(context.Background(), req)
	require.Equal(t, ErrorClassTLS, res.ErrorClass, res.Error)
	require.Equal(t, "TLS certificate is not signed by a trusted authority", res.Error)
	require.False(t, res.MayHaveReached)
	require.Zero(t, received.Load())
}

func TestSendPlainHTTPToTLSPort(t *testing.T) {
	t.Parallel()
	srv := newServer(t, "127.0.0.1:0", false, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	s := newTestSender(t, nil, nil)
	req, _ := testRequest(t, "https://127.0.0.1:"+srv.port()+"/")
	res := s.Send(context.Background(), req)
	require.Equal(t, ErrorClassTLS, res.ErrorClass, res.Error)
	require.False(t, res.MayHaveReached)
}

func TestSendDNSFailure(t *testing.T) {
	t.Parallel()
	s := newTestSender(t, nil, func(c *SenderConfig) { c.Timeout = 5 * time.Second })
	req, _ := testRequest(t, "https://no-such-host.invalid/hook")
	res := s.Send(context.Background(), req)
	require.Equal(t, ErrorClassDNS, res.ErrorClass, res.Error)
	require.False(t, res.MayHaveReached)
}

func TestSendRefusesHTTPUnlessAllowed(t *testing.T) {
	t.Parallel()
	srv := newServer(t, "127.0.0.1:0", false, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))

	strict := newTestSender(t, nil, nil) // loopback allowed, http not
	req, _ := testRequest(t, srv.URL)
	res := strict.Send(context.Background(), req)
	require.Equal(t, ErrorClassInvalidURL, res.ErrorClass)
	require.Equal(t, "url must use https", res.Error)
	require.False(t, res.MayHaveReached)
	srv.requireNoConnection(t)

	relaxed := newTestSender(t, nil, func(c *SenderConfig) { c.AllowHTTP = true })
	res = relaxed.Send(context.Background(), req)
	require.True(t, res.Delivered, res.Error)
}

func TestSendRejectsInvalidInput(t *testing.T) {
	t.Parallel()
	s := newTestSender(t, nil, nil)
	valid, _ := testRequest(t, "https://127.0.0.1:1/")
	tests := []struct {
		name  string
		edit  func(*Request)
		class ErrorClass
		msg   string
	}{
		{"credentials in url", func(r *Request) { r.URL = "https://user:pw@127.0.0.1:1/" }, ErrorClassInvalidURL, "credentials"},
		{"garbage url", func(r *Request) { r.URL = "::not a url" }, ErrorClassInvalidURL, "url"},
		{"empty id", func(r *Request) { r.ID = "" }, ErrorClassOther, "webhook id is empty"},
		{"newline in id", func(r *Request) { r.ID = "a\nb" }, ErrorClassOther, "control character"},
		{"no keys", func(r *Request) { r.Keys = nil }, ErrorClassOther, "no signing key"},
		{"empty key", func(r *Request) { r.Keys = [][]byte{{}} }, ErrorClassOther, "empty signing key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := valid
			tt.edit(&r)
			res := s.Send(context.Background(), r)
			require.Equal(t, tt.class, res.ErrorClass)
			require.Contains(t, res.Error, tt.msg)
			require.NotContains(t, res.Error, "pw")
			require.False(t, res.MayHaveReached)
		})
	}

	var nilSender *Sender
	res := nilSender.Send(context.Background(), valid)
	require.Equal(t, ErrorClassOther, res.ErrorClass)
	//nolint:staticcheck // a nil context must not panic either
	res = s.Send(nil, Request{URL: "http://x"})
	require.Equal(t, ErrorClassInvalidURL, res.ErrorClass)
}

func TestSendIgnoresProxyEnvironment(t *testing.T) {
	proxy := newServer(t, "127.0.0.1:0", false, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
	}))
	t.Setenv("HTTPS_PROXY", proxy.URL)
	t.Setenv("HTTP_PROXY", proxy.URL)
	t.Setenv("NO_PROXY", "")

	srv := newTLSServer(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	s := newTestSender(t, srv, nil)
	req, _ := testRequest(t, srv.URL)
	res := s.Send(context.Background(), req)
	require.True(t, res.Delivered, res.Error)
	proxy.requireNoConnection(t)
}

func TestSendConcurrentReusesConnections(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	ids := map[string]bool{}
	srv := newTLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		ids[r.Header.Get("webhook-id")] = true
		mu.Unlock()
		_, _ = io.WriteString(w, strings.Repeat("y", 100))
	}))
	s := newTestSender(t, srv, func(c *SenderConfig) { c.MaxConnsPerHost = 4 })
	base, _ := testRequest(t, srv.URL)

	const workers, perWorker = 8, 25
	var wg sync.WaitGroup
	failures := make(chan Result, workers*perWorker)
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				r := base
				r.ID = "msg_" + strconv.Itoa(w) + "_" + strconv.Itoa(i)
				if res := s.Send(context.Background(), r); !res.Delivered {
					failures <- res
				}
			}
		})
	}
	wg.Wait()
	close(failures)
	for res := range failures {
		require.Fail(t, "delivery failed", "%+v", res)
	}
	require.Len(t, ids, workers*perWorker)
	require.LessOrEqual(t, srv.ln.accepted.Load(), int64(4), "keep-alive connections are reused and capped")
}

// TestURLVerdictCache checks that cached verdicts are the ones checkURL
// gives, refusals included, and that the cache stays bounded.
func TestURLVerdictCache(t *testing.T) {
	t.Parallel()
	s := NewSender(SenderConfig{})
	first := s.check("HTTPS://example.com/hook?a=1")
	for range 2 {
		ok := s.check("HTTPS://example.com/hook?a=1")
		require.Nil(t, ok.violation)
		require.Equal(t, "https://example.com/hook?a=1", ok.url.String())
		require.Same(t, first.url, ok.url, "the requests to one URL share its parsed form")
		refused := s.check("https://127.0.0.1/hook")
		require.NotNil(t, refused.violation)
		require.True(t, refused.violation.ssrf)
		require.Nil(t, refused.url)
	}
	for i := range maxCheckedURLs + 10 {
		s.check(fmt.Sprintf("https://example.com/%d", i))
	}
	require.LessOrEqual(t, len(s.checked), maxCheckedURLs)
}
