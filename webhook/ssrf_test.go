package webhook

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// ssrfTarget is a loopback HTTPS server and a URL naming it.
type ssrfTarget struct {
	name string
	url  string
	srv  *testServer
}

// loopbackTargets starts HTTPS servers on 127.0.0.1 and, if available,
// [::1], and returns URLs reaching them by several spellings.
func loopbackTargets(t *testing.T) []ssrfTarget {
	t.Helper()
	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	v4 := newTLSServer(t, ok)
	targets := []ssrfTarget{
		{"ipv4 literal", "https://127.0.0.1:" + v4.port() + "/", v4},
		{"localhost resolves to loopback", "https://localhost:" + v4.port() + "/", v4},
		{"ipv4-mapped ipv6 literal", "https://[::ffff:127.0.0.1]:" + v4.port() + "/", v4},
	}
	if ln, err := net.Listen("tcp", "[::1]:0"); err == nil {
		_ = ln.Close()
		v6 := newServer(t, "[::1]:0", true, ok)
		targets = append(targets, ssrfTarget{"ipv6 loopback literal", "https://[::1]:" + v6.port() + "/", v6})
	} else {
		t.Logf("no IPv6 loopback, skipping [::1]: %v", err)
	}
	return targets
}

// TestSendBlocksLoopbackWithoutAllowedPrefixes checks the production policy
// end to end: nothing reaches a loopback server.
func TestSendBlocksLoopbackWithoutAllowedPrefixes(t *testing.T) {
	t.Parallel()
	for _, tt := range loopbackTargets(t) {
		t.Run(tt.name, func(t *testing.T) {
			s := NewSender(SenderConfig{RootCAs: tt.srv.pool()})
			t.Cleanup(s.CloseIdleConnections)
			req, _ := testRequest(t, tt.url)
			res := s.Send(context.Background(), req)
			require.Equal(t, ErrorClassSSRF, res.ErrorClass, res.Error)
			require.False(t, res.Delivered)
			require.False(t, res.MayHaveReached)
			require.Zero(t, res.StatusCode)
			tt.srv.requireNoConnection(t)
		})
	}
}

// TestDialTimeCheckBlocksResolvedAddresses bypasses the URL check to prove
// that the dialer's Control hook alone refuses every loopback spelling,
// including a host name that is only known to be loopback after DNS.
func TestDialTimeCheckBlocksResolvedAddresses(t *testing.T) {
	t.Parallel()
	for _, tt := range loopbackTargets(t) {
		t.Run(tt.name, func(t *testing.T) {
			s := NewSender(SenderConfig{RootCAs: tt.srv.pool()})
			t.Cleanup(s.CloseIdleConnections)
			req, _ := testRequest(t, tt.url)
			u, err := url.Parse(tt.url)
			require.NoError(t, err)

			res := s.deliver(context.Background(), u, req)
			require.Equal(t, ErrorClassSSRF, res.ErrorClass, res.Error)
			require.Equal(t, "destination resolves to a non-public address", res.Error)
			require.False(t, res.MayHaveReached)
			tt.srv.requireNoConnection(t)
		})
	}
}

// TestSendBlocksHostNameResolvingToLoopback uses this machine's host name
// when it resolves only to loopback addresses (as in most containers): the
// URL check passes, and the dial-time check must refuse.
func TestSendBlocksHostNameResolvingToLoopback(t *testing.T) {
	t.Parallel()
	host, err := os.Hostname()
	require.NoError(t, err)
	addrs, err := net.DefaultResolver.LookupNetIP(context.Background(), "ip", host)
	if err != nil || len(addrs) == 0 {
		t.Skipf("host name %q does not resolve: %v", host, err)
	}
	for _, a := range addrs {
		if !a.Unmap().IsLoopback() {
			t.Skipf("host name %q resolves to non-loopback %s", host, a)
		}
	}
	srv := newTLSServer(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	target := "https://" + net.JoinHostPort(host, srv.port()) + "/"
	_, err = ValidateURL(target, URLPolicy{})
	require.NoError(t, err, "the name itself is acceptable at registration")

	s := NewSender(SenderConfig{RootCAs: srv.pool()})
	t.Cleanup(s.CloseIdleConnections)
	req, _ := testRequest(t, target)
	res := s.Send(context.Background(), req)
	require.Equal(t, ErrorClassSSRF, res.ErrorClass, res.Error)
	require.False(t, res.MayHaveReached)
	srv.requireNoConnection(t)
}

// TestSendAllowedPrefixesAreNarrow checks that allowing loopback does not
// open other special ranges, at URL check or at dial time.
func TestSendAllowedPrefixesAreNarrow(t *testing.T) {
	t.Parallel()
	s := newTestSender(t, nil, func(c *SenderConfig) { c.AllowHTTP = true })
	for _, target := range []string{
		"http://169.254.169.254/latest/meta-data/",
		"https://10.0.0.1/",
		"https://[64:ff9b::7f00:1]/",
		"https://[fe80::1%25lo]/",
	} {
		req, _ := testRequest(t, target)
		res := s.Send(context.Background(), req)
		require.Equal(t, ErrorClassSSRF, res.ErrorClass, target)
		require.False(t, res.MayHaveReached, target)
	}
}
