package webhook

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/netip"
	"net/url"
	"strconv"
	"sync"
	"time"
)

// Defaults applied by [NewSender] to zero-valued [SenderConfig] fields.
const (
	DefaultConnectTimeout   = 5 * time.Second
	DefaultTimeout          = 15 * time.Second
	DefaultMaxResponseBytes = 4096
	DefaultUserAgent        = "AetherAudit-Webhooks/1.0"
)

const (
	// drainBytes bounds how much of an unwanted response body is read
	// after the kept part, so the connection can be reused without letting
	// a receiver make us download an arbitrary amount.
	drainBytes = 16 << 10
	// maxResponseHeaderBytes bounds the response header size.
	maxResponseHeaderBytes = 64 << 10
	// defaultIdlePerHost is the number of idle keep-alive connections kept
	// per receiver when MaxConnsPerHost is unlimited: as many as the
	// requests a busy process has in flight to one receiver, so that bursts
	// reuse connections instead of paying a TLS handshake each.
	defaultIdlePerHost = 128
)

// SenderConfig configures a [Sender]. Zero values select the defaults.
type SenderConfig struct {
	// ConnectTimeout bounds the TCP connect and, separately, the TLS
	// handshake of a new connection. Default [DefaultConnectTimeout].
	ConnectTimeout time.Duration
	// Timeout bounds the whole attempt, from name resolution to reading the
	// kept part of the response body. Default [DefaultTimeout].
	Timeout time.Duration
	// MaxResponseBytes is how many response body bytes are kept in
	// [Result.Body]. At most a further small, bounded amount is read and
	// discarded to allow connection reuse. Default [DefaultMaxResponseBytes].
	MaxResponseBytes int
	// AllowHTTP permits http URLs. For development and tests only.
	AllowHTTP bool
	// AllowPrefixes lists address ranges that pass the SSRF checks, both for
	// literal URL hosts and for resolved addresses (e.g. 127.0.0.0/8). For
	// development and tests only.
	AllowPrefixes []netip.Prefix
	// RootCAs verifies receivers' certificates; nil means the system roots.
	RootCAs *x509.CertPool
	// MaxConnsPerHost limits connections per receiver (dialing, active and
	// idle); 0 means unlimited. Idle connections are kept alive and reused.
	MaxConnsPerHost int
	// UserAgent is sent as User-Agent. Default [DefaultUserAgent].
	UserAgent string
}

