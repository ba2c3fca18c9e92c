package webhook

import (
	"net/netip"
	"syscall"
)

// blockedError is returned by the dialer's Control hook when a connection
// would reach a forbidden address. It travels up through net and net/http
// wrapping and is recognised with errors.As.
type blockedError struct {
	addr   netip.Addr
	reason string
}

func (e *blockedError) Error() string {
	return "webhook: connection to " + e.addr.String() + " refused: " + e.reason
}

// control is installed as net.Dialer.Control. The dialer calls it for every
// connection attempt, after name resolution and before connect(2), with the
// concrete network ("tcp4" or "tcp6") and "ip:port" address. Refusing here
// covers every address a hostname resolves to, DNS rebinding between
// registration and delivery, and connections opened for any reason.
func (p *addrPolicy) control(network, address string, c syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &blockedError{reason: "unparseable address"}
	}
	addr := ap.Addr()
	// Network type and the library's address rules first, then our own.
	// The library is configured with the allowed prefixes already.
	if p.isAllowed(addr) {
		return p.guardNetwork(network)
	}
	if err := p.guard.Safe(network, address, c); err != nil {
		return &blockedError{addr: addr, reason: err.Error()}
	}
	if r := p.check(addr); r != nil {
		return &blockedError{addr: addr, reason: addr.String() + " is " + r.kind + " address"}
	}
	return nil
}

// isAllowed reports whether addr lies in one of the explicitly allowed
// prefixes.
func (p *addrPolicy) isAllowed(addr netip.Addr) bool {
	a := addr.WithZone("").Unmap()
	for _, pfx := range p.allow {
		if pfx.Contains(a) {
			return true
		}
	}
	return false
}

// guardNetwork refuses anything but TCP over IPv4 or IPv6.
func (p *addrPolicy) guardNetwork(network string) error {
	if network != "tcp4" && network != "tcp6" {
		return &blockedError{reason: "network " + network + " is not permitted"}
	}
	return nil
}
