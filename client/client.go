package client

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Client talks to one Aether Audit server. It is safe for concurrent use.
type Client struct {
	base     *url.URL
	endpoint string
	tokens   TokenSource
	http     *http.Client
	retry    retryPolicy
}

// Options configure a Client. Exactly one of Token and TokenSource must be
// set.
type Options struct {
	// Token is a static bearer token.
	Token string
	// TokenSource gives the bearer token of each request, for producers
	// whose tokens are short-lived.
	TokenSource TokenSource
	// HTTPClient sends the requests; default: a client with a 60 s timeout,
	// which SubscribeSSE's streams ignore (their context bounds them).
	HTTPClient *http.Client
	// MaxAttempts bounds the attempts of one call (default 8; 1 turns
	// retries off).
	MaxAttempts int
	// MinBackoff and MaxBackoff bound the delay between attempts (defaults
	// 100 ms and 10 s); the delay doubles from MinBackoff, with jitter.
	// A RATE_LIMITED answer waits at least its retryAfterSeconds, even past
	// MaxBackoff.
	MinBackoff, MaxBackoff time.Duration
}

// New returns a client of the server at baseURL (e.g.
// "https://audit.example.com" or "http://127.0.0.1:8080"); GraphQL goes to
// baseURL + "/graphql".
func New(baseURL string, opts Options) (*Client, error) {
	u, err := url.Parse(strings.TrimSuffix(baseURL, "/"))
	if err != nil {
		return nil, errors.New("client: baseURL is not a URL")
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("client: baseURL must be an absolute http or https URL")
	}
	tokens := opts.TokenSource
	switch {
	case opts.Token != "" && tokens != nil:
		return nil, errors.New("client: set Token or TokenSource, not both")
	case opts.Token != "":
		tokens = StaticToken(opts.Token)
	case tokens == nil:
		return nil, errors.New("client: a Token or a TokenSource is required")
	}
	hc := opts.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: 60 * time.Second}
	}
	c := &Client{base: u, endpoint: u.String() + "/graphql", tokens: tokens, http: hc,
		retry: retryPolicy{attempts: opts.MaxAttempts, min: opts.MinBackoff, max: opts.MaxBackoff}}
	if c.retry.attempts <= 0 {
		c.retry.attempts = 8
	}
	if c.retry.min <= 0 {
		c.retry.min = 100 * time.Millisecond
	}
	if c.retry.max <= 0 {
		c.retry.max = 10 * time.Second
	}
	c.retry.max = max(c.retry.max, c.retry.min)
	return c, nil
}
