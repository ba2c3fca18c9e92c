package domain

import (
	"fmt"
	"strings"
	"time"
)

// WebhookDestinationState is the lifecycle state of a destination:
//
//	ENABLED <-> DISABLED        (disable and enable commands)
//	ENABLED  -> AUTO_DISABLED   (the service: failing too long, or 410 Gone)
//	AUTO_DISABLED -> ENABLED    (enable command)
//
// A deleted destination keeps its last state and its DeletedAt.
type WebhookDestinationState string

// The destination states.
const (
	WebhookDestinationEnabled      WebhookDestinationState = "ENABLED"
	WebhookDestinationDisabled     WebhookDestinationState = "DISABLED"
	WebhookDestinationAutoDisabled WebhookDestinationState = "AUTO_DISABLED"
)

// Disable moves an enabled destination to DISABLED (or, for the service,
// AUTO_DISABLED) with a reason. It reports false, and changes nothing, when
// the destination is already disabled either way.
func (d *WebhookDestination) Disable(state WebhookDestinationState, reason string, now time.Time) bool {
	if d.State != WebhookDestinationEnabled {
		return false
	}
	d.State, d.DisabledReason, d.DisabledAt = state, reason, &now
	return true
}

// Enable moves a disabled or auto-disabled destination back to ENABLED with
// a fresh health record: the breaker closed and no failures counted. It
// reports false, and changes nothing, when it is already enabled.
func (d *WebhookDestination) Enable() bool {
	if d.State == WebhookDestinationEnabled {
		return false
	}
	d.State, d.DisabledReason, d.DisabledAt = WebhookDestinationEnabled, "", nil
	d.Health.closeCircuit()
	d.Health.ConsecutiveFailures, d.Health.FailingSince = 0, nil
	return true
}

// Limits of a destination's settings.
const (
	// MaxWebhookHeaders bounds a destination's custom headers.
	MaxWebhookHeaders = 10
	// MaxWebhookHeaderNameLength and MaxWebhookHeaderValueLength bound one
	// custom header, in bytes.
	MaxWebhookHeaderNameLength  = 64
	MaxWebhookHeaderValueLength = 1024
	// MaxWebhookRateLimit bounds rateLimitPerSecond.
	MaxWebhookRateLimit = 10000
	// MaxWebhookMaxInFlight bounds maxInFlight.
	MaxWebhookMaxInFlight = 100
)

// WebhookHeader is a custom header sent with every request to a
// destination.
type WebhookHeader struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// reservedHeaderNames are the names a custom header may not take: those
// the sender sets itself, those HTTP's framing and connection handling
// own, and credentials-style names whose meaning a tenant should not be
// able to bend (docs/webhooks.md lists them).
var reservedHeaderNames = []string{
	"authorization", "connection", "cookie", "expect", "forwarded", "host", "keep-alive",
	"proxy-authorization", "te", "trailer", "transfer-encoding", "upgrade", "user-agent", "accept-encoding",
}

// reservedHeaderPrefixes are the name prefixes a custom header may not use.
var reservedHeaderPrefixes = []string{"webhook-", "content-", "proxy-", "x-forwarded-"}

// ParseWebhookHeaders validates a destination's custom headers: at most
// MaxWebhookHeaders, each name an HTTP token of at most
// MaxWebhookHeaderNameLength bytes that is not reserved nor repeated (in any
// case), each value at most MaxWebhookHeaderValueLength bytes of visible
// ASCII, spaces and tabs. Names are kept as given.
func ParseWebhookHeaders(field string, hs []WebhookHeader) ([]WebhookHeader, error) {
	if len(hs) > MaxWebhookHeaders {
		return nil, invalid(field, "must contain at most %d headers", MaxWebhookHeaders)
	}
	seen := make(map[string]bool, len(hs))
	out := make([]WebhookHeader, 0, len(hs))
	for i, h := range hs {
		f := fmt.Sprintf("%s[%d]", field, i)
		if h.Name == "" || len(h.Name) > MaxWebhookHeaderNameLength {
			return nil, invalid(f+".name", "must be 1 to %d bytes", MaxWebhookHeaderNameLength)
		}
		for j := 0; j < len(h.Name); j++ {
			if !isTokenChar(h.Name[j]) {
				return nil, invalid(f+".name", "must be an HTTP header name (letters, digits and !#$%%&'*+-.^_`|~)")
			}
		}
		lower := strings.ToLower(h.Name)
		if isReservedHeader(lower) {
			return nil, invalid(f+".name", "%q is reserved: the service sets it, or it belongs to HTTP itself", h.Name)
		}
		if seen[lower] {
			return nil, invalid(f+".name", "%q is given twice", h.Name)
		}
		seen[lower] = true
		if len(h.Value) > MaxWebhookHeaderValueLength {
			return nil, invalid(f+".value", "must be at most %d bytes", MaxWebhookHeaderValueLength)
		}
		for j := 0; j < len(h.Value); j++ {
			if c := h.Value[j]; c != '\t' && (c < 0x20 || c > 0x7e) {
				return nil, invalid(f+".value", "must be visible ASCII, spaces and tabs")
			}
		}
		out = append(out, h)
	}
	return out, nil
}

// isReservedHeader reports whether a lower-case header name is reserved.
func isReservedHeader(lower string) bool {
	for _, n := range reservedHeaderNames {
		if lower == n {
			return true
		}
	}
	for _, p := range reservedHeaderPrefixes {
		if strings.HasPrefix(lower, p) {
			return true
		}
	}
	return false
}

// isTokenChar reports whether c may appear in an HTTP token (RFC 9110).
func isTokenChar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}
