package webhook

import (
	"errors"
	"net/http"
)

// errNoRedirects stops a GuardedClient at the first redirect.
var errNoRedirects = errors.New("webhook: redirects are not followed")

// GuardedClient returns an *http.Client on the Sender's transport, for the
// other outbound requests to addresses a tenant chose (the S3 endpoints of
// audit streams): every connection it opens passes the Sender's SSRF policy
// after DNS resolution, no proxy is used, no cookies are kept, and
// redirects are returned, never followed. It has no overall timeout: the
// caller's context bounds each request.
func (s *Sender) GuardedClient() *http.Client {
	return &http.Client{
		Transport: s.transport,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return errNoRedirects
		},
	}
}
