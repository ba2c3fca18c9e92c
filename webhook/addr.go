package webhook

import (
	"net/netip"

	"code.dny.dev/ssrf"
)

// Prefixes this package refuses on its own, in addition to the rules of
// code.dny.dev/ssrf, so that the policy does not silently weaken if the
// library's tables change.
var (
	prefixCGNAT       = netip.MustParsePrefix("100.64.0.0/10")  // shared address space (RFC 6598)
	prefixThisNetwork = netip.MustParsePrefix("0.0.0.0/8")      // "this network" (RFC 791)
	prefixReserved4   = netip.MustParsePrefix("240.0.0.0/4")    // reserved and limited broadcast
	prefixNAT64       = netip.MustParsePrefix("64:ff9b::/96")   // well-known NAT64 (RFC 6052)
	prefixNAT64Local  = netip.MustParsePrefix("64:ff9b:1::/48") // local-use NAT64 (RFC 8215)
	prefixGlobal6     = netip.MustParsePrefix("2000::/3")       // IPv6 global unicast
)

// addrPolicy decides whether the sender may connect to an IP address. It is
// immutable after construction and safe for concurrent use.
type addrPolicy struct {
	allow []netip.Prefix
	guard *ssrf.Guardian
}

// newAddrPolicy builds the policy: addresses inside allow always pass;
// everything else must pass code.dny.dev/ssrf (configured with the same
// allowed prefixes and any port) and this package's extra checks.
func newAddrPolicy(allow []netip.Prefix) *addrPolicy {
	var v4, v6, all []netip.Prefix
	for _, p := range allow {
		if !p.IsValid() {
			continue
		}
		// An IPv4-mapped prefix (::ffff:a.b.c.d/n, n >= 96) means the IPv4
		// prefix: the dialer connects to mapped addresses over IPv4.
		if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
		}
		p = p.Masked()
		all = append(all, p)
		if p.Addr().Is4() {
			v4 = append(v4, p)
		} else {
			v6 = append(v6, p)
		}
	}
	return &addrPolicy{
		allow: all,
		guard: ssrf.New(
			ssrf.WithAnyPort(),
			ssrf.WithAllowedV4Prefixes(v4...),
			ssrf.WithAllowedV6Prefixes(v6...),
		),
	}
}

// refusal explains why an address is refused. kind is a phrase with its
// article, such as "a loopback", suitable for "<addr> is <kind> address".
type refusal struct {
	kind string
}

// check reports whether the sender may connect to a. It returns nil when a
// is permitted and a refusal otherwise. Zones are ignored and IPv4-mapped
// IPv6 addresses are judged as the IPv4 address they carry, which is what
// the dialer would connect to.
func (p *addrPolicy) check(a netip.Addr) *refusal {
	if !a.IsValid() {
		return &refusal{kind: "an invalid"}
	}
	if p.isAllowed(a) {
		return nil
	}
	a = a.WithZone("").Unmap()
	if p.guard.SafeAddr(a) != nil || !isPublic(a) {
		return &refusal{kind: describeAddr(a)}
	}
	return nil
}

// isPublic is this package's own test that a (unmapped, zoneless) is a
// global unicast address outside every special-purpose range we know of.
// It backs up code.dny.dev/ssrf rather than replacing it.
func isPublic(a netip.Addr) bool {
	switch {
	case !a.IsGlobalUnicast(), // unspecified, loopback, link-local, multicast, broadcast
		a.IsPrivate(), // 10/8, 172.16/12, 192.168/16, fc00::/7
		prefixCGNAT.Contains(a),
		prefixThisNetwork.Contains(a),
		prefixReserved4.Contains(a),
		prefixNAT64.Contains(a),
		prefixNAT64Local.Contains(a):
		return false
	case a.Is6() && !prefixGlobal6.Contains(a):
		return false
	}
	return true
}

// describeAddr names the class of a refused address for error messages,
// with its indefinite article. a is unmapped and zoneless.
func describeAddr(a netip.Addr) string {
	switch {
	case a.IsUnspecified():
		return "an unspecified"
	case a.IsLoopback():
		return "a loopback"
	case a.IsPrivate():
		return "a private"
	case a.IsLinkLocalUnicast():
		return "a link-local"
	case a.IsMulticast():
		return "a multicast"
	case a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return "a broadcast"
	case prefixCGNAT.Contains(a):
		return "a shared (carrier-grade NAT)"
	case prefixNAT64.Contains(a):
		if v4 := nat64Embedded(a); !isPublic(v4) {
			return "a NAT64 address embedding " + describeAddr(v4)
		}
		return "a NAT64"
	case prefixNAT64Local.Contains(a):
		return "a NAT64"
	}
	return "a reserved"
}

// nat64Embedded returns the IPv4 address carried in the low 32 bits of an
// address inside 64:ff9b::/96.
func nat64Embedded(a netip.Addr) netip.Addr {
	b := a.As16()
	return netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
}
