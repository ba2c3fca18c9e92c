package webhook

import (
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// MaxURLBytes is the longest destination URL, in bytes, that [ValidateURL]
// and [Sender.Send] accept.
const MaxURLBytes = 2048

// URLError says why a destination URL is refused. Reason is a complete,
// user-facing sentence such as "url must use https" and never contains
// credentials from the URL.
type URLError struct {
	Reason string
}

// Error returns Reason.
func (e *URLError) Error() string { return e.Reason }

// URLPolicy relaxes destination checks for local development and tests
// only. The zero value is the production policy.
type URLPolicy struct {
	// AllowHTTP permits the http scheme in addition to https.
	AllowHTTP bool
	// AllowPrefixes lists address ranges that pass the address checks, for
	// example 127.0.0.0/8 to reach a test server on loopback.
	AllowPrefixes []netip.Prefix
}

// ValidateURL checks a destination URL when it is registered and returns
// its normalized form: the same URL with scheme and host in lower case.
//
// The URL must be absolute with scheme https (or http when p.AllowHTTP is
// set), have a host and a valid port if one is given, be at most
// [MaxURLBytes] bytes long, and carry no userinfo and no fragment. The host
// must not be "localhost" or end in ".localhost" (case-insensitive, with or
// without a trailing dot), nor a numeric host in a non-standard form. A host
// that is a literal IP address (IPv4, IPv6 with or without a zone, or IPv4
// in IPv4-mapped or NAT64 form) must be a public global unicast address
// unless it lies inside one of p.AllowPrefixes. Hostnames are not resolved
// here; [Sender.Send] checks the resolved addresses of every connection.
//
// On refusal the error is a *[URLError] whose message says why.
func ValidateURL(raw string, p URLPolicy) (string, error) {
	u, v := checkURL(raw, p.AllowHTTP, newAddrPolicy(p.AllowPrefixes))
	if v != nil {
		return "", &URLError{Reason: v.reason}
	}
	return u.String(), nil
}

// RedactURL returns raw for display with any userinfo removed. Other parts,
// including the query, are returned unchanged. Input that does not parse as
// a URL is returned as-is unless it looks like it carries userinfo, in which
// case a placeholder is returned.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		if strings.Contains(raw, "@") {
			return "[unparseable url]"
		}
		return raw
	}
	if u.User == nil {
		return raw
	}
	u.User = nil
	return u.String()
}

// urlViolation is a refused URL. ssrf marks refusals of the destination
// itself (localhost, a forbidden address) as opposed to malformed URLs.
type urlViolation struct {
	reason string
	ssrf   bool
}

func malformed(reason string) *urlViolation { return &urlViolation{reason: reason} }

// checkURL applies the ValidateURL rules and returns the parsed URL with
// scheme and host lower-cased.
func checkURL(raw string, allowHTTP bool, ap *addrPolicy) (*url.URL, *urlViolation) {
	if raw == "" {
		return nil, malformed("url is required")
	}
	if len(raw) > MaxURLBytes {
		return nil, malformed(fmt.Sprintf("url must be at most %d bytes", MaxURLBytes))
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, malformed("url is not a valid URL")
	}
	if !u.IsAbs() {
		return nil, malformed("url must be absolute, starting with https://")
	}
	u.Scheme = strings.ToLower(u.Scheme)
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && allowHTTP:
	default:
		return nil, malformed("url must use https")
	}
	if u.Opaque != "" || u.Host == "" {
		return nil, malformed("url must have a host")
	}
	if u.User != nil {
		return nil, malformed("url must not contain credentials; receivers authenticate deliveries by their signature")
	}
	// After parsing, '#' can only be the fragment delimiter; checking the
	// raw string also catches an empty fragment ("https://h/#").
	if u.Fragment != "" || strings.Contains(raw, "#") {
		return nil, malformed("url must not contain a fragment")
	}
	if port := u.Port(); port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return nil, malformed("url has an invalid port")
		}
	}
	u.Host = strings.ToLower(u.Host)
	if v := checkHost(u.Hostname(), ap); v != nil {
		return nil, v
	}
	return u, nil
}

// checkHost applies the host rules to a lower-cased hostname without
// brackets or port.
func checkHost(host string, ap *addrPolicy) *urlViolation {
	if host == "" {
		return malformed("url must have a host")
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if r := ap.check(a); r != nil {
			return &urlViolation{
				reason: fmt.Sprintf("url names %s address (%s)", r.kind, host),
				ssrf:   true,
			}
		}
		return nil
	}
	name := strings.TrimSuffix(host, ".")
	if name == "localhost" || strings.HasSuffix(name, ".localhost") {
		return &urlViolation{reason: "url must not name localhost", ssrf: true}
	}
	if looksNumeric(name) {
		// Forms such as "2130706433", "0x7f.1" or "127.1" are not DNS names
		// (a top-level label is never numeric) but some software reads them
		// as IPv4 addresses.
		return &urlViolation{reason: "url host must be a DNS name or a standard IP address", ssrf: true}
	}
	return nil
}

// looksNumeric reports whether the last label of name is all digits or a
// 0x-prefixed hexadecimal number, which no valid DNS name has.
func looksNumeric(name string) bool {
	label := name[strings.LastIndexByte(name, '.')+1:]
	if label == "" {
		return false
	}
	if h, ok := strings.CutPrefix(label, "0x"); ok {
		label = h
		if label == "" {
			return true
		}
		return strings.Trim(label, "0123456789abcdef") == ""
	}
	return strings.Trim(label, "0123456789") == ""
}
