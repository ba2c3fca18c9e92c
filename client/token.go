package client

import (
	"context"
	"errors"
	"sync"
	"time"
)

// TokenSource gives the bearer token for a request. The client asks for it
// before every HTTP request and every WebSocket connection; a source that
// fetches tokens should cache them (see [NewCachingTokenSource]).
type TokenSource interface {
	Token(ctx context.Context) (string, error)
}

// TokenSourceFunc is a function as a TokenSource.
type TokenSourceFunc func(ctx context.Context) (string, error)

// Token calls f.
func (f TokenSourceFunc) Token(ctx context.Context) (string, error) { return f(ctx) }

// StaticToken is a TokenSource that always gives the same token.
func StaticToken(token string) TokenSource {
	return TokenSourceFunc(func(context.Context) (string, error) { return token, nil })
}

// FetchToken obtains a fresh token and the time it expires, e.g. from an
// identity provider's token endpoint.
type FetchToken func(ctx context.Context) (token string, expiresAt time.Time, err error)

// NewCachingTokenSource returns a TokenSource that calls fetch for a token,
// keeps it, and calls fetch again once less than refreshBefore of its
// lifetime remains (default 30 s when refreshBefore is 0). Concurrent
// callers share one fetch.
func NewCachingTokenSource(fetch FetchToken, refreshBefore time.Duration) TokenSource {
	if refreshBefore <= 0 {
		refreshBefore = 30 * time.Second
	}
	return &cachingTokenSource{fetch: fetch, refreshBefore: refreshBefore}
}

// cachingTokenSource is NewCachingTokenSource's source.
type cachingTokenSource struct {
	fetch         FetchToken
	refreshBefore time.Duration

	mu        sync.Mutex
	token     string
	expiresAt time.Time
}

// Token returns the cached token, fetching a new one when it is about to
// expire.
func (s *cachingTokenSource) Token(ctx context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.token != "" && time.Until(s.expiresAt) > s.refreshBefore {
		return s.token, nil
	}
	tok, exp, err := s.fetch(ctx)
	if err != nil {
		return "", err
	}
	if tok == "" {
		return "", errors.New("client: the token source gave an empty token")
	}
	s.token, s.expiresAt = tok, exp
	return tok, nil
}
