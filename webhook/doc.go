// Package webhook implements the outbound side of webhook delivery for
// Aether Audit: signing secrets, request signatures, destination URL checks
// and a hardened HTTP sender. It holds no state beyond a connection pool and
// has no database code; scheduling, retries and persistence belong to the
// caller.
//
// # Signatures
//
// Deliveries follow the Standard Webhooks specification
// (https://www.standardwebhooks.com). Every request carries three headers:
//
//	webhook-id:        the message id; stable across retries of one message
//	webhook-timestamp: the attempt time as decimal Unix seconds
//	webhook-signature: space-separated "v1,<signature>" entries
//
// Each signature is the standard base64 encoding of
// HMAC-SHA256(key, id + "." + timestamp + "." + body), where body is the exact
// bytes sent. A signing secret is presented to users as "whsec_" followed by
// the standard base64 encoding of the raw key (see [NewSecret] and
// [ParseSecret]). During secret rotation the sender signs with every active
// key (see [Sign]); a receiver accepts the request if any entry verifies
// with a key it holds, so old and new secrets overlap without lost
// deliveries. Receivers should also reject timestamps outside a tolerance
// window to bound replay.
//
// # SSRF model
//
// Destination URLs are supplied by tenants, so the sender must never be
// turned into a probe of the internal network. Defence is layered:
//
//  1. Registration: [ValidateURL] refuses anything but absolute https URLs
//     with a host, credentials in the URL, fragments, overlong URLs, the
//     name "localhost" (and "*.localhost"), and literal IP addresses that
//     are not global unicast: loopback, private, link-local (including the
//     cloud metadata address 169.254.169.254), shared/CGNAT, multicast,
//     broadcast, unspecified, reserved and documentation ranges, and the
//     same addresses hidden in IPv4-mapped IPv6 or NAT64 form.
//  2. Delivery: [Sender.Send] repeats the URL check, because rules and data
//     change, and then checks every address it actually connects to. The
//     check runs in the dialer's Control hook, after DNS resolution and
//     immediately before each connect(2), for every new connection. A
//     hostname that resolves, or later re-resolves (DNS rebinding), to a
//     forbidden address is therefore refused before any byte is sent. The
//     address rules come from code.dny.dev/ssrf (the IANA special-purpose
//     registries) with this package's own checks layered on top.
//  3. No indirection: redirects are never followed (a 3xx is reported as
//     [ErrorClassRedirect]), proxies from the environment (HTTPS_PROXY and
//     friends) are ignored, there is no cookie jar, and URLs that carry
//     credentials are refused rather than forwarded.
//
// # Development relaxations
//
// [URLPolicy] and [SenderConfig] offer AllowHTTP, which permits plain http
// URLs, and AllowPrefixes, which lets literal or resolved addresses inside
// the given prefixes (for example 127.0.0.0/8) pass the address checks.
// Both exist for local development and tests against loopback servers and
// must stay unset in production. The "localhost" name is refused even then;
// use a literal loopback address with an allowed prefix instead.
package webhook
