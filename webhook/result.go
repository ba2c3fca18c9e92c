package webhook

import "time"

// ErrorClass says, in one stable machine-readable word, why a delivery
// attempt did not succeed. It is meant for metrics, retry policy and
// filtering; [Result.Error] carries the human-readable detail.
type ErrorClass string

// The error classes reported in [Result.ErrorClass].
const (
	// ErrorClassHTTPStatus: the receiver answered with a status that is
	// neither 2xx nor 3xx.
	ErrorClassHTTPStatus ErrorClass = "http_status"
	// ErrorClassRedirect: the receiver answered 3xx. Redirects are never
	// followed; the receiver must be registered at its final URL.
	ErrorClassRedirect ErrorClass = "redirect"
	// ErrorClassSSRF: the URL or an address it resolved to is forbidden
	// (loopback, private, link-local, ...). Nothing was sent.
	ErrorClassSSRF ErrorClass = "ssrf_blocked"
	// ErrorClassDNS: the host name could not be resolved.
	ErrorClassDNS ErrorClass = "dns"
	// ErrorClassConnect: no TCP connection could be established (refused,
	// unreachable, or connect timeout).
	ErrorClassConnect ErrorClass = "connect"
	// ErrorClassTLS: the TLS handshake failed or timed out, including
	// certificate verification failures.
	ErrorClassTLS ErrorClass = "tls"
	// ErrorClassTimeout: the attempt exceeded [SenderConfig.Timeout] (or the
	// caller's deadline) after a connection was established.
	ErrorClassTimeout ErrorClass = "timeout"
	// ErrorClassCanceled: the caller's context was canceled.
	ErrorClassCanceled ErrorClass = "canceled"
	// ErrorClassInvalidURL: the URL is malformed or not permitted by the
	// URL rules other than the SSRF ones (scheme, credentials, length...).
	ErrorClassInvalidURL ErrorClass = "invalid_url"
	// ErrorClassOther: any other failure, such as the connection closing
	// before a response or an invalid request.
	ErrorClassOther ErrorClass = "other"
)

// Result describes one delivery attempt. Send always returns a Result and
// never an error: failures are data for the delivery log.
type Result struct {
	// StatusCode is the HTTP status received, or 0 when no response arrived.
	StatusCode int
	// Latency is the time from the start of the attempt (before name
	// resolution) to the response headers, or to the failure.
	Latency time.Duration
	// Delivered is true exactly when the receiver answered 2xx.
	Delivered bool
	// ErrorClass is "" when Delivered and says why not otherwise.
	ErrorClass ErrorClass
	// Error is a short, user-facing description of the failure, "" when
	// Delivered. It never contains signing keys, the request body, URL
	// credentials or the URL's query, nor addresses resolved from
	// hostnames.
	Error string
	// Body holds at most SenderConfig.MaxResponseBytes bytes of the response
	// body, for display. It is the receiver's content: treat it as untrusted.
	Body []byte
	// RetryAfter is the receiver's Retry-After header, given as delay
	// seconds or an HTTP-date, on a 429 or 503 response; 0 otherwise or
	// when absent, malformed or in the past.
	RetryAfter time.Duration
	// MayHaveReached is true when the request may have reached the receiver
	// but the outcome is unknown (for example a timeout or cancellation after
	// a connection was established). It is false when a response was
	// received and for failures before anything was sent (invalid URL, SSRF
	// block, DNS, connect, TLS). Callers use it to decide whether a retry
	// could cause a duplicate; receivers deduplicate on webhook-id.
	MayHaveReached bool
}
