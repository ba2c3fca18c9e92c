package server_test

import (
	"io/fs"
	"net/http"
	"path"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/web"
)

// graphiqlNonce matches the style nonce of the GraphiQL page's policy.
var graphiqlNonce = regexp.MustCompile(`style-src 'self' 'nonce-([A-Za-z0-9_-]{22})';`)

// requireGraphiQLPolicy checks the policy and security headers of a GraphiQL
// response: the dashboard's, plus a style nonce on the page itself.
func requireGraphiQLPolicy(t *testing.T, res *http.Response, host string) {
	t.Helper()
	csp := res.Header.Get("Content-Security-Policy")
	for _, directive := range []string{
		"default-src 'none'",
		"script-src 'self'",
		"connect-src 'self' ws://" + host + " wss://" + host,
		"base-uri 'none'",
		"form-action 'none'",
		"frame-ancestors 'none'",
	} {
		require.Contains(t, csp, directive)
	}
	require.NotContains(t, csp, "unsafe-inline")
	require.NotContains(t, csp, "unsafe-eval")
	require.NotContains(t, csp, "font-src", "the bundle inlines no fonts")
	require.Equal(t, "nosniff", res.Header.Get("X-Content-Type-Options"))
	require.Equal(t, "no-referrer", res.Header.Get("Referrer-Policy"))
	require.Equal(t, "DENY", res.Header.Get("X-Frame-Options"))
	require.Equal(t, "same-origin", res.Header.Get("Cross-Origin-Opener-Policy"))
}

func TestGraphiQLPage(t *testing.T) {
	base := dashboardServer(t)
	host := strings.TrimPrefix(base, "http://")
	template, err := fs.ReadFile(web.GraphiQL, "index.html")
	require.NoError(t, err)

	nonces := map[string]bool{}
	for _, p := range []string{"/graphiql", "/graphiql/", "/graphiql/index.html"} {
		res, body := dashboardGet(t, base+p, nil)
		require.Equal(t, http.StatusOK, res.StatusCode, p)
		require.Equal(t, "text/html; charset=utf-8", res.Header.Get("Content-Type"), p)
		requireGraphiQLPolicy(t, res, host)
		// Each response has its own nonce, in the policy and in the page, and
		// is never cached.
		m := graphiqlNonce.FindStringSubmatch(res.Header.Get("Content-Security-Policy"))
		require.NotNil(t, m, res.Header.Get("Content-Security-Policy"))
		nonce := m[1]
		require.False(t, nonces[nonce], "a nonce is never reused")
		nonces[nonce] = true
		require.Equal(t, "no-store", res.Header.Get("Cache-Control"), p)
		require.Empty(t, res.Header.Get("ETag"), p)
		require.Equal(t, strings.Replace(string(template), "{{CSP_NONCE}}", nonce, 1), body, p)
		require.Contains(t, body, `<meta property="csp-nonce" nonce="`+nonce+`">`)
	}

	// The page holds no inline code and loads nothing from elsewhere.
	scripts := regexp.MustCompile(`<script[^>]*>`).FindAllString(string(template), -1)
	require.Equal(t, []string{`<script type="module" src="/graphiql/graphiql.js">`}, scripts)
	require.NotRegexp(t, `<style|\sstyle=|\son[a-z]+=`, string(template))
	require.NotRegexp(t, `(src|href)="(https?:)?//`, string(template), "no external resources")

	// HEAD answers like GET, without the body.
	req, err := http.NewRequest(http.MethodHead, base+"/graphiql", nil)
	require.NoError(t, err)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.NoError(t, res.Body.Close())
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Regexp(t, graphiqlNonce, res.Header.Get("Content-Security-Policy"))
}

func TestGraphiQLAssets(t *testing.T) {
	base := dashboardServer(t)
	host := strings.TrimPrefix(base, "http://")
	types := map[string]string{
		".css": "text/css; charset=utf-8",
		".js":  "text/javascript; charset=utf-8",
		".txt": "text/plain; charset=utf-8",
	}
	var names []string
	require.NoError(t, fs.WalkDir(web.GraphiQL, ".", func(name string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && name != "index.html" {
			names = append(names, name)
		}
		return err
	}))
	require.ElementsMatch(t, []string{"graphiql.js", "graphiql.css", "LICENSES.txt"}, names)
	for _, name := range names {
		want, err := fs.ReadFile(web.GraphiQL, name)
		require.NoError(t, err)
		res, body := dashboardGet(t, base+"/graphiql/"+name, nil)
		require.Equal(t, http.StatusOK, res.StatusCode, name)
		require.Equal(t, types[path.Ext(name)], res.Header.Get("Content-Type"), name)
		requireGraphiQLPolicy(t, res, host)
		require.Equal(t, "no-cache", res.Header.Get("Cache-Control"), name)
		require.Regexp(t, `^"[0-9a-f]{32}"$`, res.Header.Get("ETag"), name)
		require.Equal(t, len(want), len(body), name)
		require.True(t, string(want) == body, name)

		again, body := dashboardGet(t, base+"/graphiql/"+name, map[string]string{"If-None-Match": res.Header.Get("ETag")})
		require.Equal(t, http.StatusNotModified, again.StatusCode, name)
		require.Empty(t, body)
	}
}

func TestGraphiQLUnknownFiles(t *testing.T) {
	base := dashboardServer(t)
	for _, p := range []string{"/graphiql/nope.js", "/graphiql/index.htm", "/graphiql/graphiql.js/x", "/graphiql/graphiql-src/package.json", "/graphiql/../web.go"} {
		res, body := dashboardGet(t, base+p, nil)
		require.Equal(t, http.StatusNotFound, res.StatusCode, p)
		require.Equal(t, "application/problem+json", res.Header.Get("Content-Type"), p)
		require.Contains(t, body, `"code":"NOT_FOUND"`, p)
	}

	res, err := http.Post(base+"/graphiql", "text/plain", strings.NewReader("x"))
	require.NoError(t, err)
	require.NoError(t, res.Body.Close())
	require.Equal(t, http.StatusNotFound, res.StatusCode)
	require.Empty(t, res.Header.Get("Content-Security-Policy"))
}
