package webhook

import (
	"errors"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// fuzzSpecialPrefixes are ranges no accepted destination may name
// literally, listed here independently of the package's own tables.
var fuzzSpecialPrefixes = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("127.0.0.0/8"),
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.168.0.0/16"),
	netip.MustParsePrefix("224.0.0.0/4"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("::/128"),
	netip.MustParsePrefix("::1/128"),
	netip.MustParsePrefix("fc00::/7"),
	netip.MustParsePrefix("fe80::/10"),
	netip.MustParsePrefix("ff00::/8"),
	netip.MustParsePrefix("64:ff9b::/96"),
	netip.MustParsePrefix("64:ff9b:1::/48"),
}

// FuzzValidateURL checks ValidateURL on arbitrary input under the
// production policy and under a development one (http allowed, loopback
// allowed). It never panics; a refusal is a *URLError with a reason that
// does not repeat the URL's credentials; an accepted URL is at most
// MaxURLBytes, absolute, https (or http under the development policy),
// with a host, without userinfo or fragment, not localhost, with any
// literal IP address public (or loopback under the development policy),
// and validates again to itself. The seed corpus is in
// testdata/fuzz/FuzzValidateURL.
func FuzzValidateURL(f *testing.F) {
	f.Add("https://hooks.example.com/in?x=1")
	loopback := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	f.Fuzz(func(t *testing.T, raw string) {
		for _, dev := range []bool{false, true} {
			policy := URLPolicy{}
			if dev {
				policy = URLPolicy{AllowHTTP: true, AllowPrefixes: loopback}
			}
			got, err := ValidateURL(raw, policy)
			if err != nil {
				var uerr *URLError
				require.True(t, errors.As(err, &uerr), "error %T %v", err, err)
				require.NotEmpty(t, uerr.Reason)
				require.Empty(t, got)
				if u, perr := url.Parse(raw); perr == nil && u.User != nil {
					if pw, set := u.User.Password(); set && len(pw) >= 8 {
						require.NotContains(t, uerr.Reason, u.User.String()+"@", "reason repeats the credentials")
					}
				}
				continue
			}
			require.LessOrEqual(t, len(raw), MaxURLBytes)
			u, perr := url.Parse(got)
			require.NoError(t, perr, "accepted %q normalized to unparseable %q", raw, got)
			if dev {
				require.Contains(t, []string{"http", "https"}, u.Scheme, "accepted %q", raw)
			} else {
				require.Equal(t, "https", u.Scheme, "accepted %q", raw)
			}
			require.NotEmpty(t, u.Hostname(), "accepted %q", raw)
			require.Nil(t, u.User, "accepted %q with credentials", raw)
			require.Empty(t, u.Fragment, "accepted %q with a fragment", raw)
			require.NotContains(t, got, "#")
			host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
			require.False(t, host == "localhost" || strings.HasSuffix(host, ".localhost"), "accepted %q", raw)
			if a, aerr := netip.ParseAddr(u.Hostname()); aerr == nil {
				a = a.WithZone("").Unmap()
				allowed := dev && loopback[0].Contains(a)
				if !allowed {
					require.True(t, a.IsGlobalUnicast(), "accepted %q naming %s", raw, a)
					for _, p := range fuzzSpecialPrefixes {
						require.False(t, p.Contains(a), "accepted %q naming %s in %s", raw, a, p)
					}
				}
			}
			again, aerr := ValidateURL(got, policy)
			require.NoError(t, aerr, "accepted %q but not its normalized form %q", raw, got)
			require.Equal(t, got, again, "normalizing %q is not stable", raw)
		}
	})
}
