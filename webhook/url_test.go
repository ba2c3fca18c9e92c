package webhook

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestValidateURL(t *testing.T) {
	t.Parallel()
	loopback := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	tests := []struct {
		name    string
		raw     string
		policy  URLPolicy
		want    string // normalized URL when accepted
		wantErr string // exact reason when refused
	}{
		// Accepted.
		{name: "https", raw: "https://hooks.example.com/in?x=1", want: "https://hooks.example.com/in?x=1"},
		{name: "normalizes scheme and host", raw: "HTTPS://Hooks.Example.COM:8443/In/Path", want: "https://hooks.example.com:8443/In/Path"},
		{name: "global ipv4 literal", raw: "https://8.8.8.8/hook", want: "https://8.8.8.8/hook"},
		{name: "global ipv6 literal", raw: "https://[2606:4700::1111]/hook", want: "https://[2606:4700::1111]/hook"},
		{name: "ipv4-mapped global", raw: "https://[::ffff:8.8.8.8]/", want: "https://[::ffff:8.8.8.8]/"},
		{name: "http with AllowHTTP", raw: "http://hooks.example.com/", policy: URLPolicy{AllowHTTP: true}, want: "http://hooks.example.com/"},
		{name: "allowed prefix lets loopback pass", raw: "https://127.0.0.1:8443/", policy: URLPolicy{AllowPrefixes: loopback}, want: "https://127.0.0.1:8443/"},
		{name: "allowed prefix covers mapped form", raw: "https://[::ffff:127.0.0.1]/", policy: URLPolicy{AllowPrefixes: loopback}, want: "https://[::ffff:127.0.0.1]/"},
		{name: "localhost-like name", raw: "https://localhost.example.com/", want: "https://localhost.example.com/"},
		{name: "numeric non-final label", raw: "https://123.example.com/", want: "https://123.example.com/"},

		// Scheme and shape.
		{name: "http refused", raw: "http://hooks.example.com/", wantErr: "url must use https"},
		{name: "ftp refused", raw: "ftp://hooks.example.com/", policy: URLPolicy{AllowHTTP: true}, wantErr: "url must use https"},
		{name: "empty", raw: "", wantErr: "url is required"},
		{name: "relative", raw: "/hooks/in", wantErr: "url must be absolute, starting with https://"},
		{name: "no scheme", raw: "hooks.example.com/in", wantErr: "url must be absolute, starting with https://"},
		{name: "garbage", raw: "ht tp://%zz", wantErr: "url is not a valid URL"},
		{name: "opaque", raw: "https:hooks.example.com", wantErr: "url must have a host"},
		{name: "no host", raw: "https:///path", wantErr: "url must have a host"},
		{name: "port only", raw: "https://:443/", wantErr: "url must have a host"},
		{name: "bad port", raw: "https://hooks.example.com:70000/", wantErr: "url has an invalid port"},
		{name: "zero port", raw: "https://hooks.example.com:0/", wantErr: "url has an invalid port"},
		{name: "userinfo", raw: "https://user:pass@hooks.example.com/", wantErr: "url must not contain credentials; receivers authenticate deliveries by their signature"},
		{name: "user only", raw: "https://token@hooks.example.com/", wantErr: "url must not contain credentials; receivers authenticate deliveries by their signature"},
		{name: "fragment", raw: "https://hooks.example.com/in#frag", wantErr: "url must not contain a fragment"},
		{name: "empty fragment", raw: "https://hooks.example.com/in#", wantErr: "url must not contain a fragment"},
		{name: "too long", raw: "https://hooks.example.com/" + strings.Repeat("a", MaxURLBytes), wantErr: "url must be at most 2048 bytes"},

		// Local names.
		{name: "localhost", raw: "https://localhost/", wantErr: "url must not name localhost"},
		{name: "localhost upper with dot", raw: "https://LOCALHOST./", wantErr: "url must not name localhost"},
		{name: "subdomain of localhost", raw: "https://foo.localhost:8443/", wantErr: "url must not name localhost"},
		{name: "localhost despite allowed prefix", raw: "https://localhost/", policy: URLPolicy{AllowPrefixes: loopback}, wantErr: "url must not name localhost"},
		{name: "decimal ipv4", raw: "https://2130706433/", wantErr: "url host must be a DNS name or a standard IP address"},
		{name: "short ipv4", raw: "https://127.1/", wantErr: "url host must be a DNS name or a standard IP address"},
		{name: "hex ipv4", raw: "https://0x7f.0.0.1/", wantErr: "url host must be a DNS name or a standard IP address"},
		{name: "ipv4 trailing dot", raw: "https://127.0.0.1./", wantErr: "url host must be a DNS name or a standard IP address"},

		// Literal addresses.
		{name: "loopback v4", raw: "https://127.0.0.1/", wantErr: "url names a loopback address (127.0.0.1)"},
		{name: "private 10/8", raw: "https://10.1.2.3/", wantErr: "url names a private address (10.1.2.3)"},
		{name: "private 172.16/12", raw: "https://172.16.0.1/", wantErr: "url names a private address (172.16.0.1)"},
		{name: "private 192.168/16", raw: "https://192.168.1.1/", wantErr: "url names a private address (192.168.1.1)"},
		{name: "metadata", raw: "https://169.254.169.254/latest/meta-data/", wantErr: "url names a link-local address (169.254.169.254)"},
		{name: "cgnat", raw: "https://100.64.0.1/", wantErr: "url names a shared (carrier-grade NAT) address (100.64.0.1)"},
		{name: "unspecified v4", raw: "https://0.0.0.0/", wantErr: "url names an unspecified address (0.0.0.0)"},
		{name: "multicast v4", raw: "https://224.0.0.1/", wantErr: "url names a multicast address (224.0.0.1)"},
		{name: "broadcast", raw: "https://255.255.255.255/", wantErr: "url names a broadcast address (255.255.255.255)"},
		{name: "documentation v4", raw: "https://192.0.2.10/", wantErr: "url names a reserved address (192.0.2.10)"},
		{name: "loopback v6", raw: "https://[::1]/", wantErr: "url names a loopback address (::1)"},
		{name: "unspecified v6", raw: "https://[::]/", wantErr: "url names an unspecified address (::)"},
		{name: "ipv4-mapped loopback", raw: "https://[::ffff:127.0.0.1]/", wantErr: "url names a loopback address (::ffff:127.0.0.1)"},
		{name: "ipv4-mapped private", raw: "https://[::ffff:10.0.0.1]:8443/", wantErr: "url names a private address (::ffff:10.0.0.1)"},
		{name: "nat64 loopback", raw: "https://[64:ff9b::7f00:1]/", wantErr: "url names a NAT64 address embedding a loopback address (64:ff9b::7f00:1)"},
		{name: "nat64 metadata", raw: "https://[64:ff9b::a9fe:a9fe]/", wantErr: "url names a NAT64 address embedding a link-local address (64:ff9b::a9fe:a9fe)"},
		{name: "nat64 global", raw: "https://[64:ff9b::808:808]/", wantErr: "url names a NAT64 address (64:ff9b::808:808)"},
		{name: "nat64 local-use", raw: "https://[64:ff9b:1::1]/", wantErr: "url names a NAT64 address (64:ff9b:1::1)"},
		{name: "link-local v6 with zone", raw: "https://[fe80::1%25eth0]/", wantErr: "url names a link-local address (fe80::1%eth0)"},
		{name: "unique local v6", raw: "https://[fc00::1]/", wantErr: "url names a private address (fc00::1)"},
		{name: "multicast v6", raw: "https://[ff02::1]/", wantErr: "url names a multicast address (ff02::1)"},
		{name: "documentation v6", raw: "https://[2001:db8::1]/", wantErr: "url names a reserved address (2001:db8::1)"},
		{name: "6to4", raw: "https://[2002:7f00:1::1]/", wantErr: "url names a reserved address (2002:7f00:1::1)"},
		{name: "allowed prefix is narrow", raw: "https://10.0.0.1/", policy: URLPolicy{AllowPrefixes: loopback}, wantErr: "url names a private address (10.0.0.1)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ValidateURL(tt.raw, tt.policy)
			if tt.wantErr == "" {
				require.NoError(t, err)
				require.Equal(t, tt.want, got)
				return
			}
			var ue *URLError
			require.ErrorAs(t, err, &ue)
			require.Equal(t, tt.wantErr, ue.Error())
			require.Empty(t, got)
			require.NotContains(t, ue.Error(), "pass", "never echo credentials")
		})
	}
}

func TestRedactURL(t *testing.T) {
	t.Parallel()
	require.Equal(t, "https://hooks.example.com/in?x=1", RedactURL("https://user:secret@hooks.example.com/in?x=1"))
	require.Equal(t, "https://hooks.example.com/in", RedactURL("https://token@hooks.example.com/in"))
	require.Equal(t, "https://hooks.example.com/in?x=1#f", RedactURL("https://hooks.example.com/in?x=1#f"))
	require.Equal(t, "not a url", RedactURL("not a url"))
	require.NotContains(t, RedactURL("https://u:se cret@%zz"), "se cret")
}
