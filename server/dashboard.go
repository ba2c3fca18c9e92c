package server

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"regexp"
	"strings"
	"time"

	"github.com/aetheriot/aether-audit/app"
	"github.com/aetheriot/aether-audit/web"
)

// dashboardAsset is one embedded file of the dashboard, ready to serve.
type dashboardAsset struct {
	content     []byte
	contentType string
	etag        string
}

// dashboardAssets reads the embedded dashboard once: URL path (below
// /dashboard/) to file. It panics when the embedded files cannot be read,
// which is a build error, not a runtime condition.
func dashboardAssets() map[string]dashboardAsset {
	assets := map[string]dashboardAsset{}
	err := fs.WalkDir(web.Files, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		content, err := fs.ReadFile(web.Files, name)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(content)
		assets[name] = dashboardAsset{
			content:     content,
			contentType: dashboardContentType(name),
			etag:        `"` + hex.EncodeToString(sum[:16]) + `"`,
		}
		return nil
	})
	if err != nil {
		panic("reading the embedded dashboard: " + err.Error())
	}
	if _, ok := assets["index.html"]; !ok {
		panic("the embedded dashboard has no index.html")
	}
	return assets
}

// dashboardContentType names the media type of an embedded file by its
// extension, independent of the host's MIME database.
func dashboardContentType(name string) string {
	switch path.Ext(name) {
	case ".html":
		return "text/html; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".svg":
		return "image/svg+xml"
	}
	if t := mime.TypeByExtension(path.Ext(name)); t != "" {
		return t
	}
	return "application/octet-stream"
}

// hostPattern is what a Host header may hold to be named in the
// Content-Security-Policy (host, IPv4, [IPv6], optional port).
var hostPattern = regexp.MustCompile(`^[A-Za-z0-9.\-]+(:[0-9]+)?$|^\[[0-9A-Fa-f:.]+\](:[0-9]+)?$`)

// dashboardCSP is the page's Content-Security-Policy: only its own scripts
// and styles (no inline code), connections only to this service (HTTP and
// its WebSocket, which older browsers do not count as 'self'), no frames,
// no plugins, no form posts.
func dashboardCSP(r *http.Request) string {
	connect := "'self'"
	if hostPattern.MatchString(r.Host) {
		connect += " ws://" + r.Host + " wss://" + r.Host
	}
	return strings.Join([]string{
		"default-src 'none'",
		"script-src 'self'",
		"style-src 'self'",
		"img-src 'self' data:",
		"connect-src " + connect,
		"base-uri 'none'",
		"form-action 'none'",
		"frame-ancestors 'none'",
	}, "; ")
}

// mountDashboard serves the dashboard page at GET /dashboard (and
// /dashboard/) and its files under /dashboard/. The page and its files are
// public: the bearer token travels in the URL fragment, which browsers never
// send, and the page then keeps it in sessionStorage.
func (s *Server) mountDashboard() {
	assets := dashboardAssets()
	serve := func(w http.ResponseWriter, r *http.Request, name string) {
		asset, ok := assets[name]
		if !ok {
			writeProblem(w, r, &app.Error{Code: app.CodeNotFound, Message: "no such dashboard file"})
			return
		}
		h := w.Header()
		h.Set("Content-Type", asset.contentType)
		h.Set("Content-Security-Policy", dashboardCSP(r))
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		// The files are not content-addressed: revalidate each time (a 304
		// when the ETag still matches), so an upgrade is seen at once.
		h.Set("Cache-Control", "no-cache")
		h.Set("ETag", asset.etag)
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(asset.content))
	}
	index := func(w http.ResponseWriter, r *http.Request) { serve(w, r, "index.html") }
	s.mux.HandleFunc("GET /dashboard", index)
	s.mux.HandleFunc("GET /dashboard/{$}", index)
	s.mux.HandleFunc("GET /dashboard/{file...}", func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("file")
		if name == "index.html" {
			index(w, r)
			return
		}
		serve(w, r, name)
	})
}
