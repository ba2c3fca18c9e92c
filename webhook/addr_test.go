package webhook

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestAddrPolicyRefusesSpecialAddresses(t *testing.T) {
	t.Parallel()
	p := newAddrPolicy(nil)
	refused := []string{
		"0.0.0.0", "0.1.2.3", "10.0.0.1", "100.64.0.1", "100.127.255.254",
		"127.0.0.1", "127.255.255.254", "169.254.0.1", "169.254.169.254",
		"172.16.0.1", "172.31.255.255", "192.0.0.1", "192.0.2.1",
		"192.88.99.1", "192.168.1.1", "198.18.0.1", "198.51.100.1",
		"203.0.113.1", "224.0.0.1", "239.255.255.255", "240.0.0.1",
		"255.255.255.255",
		"::", "::1", "::ffff:127.0.0.1", "::ffff:10.0.0.1", "::ffff:169.254.169.254",
		"64:ff9b::7f00:1", "64:ff9b::808:808", "64:ff9b:1::1", "64:ff9b:1::a00:1",
		"fe80::1", "fe80::1%eth0", "fc00::1", "fd00::2", "ff02::1", "ff0e::1",
		"2001::1", "2001:db8::1", "2002:a00:1::1", "3fff::1", "100::1", "::127.0.0.1",
	}
	for _, s := range refused {
		a := netip.MustParseAddr(s)
		require.NotNil(t, p.check(a), "%s must be refused", s)
		port := netip.AddrPortFrom(a.WithZone(""), 443).String()
		network := "tcp6"
		if a.Is4() {
			network = "tcp4"
		}
		require.Error(t, p.control(network, port, nil), "%s must be refused at dial time", s)
	}
	allowed := []string{"8.8.8.8", "1.1.1.1", "::ffff:8.8.8.8", "2606:4700::1111", "2a00:1450:4001::1"}
	for _, s := range allowed {
		require.Nil(t, p.check(netip.MustParseAddr(s)), "%s must be allowed", s)
	}
	require.NoError(t, p.control("tcp4", "8.8.8.8:8443", nil), "any port is allowed")
	require.NoError(t, p.control("tcp6", "[2606:4700::1111]:443", nil))
}

func TestAddrPolicyControlRefusesOtherNetworks(t *testing.T) {
	t.Parallel()
	p := newAddrPolicy([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")})
	for _, network := range []string{"udp4", "udp6", "unix", "tcp"} {
		require.Error(t, p.control(network, "8.8.8.8:443", nil), network)
		require.Error(t, p.control(network, "127.0.0.1:443", nil), network)
	}
	require.Error(t, p.control("tcp4", "not-an-address", nil))
}

func TestAddrPolicyAllowPrefixes(t *testing.T) {
	t.Parallel()
	p := newAddrPolicy([]netip.Prefix{
		netip.MustParsePrefix("127.0.0.0/8"),
		netip.MustParsePrefix("::1/128"),
		netip.MustParsePrefix("::ffff:10.9.0.0/112"), // mapped form means 10.9.0.0/16
		{}, // invalid prefixes are ignored
	})
	for _, s := range []string{"127.0.0.1", "127.9.9.9", "::ffff:127.0.0.1", "::1", "10.9.1.2"} {
		require.Nil(t, p.check(netip.MustParseAddr(s)), s)
	}
	require.NoError(t, p.control("tcp4", "127.0.0.1:1234", nil))
	require.NoError(t, p.control("tcp6", "[::1]:1234", nil))
	require.NoError(t, p.control("tcp4", "10.9.1.2:1234", nil))
	for _, s := range []string{"10.0.0.1", "169.254.169.254", "::2", "fe80::1"} {
		require.NotNil(t, p.check(netip.MustParseAddr(s)), s)
	}
	require.Error(t, p.control("tcp4", "169.254.169.254:80", nil))
}
