package webhook

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http/httptrace"
	"sync/atomic"
	"syscall"
)

// attemptTrace records how far one attempt got, so that failures can be
// attributed to a phase and MayHaveReached can be decided. Callbacks may
// run on transport goroutines, hence the atomics. It holds its own hooks,
// so that an attempt's trace is one allocation and its two callbacks.
type attemptTrace struct {
	hooks      httptrace.ClientTrace
	tlsStarted atomic.Bool // a TLS handshake began on a new connection
	gotConn    atomic.Bool // a usable (connected, handshaken) connection was obtained
}

// newAttemptTrace returns a trace whose hooks feed it.
func newAttemptTrace() *attemptTrace {
	t := &attemptTrace{}
	t.hooks.TLSHandshakeStart = func() { t.tlsStarted.Store(true) }
	t.hooks.GotConn = func(httptrace.GotConnInfo) { t.gotConn.Store(true) }
	return t
}

// clientTrace returns the httptrace hooks that feed t.
func (t *attemptTrace) clientTrace() *httptrace.ClientTrace { return &t.hooks }

// mayHaveReached reports whether bytes of the request may have left this
// process. It is deliberately conservative: once a connection is in hand
// the request write may have begun. (The transport hands a request a
// connection, and reports GotConn, before it writes any of it, on HTTP/1
// and HTTP/2 alike.)
func (t *attemptTrace) mayHaveReached() bool {
	return t.gotConn.Load()
}

// classify maps a transport error to an error class and a short,
// user-facing message. parent is the caller's context (before the sender
// added its own timeout). Messages never include the URL, resolved
// addresses, keys or body.
func classify(err error, parent context.Context, t *attemptTrace) (ErrorClass, string) {
	if errors.Is(parent.Err(), context.Canceled) {
		return ErrorClassCanceled, "delivery was canceled"
	}
	var blocked *blockedError
	if errors.As(err, &blocked) {
		// The resolved address is deliberately not shown: it would turn the
		// error into an oracle for internal DNS names.
		return ErrorClassSSRF, "destination resolves to a non-public address"
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		switch {
		case dnsErr.IsNotFound:
			return ErrorClassDNS, "host name not found"
		case dnsErr.IsTimeout:
			return ErrorClassDNS, "DNS lookup timed out"
		}
		return ErrorClassDNS, "DNS lookup failed"
	}
	if !t.gotConn.Load() {
		if t.tlsStarted.Load() || isTLSError(err) {
			return ErrorClassTLS, tlsMessage(err)
		}
		return ErrorClassConnect, connectMessage(err)
	}
	if isTimeout(err) {
		return ErrorClassTimeout, "timed out waiting for the receiver's response"
	}
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return ErrorClassOther, "connection closed before a response was received"
	case errors.Is(err, syscall.ECONNRESET):
		return ErrorClassOther, "connection reset before a response was received"
	}
	return ErrorClassOther, "request failed before a response was received"
}

// isTimeout reports whether err is a deadline or I/O timeout.
func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// isTLSError reports whether err comes from TLS record parsing or
// certificate verification.
func isTLSError(err error) bool {
	var (
		rec  tls.RecordHeaderError
		cve  *tls.CertificateVerificationError
		alrt tls.AlertError
	)
	return errors.As(err, &rec) || errors.As(err, &cve) || errors.As(err, &alrt)
}

// tlsMessage describes a handshake failure.
func tlsMessage(err error) string {
	var (
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		rec      tls.RecordHeaderError
	)
	switch {
	case errors.As(err, &unknown):
		return "TLS certificate is not signed by a trusted authority"
	case errors.As(err, &hostname):
		return "TLS certificate is not valid for this host name"
	case errors.As(err, &invalid):
		if invalid.Reason == x509.Expired {
			return "TLS certificate has expired or is not yet valid"
		}
		return "TLS certificate is invalid"
	case errors.As(err, &rec):
		return "receiver did not answer with TLS"
	case isTimeout(err):
		return "TLS handshake timed out"
	}
	return "TLS handshake failed"
}

// connectMessage describes a failure to establish the TCP connection.
func connectMessage(err error) string {
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ENETUNREACH):
		return "network unreachable"
	case errors.Is(err, syscall.EHOSTUNREACH):
		return "host unreachable"
	case isTimeout(err):
		return "connection timed out"
	}
	return "could not connect"
}
