package server_test

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"path"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aetheriot/aether-audit/server"
	"github.com/aetheriot/aether-audit/web"
)

// dashboardServer serves the HTTP surface on a real socket; the dashboard
// needs neither a database nor a token.
func dashboardServer(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(server.New(server.Config{}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func dashboardGet(t *testing.T, url string, header map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res, string(body)
}

// requireDashboardHeaders checks the security and cache headers of every
// dashboard file.
func requireDashboardHeaders(t *testing.T, res *http.Response, host string) {
	t.Helper()
	csp := res.Header.Get("Content-Security-Policy")
	for _, directive := range []string{
		"default-src 'none'",
		"script-src 'self'",
		"style-src 'self'",
		"connect-src 'self' ws://" + host + " wss://" + host,
		"base-uri 'none'",
		"form-action 'none'",
		"frame-ancestors 'none'",
	} {
		require.Contains(t, csp, directive)
	}
	require.NotContains(t, csp, "unsafe-inline")
	require.NotContains(t, csp, "unsafe-eval")
	require.Equal(t, "nosniff", res.Header.Get("X-Content-Type-Options"))
	require.Equal(t, "no-referrer", res.Header.Get("Referrer-Policy"))
	require.Equal(t, "DENY", res.Header.Get("X-Frame-Options"))
	require.Equal(t, "no-cache", res.Header.Get("Cache-Control"))
	require.Regexp(t, `^"[0-9a-f]{32}"$`, res.Header.Get("ETag"))
}

func TestDashboardPage(t *testing.T) {
	base := dashboardServer(t)
	host := strings.TrimPrefix(base, "http://")
	index, err := fs.ReadFile(web.Files, "index.html")
	require.NoError(t, err)

	for _, p := range []string{"/dashboard", "/dashboard/", "/dashboard/index.html"} {
		res, body := dashboardGet(t, base+p, nil)
		require.Equal(t, http.StatusOK, res.StatusCode, p)
		require.Equal(t, "text/html; charset=utf-8", res.Header.Get("Content-Type"), p)
		requireDashboardHeaders(t, res, host)
		require.Equal(t, string(index), body, p)
	}

	// The policy allows no inline code: every script is a file of ours,
	// and no element carries a style attribute or an inline handler.
	scripts := regexp.MustCompile(`<script[^>]*>`).FindAllString(string(index), -1)
	require.NotEmpty(t, scripts)
	for _, s := range scripts {
		require.Regexp(t, `src="/dashboard/[^"]+\.js"`, s)
	}
	require.NotRegexp(t, `\sstyle=|\son[a-z]+=`, string(index))
	require.NotRegexp(t, `(src|href)="(https?:)?//`, string(index), "no external resources")
}

func TestDashboardAssets(t *testing.T) {
	base := dashboardServer(t)
	host := strings.TrimPrefix(base, "http://")
	types := map[string]string{
		".html": "text/html; charset=utf-8",
		".css":  "text/css; charset=utf-8",
		".js":   "text/javascript; charset=utf-8",
	}
	var names []string
	require.NoError(t, fs.WalkDir(web.Files, ".", func(name string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			names = append(names, name)
		}
		return err
	}))
	require.Contains(t, names, "js/main.js")
	for _, name := range names {
		want, err := fs.ReadFile(web.Files, name)
		require.NoError(t, err)
		res, body := dashboardGet(t, base+"/dashboard/"+name, nil)
		require.Equal(t, http.StatusOK, res.StatusCode, name)
		require.Equal(t, types[path.Ext(name)], res.Header.Get("Content-Type"), name)
		requireDashboardHeaders(t, res, host)
		require.Equal(t, string(want), body, name)

		// A browser revalidating with the ETag gets 304 and no body.
		again, body := dashboardGet(t, base+"/dashboard/"+name, map[string]string{"If-None-Match": res.Header.Get("ETag")})
		require.Equal(t, http.StatusNotModified, again.StatusCode, name)
		require.Empty(t, body)
	}
}

func TestDashboardUnknownFiles(t *testing.T) {
	base := dashboardServer(t)
	for _, p := range []string{"/dashboard/nope.js", "/dashboard/js/", "/dashboard/js/nope.js", "/dashboard/web.go", "/dashboard/js/main.js/x"} {
		res, body := dashboardGet(t, base+p, nil)
		require.Equal(t, http.StatusNotFound, res.StatusCode, p)
		require.Equal(t, "application/problem+json", res.Header.Get("Content-Type"), p)
		require.Contains(t, body, `"code":"NOT_FOUND"`, p)
	}

	// Only GET (and HEAD) serve the page.
	res, err := http.Post(base+"/dashboard", "text/plain", strings.NewReader("x"))
	require.NoError(t, err)
	require.NoError(t, res.Body.Close())
	require.Equal(t, http.StatusNotFound, res.StatusCode)
	require.Empty(t, res.Header.Get("Content-Security-Policy"))
}

func TestDashboardPolicyOmitsOddHosts(t *testing.T) {
	base := dashboardServer(t)
	req, err := http.NewRequest(http.MethodGet, base+"/dashboard", nil)
	require.NoError(t, err)
	req.Host = "example.test:8443"
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.NoError(t, res.Body.Close())
	require.Contains(t, res.Header.Get("Content-Security-Policy"), "connect-src 'self' ws://example.test:8443 wss://example.test:8443;")

	// A Host that is not a plain host[:port] is never copied into the policy.
	req.Host = "evil.test;script-src"
	res, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.NoError(t, res.Body.Close())
	if res.StatusCode == http.StatusOK {
		csp := res.Header.Get("Content-Security-Policy")
		require.Contains(t, csp, "connect-src 'self';")
		require.NotContains(t, csp, "evil")
	} else {
		require.Equal(t, http.StatusBadRequest, res.StatusCode)
	}
}
