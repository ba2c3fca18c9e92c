package webhook

import (
	"crypto/x509"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// countingListener counts accepted connections, so tests can prove that a
// refused destination was never contacted.
type countingListener struct {
	net.Listener
	accepted atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepted.Add(1)
	}
	return c, err
}

// testServer is an httptest server whose listener counts connections.
type testServer struct {
	*httptest.Server
	ln *countingListener
}

// pool returns a certificate pool trusting the server's certificate.
func (s *testServer) pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(s.Certificate())
	return p
}

// port returns the server's port as a string.
func (s *testServer) port() string {
	_, port, _ := net.SplitHostPort(s.ln.Addr().String())
	return port
}

// requireNoConnection asserts that the server never sees a connection
// within a grace period that covers a racing accept.
func (s *testServer) requireNoConnection(t *testing.T) {
	t.Helper()
	require.Never(t, func() bool { return s.ln.accepted.Load() > 0 }, 100*time.Millisecond, 10*time.Millisecond,
		"the destination must not be contacted")
}

// newServer starts a server on addr ("127.0.0.1:0" or "[::1]:0"); with
// useTLS it serves HTTPS with httptest's certificate (valid for 127.0.0.1,
// ::1 and example.com).
func newServer(t *testing.T, addr string, useTLS bool, h http.Handler) *testServer {
	t.Helper()
	inner, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("cannot listen on %s: %v", addr, err)
	}
	ln := &countingListener{Listener: inner}
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // expected handshake failures
	_ = srv.Listener.Close()
	srv.Listener = ln
	if useTLS {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return &testServer{Server: srv, ln: ln}
}

func newTLSServer(t *testing.T, h http.Handler) *testServer {
	return newServer(t, "127.0.0.1:0", true, h)
}

// loopbackPrefixes are the development relaxations the happy-path tests use.
var loopbackPrefixes = []netip.Prefix{
	netip.MustParsePrefix("127.0.0.0/8"),
	netip.MustParsePrefix("::1/128"),
}

// newTestSender returns a Sender that trusts srv and may reach loopback;
// edit tweaks the config further.
func newTestSender(t *testing.T, srv *testServer, edit func(*SenderConfig)) *Sender {
	t.Helper()
	cfg := SenderConfig{AllowPrefixes: loopbackPrefixes}
	if srv != nil {
		cfg.RootCAs = srv.pool()
	}
	if edit != nil {
		edit(&cfg)
	}
	s := NewSender(cfg)
	t.Cleanup(s.CloseIdleConnections)
	return s
}

// testRequest returns a signed request to url with a fresh key.
func testRequest(t *testing.T, url string) (Request, []byte) {
	t.Helper()
	_, key, err := NewSecret()
	require.NoError(t, err)
	return Request{
		URL:       url,
		ID:        "msg_test_1",
		Timestamp: time.Now(),
		Body:      []byte(`{"type":"audit.event.created","data":{"secret_field":"do-not-leak"}}`),
		Keys:      [][]byte{key},
	}, key
}

// requireNoLeak asserts a failure description is safe to show.
func requireNoLeak(t *testing.T, res Result, r Request) {
	t.Helper()
	require.NotContains(t, res.Error, "do-not-leak")
	require.NotContains(t, res.Error, string(r.Body))
}
