package webhook

import (
	"errors"
	"net/http"
	"strings"
	"time"
)

// Request is one delivery attempt of one message.
type Request struct {
	// URL is the destination; it is checked with the ValidateURL rules
	// again before sending.
	URL string
	// ID is the message id sent as webhook-id. It must be the same for every
	// attempt of a message so receivers can deduplicate. It must be
	// non-empty, without control characters or surrounding whitespace.
	ID string
	// Timestamp is the attempt time sent as webhook-timestamp (Unix
	// seconds) and covered by the signature. The zero value means now.
	Timestamp time.Time
	// Body is sent verbatim as the request body with content type
	// application/json; the signature covers exactly these bytes.
	Body []byte
	// Keys are the raw signing keys (see ParseSecret); the request is signed
	// with each of them, in order. At least one non-empty key is required
	// unless Unsigned.
	Keys [][]byte
	// Header holds extra headers: a destination's custom ones, a stream's
	// Aether-* headers, a collector's credential. They never replace the
	// headers Send sets itself.
	Header http.Header
	// ContentType replaces the content type application/json (streams send
	// application/x-ndjson).
	ContentType string
	// Unsigned sends no webhook-id, webhook-timestamp or webhook-signature
	// header and needs no Keys: for collectors that authenticate the sender
	// by a credential in Header instead (Splunk, Datadog).
	Unsigned bool
}

// validate checks the parts of r other than the URL. Its errors are
// user-facing and never echo keys or body.
func (r *Request) validate() error {
	if r.ID == "" {
		return errors.New("webhook id is empty")
	}
	if strings.TrimSpace(r.ID) != r.ID {
		return errors.New("webhook id has surrounding whitespace")
	}
	for i := 0; i < len(r.ID); i++ {
		if c := r.ID[i]; c < 0x20 || c == 0x7f {
			return errors.New("webhook id contains a control character")
		}
	}
	for name, values := range r.Header {
		if !validHeaderName(name) {
			return errors.New("invalid extra header")
		}
		for _, v := range values {
			if strings.ContainsAny(v, "\r\n\x00") {
				return errors.New("invalid extra header")
			}
		}
	}
	if r.Unsigned {
		return nil
	}
	if len(r.Keys) == 0 {
		return errors.New("no signing key")
	}
	for _, k := range r.Keys {
		if len(k) == 0 {
			return errors.New("empty signing key")
		}
	}
	return nil
}

// validHeaderName reports whether name is an HTTP token that names none of
// the headers Send sets itself.
func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	switch strings.ToLower(name) {
	case "content-type", "content-length", "host", "user-agent", "webhook-id", "webhook-timestamp", "webhook-signature":
		return false
	}
	return true
}
