package webhook

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// requestURL returns the URL a request to the checked URL u is made with:
// u's canonical form parsed as http.NewRequest parses it, once per URL
// rather than per request. A form that does not parse is a violation.
func requestURL(u *url.URL) (*url.URL, *urlViolation) {
	p, err := url.Parse(u.String())
	if err != nil {
		return nil, malformed("url cannot be used for a request")
	}
	// http.NewRequest drops an empty port (checkURL refuses one anyway).
	p.Host = strings.TrimSuffix(p.Host, ":")
	return p, nil
}

// newPost returns the POST of body to u with header under ctx, as
// http.NewRequestWithContext returns it for a *bytes.Reader body, without
// parsing the URL again: u is shared, and read only.
func newPost(ctx context.Context, u *url.URL, header http.Header, body []byte) *http.Request {
	req := http.Request{
		Method:        http.MethodPost,
		URL:           u,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        header,
		Body:          http.NoBody,
		GetBody:       noBody,
		ContentLength: int64(len(body)),
		Host:          u.Host,
	}
	if len(body) > 0 {
		// The transport knows a *bytes.Reader under io.NopCloser holds its
		// body in memory: it writes the headers and body in one write.
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	return req.WithContext(ctx)
}

// noBody is the GetBody of a request without a body.
func noBody() (io.ReadCloser, error) { return http.NoBody, nil }