// withDefaults returns c with zero fields replaced by defaults.
func (c SenderConfig) withDefaults() SenderConfig {
	if c.ConnectTimeout <= 0 {
		c.ConnectTimeout = DefaultConnectTimeout
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MaxResponseBytes <= 0 {
		c.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if c.UserAgent == "" {
		c.UserAgent = DefaultUserAgent
	}
	if c.MaxConnsPerHost < 0 {
		c.MaxConnsPerHost = 0
	}
	return c
}

// Sender delivers signed webhook requests. It owns one connection pool with
// keep-alive and is safe for concurrent use; create one per process (or per
// configuration) with [NewSender] and share it.
type Sender struct {
	cfg    SenderConfig
	policy *addrPolicy
	// transport makes each request with RoundTrip: one exchange, no
	// redirect following, no cookie jar (an http.Client would add
	// machinery for both, per request, only to turn it off).
	transport *http.Transport
	// checked caches checkURL's verdicts by URL: they depend only on the
	// URL and the Sender's configuration, and a delivery job sends up to a
	// hundred requests to one URL.
	checkedMu sync.Mutex
	checked   map[string]checkedURL
	// macs holds keyed HMAC states of the signing keys, reused from
	// request to request.
	macs *macCache
}

// checkedURL is a cached checkURL verdict: the request URL, parsed from
// its canonical form, or the violation. The requests to one URL share the
// parsed URL: the transport only reads a request's URL.
type checkedURL struct {
	url       *url.URL
	violation *urlViolation
}

// maxCheckedURLs bounds the verdict cache; it starts over when full.
const maxCheckedURLs = 4096

// check returns checkURL's verdict on raw, from the cache when it can.
func (s *Sender) check(raw string) checkedURL {
	s.checkedMu.Lock()
	c, ok := s.checked[raw]
	s.checkedMu.Unlock()
	if ok {
		return c
	}
	u, v := checkURL(raw, s.cfg.AllowHTTP, s.policy)
	c = checkedURL{violation: v}
	if v == nil {
		c.url, c.violation = requestURL(u)
	}
	s.checkedMu.Lock()
	if len(s.checked) >= maxCheckedURLs {
		clear(s.checked)
	}
	s.checked[raw] = c
	s.checkedMu.Unlock()
	return c
}

// NewSender returns a Sender for cfg, filling in defaults. The Sender's
// transport ignores proxy environment variables, dials only addresses that
// pass the SSRF policy (checked on every new connection after DNS
// resolution), requires TLS 1.2 or later, never follows redirects and keeps
// no cookies.
func NewSender(cfg SenderConfig) *Sender {
	cfg = cfg.withDefaults()
	policy := newAddrPolicy(cfg.AllowPrefixes)
	dialer := &net.Dialer{
		Timeout:   cfg.ConnectTimeout,
		KeepAlive: 30 * time.Second,
		Control:   policy.control,
	}
	idle := defaultIdlePerHost
	if cfg.MaxConnsPerHost > 0 {
		idle = cfg.MaxConnsPerHost
	}
	transport := &http.Transport{
		Proxy:       nil, // never a proxy, whatever the environment says
		DialContext: dialer.DialContext,
		TLSClientConfig: &tls.Config{
			RootCAs:    cfg.RootCAs,
			MinVersion: tls.VersionTLS12,
		},
		TLSHandshakeTimeout:    cfg.ConnectTimeout,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           0, // bounded per host below
		MaxIdleConnsPerHost:    idle,
		MaxConnsPerHost:        cfg.MaxConnsPerHost,
		IdleConnTimeout:        90 * time.Second,
		DisableCompression:     true,
		MaxResponseHeaderBytes: maxResponseHeaderBytes,
	}
	return &Sender{cfg: cfg, policy: policy, transport: transport, checked: map[string]checkedURL{}, macs: newMACCache()}
}

// CloseIdleConnections closes the Sender's idle keep-alive connections. The
// Sender stays usable; call it on shutdown or after configuration changes.
func (s *Sender) CloseIdleConnections() {
	if s != nil && s.transport != nil {
		s.transport.CloseIdleConnections()
	}
}

// Send makes exactly one delivery attempt: a POST of r.Body to r.URL with
// the headers
//
//	content-type:      application/json, or r.ContentType
//	webhook-id:        r.ID
//	webhook-timestamp: r.Timestamp as Unix seconds
//	webhook-signature: Sign(r.ID, r.Timestamp, r.Body, r.Keys)
//	user-agent:        SenderConfig.UserAgent
//
// and those of r.Header, which may name none of them (such a request is
// refused unsent, as one whose header value holds a line break); an
// r.Unsigned request has no webhook-* headers.
//
// Before any network activity the URL is checked with the [ValidateURL]
// rules under the Sender's AllowHTTP and AllowPrefixes; a refused
// destination yields [ErrorClassSSRF] or [ErrorClassInvalidURL]. Every
// connection the attempt opens is checked again at dial time, after DNS
// resolution, and a forbidden address yields [ErrorClassSSRF] with nothing
// sent. Redirects are reported as [ErrorClassRedirect] and never followed;
// no proxy and no cookies are used.
//
// Send does not retry; the caller schedules retries from the Result. It
// never panics and is safe for concurrent use. ctx bounds the attempt in
// addition to SenderConfig.Timeout.
func (s *Sender) Send(ctx context.Context, r Request) (res Result) {
	defer func() {
		if p := recover(); p != nil {
			// The outcome is unknown, so assume the request may have gone out.
			res = Result{ErrorClass: ErrorClassOther, Error: "internal error while sending", MayHaveReached: true}
		}
	}()
	if s == nil || s.transport == nil {
		return Result{ErrorClass: ErrorClassOther, Error: "sender is not initialized"}
	}
	if ctx == nil {
		ctx = context.Background()
	}
	c := s.check(r.URL)
	if v := c.violation; v != nil {
		class := ErrorClassInvalidURL
		if v.ssrf {
			class = ErrorClassSSRF
		}
		return Result{ErrorClass: class, Error: v.reason}
	}
	if err := r.validate(); err != nil {
		return Result{ErrorClass: ErrorClassOther, Error: "invalid request: " + err.Error()}
	}
	return s.deliver(ctx, c.url, r)
}

// deliver performs the HTTP exchange for an already validated URL and
// request. The dial-time address check still applies.
func (s *Sender) deliver(parent context.Context, target *url.URL, r Request) Result {
	ts := r.Timestamp
	if ts.IsZero() {
		ts = time.Now()
	}
	if parent.Err() != nil {
		// Nothing is sent for a parent that is done already.
		return Result{ErrorClass: ErrorClassCanceled, Error: "delivery was canceled before its request was sent"}
	}
	// The request's context is the parent's child, as a plain client's is:
	// the parent's end cancels it with no goroutine or callback of ours.
	// The trace is its outermost value, so that the transport's lookups of
	// it end at once, however long the parent's chain of values.
	ctx, cancel := context.WithTimeout(parent, s.cfg.Timeout)
	defer cancel()
	trace := newAttemptTrace()
	ctx = httptrace.WithClientTrace(ctx, trace.clientTrace())

	contentType := "application/json"
	if r.ContentType != "" {
		contentType = r.ContentType
	}
	// Keys in canonical form, set directly: one map of the right size, and
	// the values of Send's own headers slices of one array (each of
	// length and capacity 1, so that an append to one cannot reach the
	// next).
	header := make(http.Header, 5+len(r.Header))
	values := make([]string, 5)
	values[0], values[1] = contentType, s.cfg.UserAgent
	header["Content-Type"] = values[0:1:1]
	header["User-Agent"] = values[1:2:2]
	if !r.Unsigned {
		var digits [20]byte
		unix := strconv.AppendInt(digits[:0], ts.Unix(), 10)
		values[2], values[3], values[4] = r.ID, string(unix), signature(r.ID, unix, r.Body, r.Keys, s.macs)
		header["Webhook-Id"] = values[2:3:3]
		header["Webhook-Timestamp"] = values[3:4:4]
		header["Webhook-Signature"] = values[4:5:5]
	}
	// validate refused any name among Send's own.
	for name, values := range r.Header {
		header[name] = values
	}
	req := newPost(ctx, target, header, r.Body)

	start := time.Now()
	resp, err := s.transport.RoundTrip(req)
	latency := time.Since(start)
	if err != nil {
		class, msg := classify(err, parent, trace)
		reached := trace.mayHaveReached()
		switch class {
		case ErrorClassSSRF, ErrorClassDNS, ErrorClassConnect, ErrorClassTLS:
			reached = false
		}
		return Result{Latency: latency, ErrorClass: class, Error: msg, MayHaveReached: reached}
	}
	defer resp.Body.Close()

	res := Result{
		StatusCode: resp.StatusCode,
		Latency:    latency,
		Body:       readBody(resp.Body, s.cfg.MaxResponseBytes),
	}
	code := resp.StatusCode
	switch {
	case code >= 200 && code <= 299:
		res.Delivered = true
	case code >= 300 && code <= 399:
		res.ErrorClass = ErrorClassRedirect
		res.Error = fmt.Sprintf("receiver redirected with HTTP %d; redirects are not followed, register the final URL", code)
	default:
		res.ErrorClass = ErrorClassHTTPStatus
		res.Error = statusMessage(code)
	}
	if code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable {
		res.RetryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	}
	return res
}

// readBody keeps up to limit bytes of body, then reads and discards at
// most drainBytes more so that a short remainder does not cost the
// keep-alive connection. Read errors end reading; what was read is kept.
// It reads through a pooled buffer and allocates only the kept bytes (a
// receiver's answer is mostly empty or a few bytes).
func readBody(body io.Reader, limit int) []byte {
	bp := bodyBuffers.Get().(*[]byte)
	defer bodyBuffers.Put(bp)
	buf := *bp
	var kept []byte
	// Kept: up to limit bytes, in chunks of the buffer.
	n, err := readUpTo(body, buf[:min(limit, len(buf))])
	kept = append(kept, buf[:n]...)
	for err == nil && len(kept) < limit {
		n, err = readUpTo(body, buf[:min(limit-len(kept), len(buf))])
		kept = append(kept, buf[:n]...)
	}
	// Discarded: at most drainBytes more.
	for drained := 0; err == nil && drained < drainBytes; drained += n {
		n, err = readUpTo(body, buf[:min(drainBytes-drained, len(buf))])
	}
	return kept
}

// readUpTo reads from r until p is full, or r ends (io.EOF) or fails.
func readUpTo(r io.Reader, p []byte) (int, error) {
	n := 0
	for n < len(p) {
		m, err := r.Read(p[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// bodyBuffers holds the buffers readBody reads responses through.
var bodyBuffers = sync.Pool{New: func() any {
	b := make([]byte, 4<<10)
	return &b
}}

// statusMessage describes a non-2xx, non-3xx status.
func statusMessage(code int) string {
	if text := http.StatusText(code); text != "" {
		return fmt.Sprintf("receiver responded with HTTP %d %s", code, text)
	}
	return fmt.Sprintf("receiver responded with HTTP %d", code)
}
